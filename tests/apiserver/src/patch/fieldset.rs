//! Field sets of server-side apply: the paths a field manager owns, and their `FieldsV1`
//! encoding in `metadata.managedFields` (Kubernetes docs, "Server-Side Apply", section "Field
//! management"; the encoding of sigs.k8s.io/structured-merge-diff).
//!
//! A path is a list of elements: `f:<name>` a field of a map, `k:{"type":"Ready"}` the item of a
//! list-type map with those key values, `v:"x"` the item of a list-type set equal to that value,
//! `i:0` a list index. In `FieldsV1`, each element is a key of a nested object; `{}` marks an
//! owned leaf and `".": {}` an owned node that also has owned children.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde_json::{Map, Value};

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum PathElement {
    /// A field of a map or object: `f:name`.
    Field(String),
    /// An item of a list-type map, by its key fields as canonical JSON (sorted keys): `k:{...}`.
    Key(String),
    /// An item of a list-type set, by its canonical JSON value: `v:...`.
    Value(String),
    /// A list index: `i:0`.
    Index(usize),
}

/// A field path from the object's root.
pub(crate) type FieldPath = Vec<PathElement>;

/// A set of owned field paths.
pub(crate) type FieldSet = BTreeSet<FieldPath>;

/// Canonical JSON: object keys sorted, no spaces (the `k:`/`v:` spelling).
pub(crate) fn canonical_json(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| {
                    format!(
                        "{}:{}",
                        Value::String((*k).clone()),
                        canonical_json(&map[k.as_str()])
                    )
                })
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(items) => format!(
            "[{}]",
            items
                .iter()
                .map(canonical_json)
                .collect::<Vec<_>>()
                .join(",")
        ),
        other => other.to_string(),
    }
}

/// The `k:` element of a list-map item: its key fields as canonical JSON.
pub(crate) fn key_element(item: &Value, keys: &[String]) -> PathElement {
    let mut key = Map::new();
    for k in keys {
        if let Some(v) = item.get(k) {
            key.insert(k.clone(), v.clone());
        }
    }
    PathElement::Key(canonical_json(&Value::Object(key)))
}

impl PathElement {
    /// The `FieldsV1` key: `f:name`, `k:{...}`, `v:...`, `i:0`.
    fn encoded(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(json) => format!("k:{json}"),
            PathElement::Value(json) => format!("v:{json}"),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    fn decode(key: &str) -> Option<PathElement> {
        let (prefix, rest) = key.split_at_checked(2)?;
        match prefix {
            "f:" => Some(PathElement::Field(rest.to_string())),
            "k:" => {
                let parsed: Value = serde_json::from_str(rest).ok()?;
                Some(PathElement::Key(canonical_json(&parsed)))
            }
            "v:" => {
                let parsed: Value = serde_json::from_str(rest).ok()?;
                Some(PathElement::Value(canonical_json(&parsed)))
            }
            "i:" => rest.parse().ok().map(PathElement::Index),
            _ => None,
        }
    }
}

/// A path as structured-merge-diff prints it in conflicts: `.spec.name`,
/// `.status.conditions[type="Ready"].status`, `.metadata.finalizers[="x"]`, `.spec.list[0]`.
pub(crate) fn path_string(path: &[PathElement]) -> String {
    let mut out = String::new();
    for element in path {
        match element {
            PathElement::Field(name) => {
                out.push('.');
                out.push_str(name);
            }
            PathElement::Key(json) => {
                let parsed: Value = serde_json::from_str(json).unwrap_or(Value::Null);
                let parts: Vec<String> = parsed
                    .as_object()
                    .map(|m| {
                        let mut keys: Vec<&String> = m.keys().collect();
                        keys.sort();
                        keys.iter()
                            .map(|k| format!("{k}={}", canonical_json(&m[k.as_str()])))
                            .collect()
                    })
                    .unwrap_or_default();
                let _ = write!(out, "[{}]", parts.join(","));
            }
            PathElement::Value(json) => {
                let _ = write!(out, "[={json}]");
            }
            PathElement::Index(i) => {
                let _ = write!(out, "[{i}]");
            }
        }
    }
    out
}

#[derive(Default)]
struct Tree {
    member: bool,
    children: BTreeMap<PathElement, Tree>,
}

/// Encodes a set as a `FieldsV1` object.
pub(crate) fn encode(set: &FieldSet) -> Value {
    let mut root = Tree::default();
    for path in set {
        let mut node = &mut root;
        for element in path {
            node = node.children.entry(element.clone()).or_default();
        }
        node.member = true;
    }
    encode_tree(&root)
}

fn encode_tree(tree: &Tree) -> Value {
    let mut map = Map::new();
    if tree.member && !tree.children.is_empty() {
        map.insert(".".to_string(), Value::Object(Map::new()));
    }
    for (element, child) in &tree.children {
        map.insert(element.encoded(), encode_tree(child));
    }
    Value::Object(map)
}

/// Decodes a `FieldsV1` object; keys that are not valid elements are skipped.
pub(crate) fn decode(fields: &Value) -> FieldSet {
    let mut set = FieldSet::new();
    let mut path = Vec::new();
    decode_into(fields, &mut path, &mut set);
    set
}

fn decode_into(fields: &Value, path: &mut FieldPath, set: &mut FieldSet) {
    let Some(map) = fields.as_object() else {
        return;
    };
    for (key, child) in map {
        if key == "." {
            if !path.is_empty() {
                set.insert(path.clone());
            }
            continue;
        }
        let Some(element) = PathElement::decode(key) else {
            continue;
        };
        path.push(element);
        if child.as_object().is_none_or(Map::is_empty) {
            set.insert(path.clone());
        } else {
            decode_into(child, path, set);
        }
        path.pop();
    }
}

/// Whether `set` holds `path` or a path below it.
pub(crate) fn covers(set: &FieldSet, path: &[PathElement]) -> bool {
    set.iter().any(|p| p.starts_with(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(name: &str) -> PathElement {
        PathElement::Field(name.to_string())
    }

    #[test]
    fn encodes_and_decodes_fields_v1() {
        let mut set = FieldSet::new();
        set.insert(vec![f("spec"), f("name")]);
        set.insert(vec![f("metadata"), f("labels")]);
        set.insert(vec![f("metadata"), f("labels"), f("app")]);
        set.insert(vec![
            f("status"),
            f("conditions"),
            key_element(&json!({"type": "Ready", "x": 1}), &["type".into()]),
        ]);
        set.insert(vec![
            f("status"),
            f("conditions"),
            key_element(&json!({"type": "Ready"}), &["type".into()]),
            f("status"),
        ]);
        set.insert(vec![
            f("metadata"),
            f("finalizers"),
            PathElement::Value("\"a\"".into()),
        ]);
        let encoded = encode(&set);
        assert_eq!(
            encoded,
            json!({
                "f:metadata": {"f:finalizers": {"v:\"a\"": {}}, "f:labels": {".": {}, "f:app": {}}},
                "f:spec": {"f:name": {}},
                "f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}}}}
            })
        );
        assert_eq!(decode(&encoded), set);
    }

    #[test]
    fn paths_print_like_structured_merge_diff() {
        let path = vec![
            f("status"),
            f("conditions"),
            PathElement::Key("{\"type\":\"Ready\"}".into()),
            f("status"),
        ];
        assert_eq!(
            path_string(&path),
            ".status.conditions[type=\"Ready\"].status"
        );
        assert_eq!(
            path_string(&[f("a"), PathElement::Value("\"x\"".into())]),
            ".a[=\"x\"]"
        );
        assert_eq!(path_string(&[f("a"), PathElement::Index(2)]), ".a[2]");
    }

    #[test]
    fn decode_skips_garbage() {
        assert_eq!(
            decode(&json!({"zz": {}, "k:not json": {}, "f:a": {}})).len(),
            1
        );
        assert!(decode(&json!("nope")).is_empty());
    }
}
