//! One YAML document read as a JSON value, the way kubectl reads it: mapping keys are the text
//! of their scalar, and a mapping that gives a key twice is refused (kubectl: "mapping key
//! already defined"; serde_json's own `Value` would keep the last one silently). A merge key
//! (`<<: *defaults`, YAML 1.1's merge type, which kubectl's reader applies) adds the keys of the
//! mapping it names (or of each mapping of a list, the first one winning) that the mapping does
//! not give itself. YAML tags other than the core schema's (`!Foo bar`) have no JSON form and
//! are refused too, and so are NaN and the infinities (`.nan`, `.inf`), which JSON cannot hold:
//! read as null, they would unset the field silently.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// A document's value; see the module documentation.
pub struct Document(pub Value);

impl<'de> Deserialize<'de> for Document {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(DocumentVisitor).map(Document)
    }
}

struct DocumentVisitor;

/// The key of YAML's merge type.
const MERGE_KEY: &str = "<<";

impl<'de> Visitor<'de> for DocumentVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML value with a JSON form")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }

    /// NaN and infinities, which JSON lacks, are refused (serde_json's `Value` would make them
    /// `null`, silently unsetting the field).
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v).map(Value::Number).ok_or_else(|| {
            E::custom(format!(
                "{v} is a number JSON cannot hold (.inf, -.inf or .nan); quote it to give a string"
            ))
        })
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        Document::deserialize(deserializer).map(|d| d.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Document(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut fields = Map::new();
        let mut merged = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let Document(value) = map.next_value()?;
            if key == MERGE_KEY {
                match value {
                    Value::Object(m) => merged.push(m),
                    Value::Array(list) if list.iter().all(Value::is_object) => {
                        merged.extend(list.into_iter().filter_map(|v| match v {
                            Value::Object(m) => Some(m),
                            _ => None,
                        }));
                    }
                    _ => {
                        return Err(de::Error::custom(
                            "a merge key (<<) takes a mapping or a list of mappings",
                        ));
                    }
                }
                continue;
            }
            if fields.contains_key(&key) {
                let shown = crate::text::printable(&key, crate::text::MAX_VALUE_CHARS);
                return Err(de::Error::custom(format!(
                    "the mapping gives key \"{shown}\" twice: keep one"
                )));
            }
            fields.insert(key, value);
        }
        for (key, value) in merged.into_iter().flatten() {
            fields.entry(key).or_insert(value);
        }
        Ok(Value::Object(fields))
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, _data: A) -> Result<Value, A::Error> {
        Err(de::Error::custom(
            "a YAML tag (`!name`) has no JSON form: remove it",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Value, String> {
        let de = serde_yaml::Deserializer::from_str(text);
        Document::deserialize(de)
            .map(|d| d.0)
            .map_err(|e| e.to_string())
    }

    /// Keys keep their scalar's text; values keep their YAML type.
    #[test]
    fn reads_as_kubectl_does() {
        let v = read("a: 1\n0x10: x\nb: [true, 1.5, ~, \"s\"]\n").unwrap();
        assert_eq!(
            v,
            serde_json::json!({"a": 1, "0x10": "x", "b": [true, 1.5, null, "s"]})
        );
    }

    /// A merge key adds the keys the mapping does not give itself: given ones win, and of a
    /// list of mappings the first one.
    #[test]
    fn merge_keys_add_what_is_not_given() {
        let text = "base: &b {a: 1, b: 2}\nother: &o {b: 3, c: 4}\nx:\n  <<: [*b, *o]\n  a: 0\n";
        let v = read(text).unwrap();
        assert_eq!(v["x"], serde_json::json!({"a": 0, "b": 2, "c": 4}));
        let e = read("x: {<<: 1}\n").unwrap_err();
        assert!(e.contains("merge key"), "{e}");
    }

    /// A key given twice, also as another scalar with the same text, and a tag are refused.
    #[test]
    fn refuses_repeated_keys_and_tags() {
        for text in ["a: 1\na: 2\n", "x: {1: a, \"1\": b}\n"] {
            let e = read(text).unwrap_err();
            assert!(e.contains("twice"), "{text}: {e}");
        }
        let e = read("spec: !Foo {a: 1}\n").unwrap_err();
        assert!(e.contains("YAML tag"), "{e}");
    }
}
