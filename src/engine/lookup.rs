//! Finding the API object that a resource stands for, without ever creating a duplicate:
//! by the `mailtarget.co/external-id` annotation, then by the id recorded in `status.id`, then
//! by the natural key (sub account name, key name, domain).

/// How a resource was matched to its API object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum MatchedBy {
    /// The `mailtarget.co/external-id` annotation.
    ExternalId,
    /// The id recorded in `status.id` by an earlier reconcile.
    StatusId,
    /// The natural key (name or domain): the object is adopted.
    NaturalKey,
}

/// A matched API object: its id and how it was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Found {
    /// Id in the service.
    pub id: i64,
    /// How it was found.
    pub matched_by: MatchedBy,
}

/// The outcome of a lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup<'a, T> {
    /// Exactly one API object matches.
    Found(&'a T, Found),
    /// No API object matches: it may be created.
    Missing,
    /// Several API objects carry the natural key: nothing is adopted or created until the user
    /// picks one with the external-id annotation. Holds their ids.
    Ambiguous(Vec<i64>),
    /// The external-id annotation names an id that does not exist.
    ExternalIdNotFound(i64),
}

impl<T> Lookup<'_, T> {
    /// Why this lookup stops the resource, for people: `Some((reason, message))` for an
    /// ambiguous natural key (`AmbiguousMatch`) or an unknown external id
    /// (`ExternalObjectNotFound`); `None` when the object was found or may be created.
    /// `noun` names the API object (`API key`), `key` the natural key searched for.
    pub fn blocked(&self, noun: &str, key: &str) -> Option<(&'static str, String)> {
        let annotation = crate::crd::ANNOTATION_EXTERNAL_ID;
        match self {
            Lookup::Ambiguous(ids) => Some((
                "AmbiguousMatch",
                format!(
                    "{} {noun}s match \"{key}\" (ids {}); set the {annotation} annotation to the id to adopt, or delete the extra ones",
                    ids.len(),
                    ids.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
            Lookup::ExternalIdNotFound(id) => Some((
                "ExternalObjectNotFound",
                format!("the {annotation} annotation names {noun} {id}, which does not exist"),
            )),
            Lookup::Found(..) | Lookup::Missing => None,
        }
    }
}

/// Finds the item of `items` that a resource stands for.
///
/// `external_id` wins when set (and is an error when absent from `items`); then `status_id`;
/// then every item for which `natural` is true. An id in `status_id` that no longer exists (the
/// object was deleted out of band) falls through to the natural key, then to [`Lookup::Missing`].
pub fn find<'a, T>(
    items: &'a [T],
    id_of: impl Fn(&T) -> i64,
    external_id: Option<i64>,
    status_id: Option<i64>,
    natural: impl Fn(&T) -> bool,
) -> Lookup<'a, T> {
    if let Some(want) = external_id {
        return match items.iter().find(|i| id_of(i) == want) {
            Some(item) => Lookup::Found(
                item,
                Found {
                    id: want,
                    matched_by: MatchedBy::ExternalId,
                },
            ),
            None => Lookup::ExternalIdNotFound(want),
        };
    }
    if let Some(want) = status_id
        && let Some(item) = items.iter().find(|i| id_of(i) == want)
    {
        return Lookup::Found(
            item,
            Found {
                id: want,
                matched_by: MatchedBy::StatusId,
            },
        );
    }
    let matches: Vec<&T> = items.iter().filter(|i| natural(i)).collect();
    match matches.as_slice() {
        [] => Lookup::Missing,
        [one] => Lookup::Found(
            one,
            Found {
                id: id_of(one),
                matched_by: MatchedBy::NaturalKey,
            },
        ),
        many => Lookup::Ambiguous(many.iter().map(|i| id_of(i)).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Item = (i64, &'static str);
    const ITEMS: &[Item] = &[(1, "a"), (2, "b"), (3, "b")];

    fn run(ext: Option<i64>, status: Option<i64>, name: &str) -> Lookup<'static, Item> {
        find(ITEMS, |i| i.0, ext, status, |i| i.1 == name)
    }

    /// The lookup order is external id, status id, natural key; ambiguity adopts nothing.
    #[test]
    fn lookup_table() {
        assert!(matches!(
            run(Some(2), Some(1), "a"),
            Lookup::Found(
                _,
                Found {
                    id: 2,
                    matched_by: MatchedBy::ExternalId
                }
            )
        ));
        assert_eq!(run(Some(9), None, "a"), Lookup::ExternalIdNotFound(9));
        assert!(matches!(
            run(None, Some(1), "b"),
            Lookup::Found(
                _,
                Found {
                    id: 1,
                    matched_by: MatchedBy::StatusId
                }
            )
        ));
        assert!(matches!(
            run(None, Some(9), "a"),
            Lookup::Found(
                _,
                Found {
                    id: 1,
                    matched_by: MatchedBy::NaturalKey
                }
            )
        ));
        assert_eq!(run(None, None, "b"), Lookup::Ambiguous(vec![2, 3]));
        assert_eq!(run(None, Some(9), "z"), Lookup::Missing);
    }
}
