//! Small serde helpers shared by the wire types.

use serde::{Deserialize, Deserializer};

/// Deserializes a value whose `null` means "absent": `null` becomes `T::default()`.
///
/// Used with `#[serde(default, deserialize_with = "nullable")]` so that both a missing field and
/// an explicit `null` give the default, while a value of the wrong type is still an error.
pub(crate) fn nullable<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Deserializes a list of strings that a server may also send as one bare string.
///
/// The interface document gives the sending domain `status` as an array in the detail and as a
/// single string in the list item; this accepts either shape for the detail so a server that
/// mixes them up still decodes. `null` gives an empty list.
pub(crate) fn string_or_list<'de, D>(deserializer: D) -> Result<Vec<String>, D::Error>
where
    D: Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged, expecting = "a string or an array of strings")]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Option::<OneOrMany>::deserialize(deserializer)? {
        None => Vec::new(),
        Some(OneOrMany::One(one)) => vec![one],
        Some(OneOrMany::Many(many)) => many,
    })
}
