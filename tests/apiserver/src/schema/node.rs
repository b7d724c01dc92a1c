//! Read access to one node of a CRD's structural schema (`openAPIV3Schema`, the
//! `apiextensions.k8s.io/v1` `JSONSchemaProps` as JSON), and the field-path spelling kube-apiserver
//! uses in errors.

use serde_json::{Map, Value};

/// One schema node. A thin view over the JSON of a `JSONSchemaProps`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Node<'a>(pub(crate) &'a Value);

/// What `additionalProperties` allows for keys not listed in `properties`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Additional<'a> {
    /// Not set.
    Unset,
    /// `additionalProperties: true|false`.
    Bool(bool),
    /// `additionalProperties: {schema}`: every other key is validated against it.
    Schema(Node<'a>),
}

impl<'a> Node<'a> {
    /// The node of a CRD schema as callers hand it over: accepts either the `openAPIV3Schema`
    /// itself or the version's `schema` object wrapping it (`{"openAPIV3Schema": {...}}`).
    pub(crate) fn root(schema: &'a Value) -> Node<'a> {
        match schema.get("openAPIV3Schema") {
            Some(inner) if inner.is_object() => Node(inner),
            _ => Node(schema),
        }
    }

    /// A keyword's raw value.
    pub(crate) fn get(self, key: &str) -> Option<&'a Value> {
        self.0.get(key)
    }

    /// A boolean keyword, `false` when absent.
    pub(crate) fn flag(self, key: &str) -> bool {
        self.get(key).and_then(Value::as_bool).unwrap_or(false)
    }

    /// `type` (`object`, `array`, `string`, `integer`, `number`, `boolean`), if set.
    pub(crate) fn type_name(self) -> Option<&'a str> {
        self.get("type").and_then(Value::as_str)
    }

    /// `properties`.
    pub(crate) fn properties(self) -> Option<&'a Map<String, Value>> {
        self.get("properties").and_then(Value::as_object)
    }

    /// The schema of property `name`, if `properties` lists it.
    pub(crate) fn property(self, name: &str) -> Option<Node<'a>> {
        self.properties().and_then(|p| p.get(name)).map(Node)
    }

    /// `additionalProperties`.
    pub(crate) fn additional(self) -> Additional<'a> {
        match self.get("additionalProperties") {
            Some(Value::Bool(b)) => Additional::Bool(*b),
            Some(v @ Value::Object(_)) => Additional::Schema(Node(v)),
            _ => Additional::Unset,
        }
    }

    /// The schema a value under key `name` of an object is checked against: its property schema,
    /// else the `additionalProperties` schema.
    pub(crate) fn child(self, name: &str) -> Option<Node<'a>> {
        self.property(name).or(match self.additional() {
            Additional::Schema(node) => Some(node),
            _ => None,
        })
    }

    /// `items` (a single schema; tuple `items` are not structural).
    pub(crate) fn items(self) -> Option<Node<'a>> {
        self.get("items").filter(|v| v.is_object()).map(Node)
    }

    /// `x-kubernetes-preserve-unknown-fields: true`.
    pub(crate) fn preserve_unknown(self) -> bool {
        self.flag("x-kubernetes-preserve-unknown-fields")
    }

    /// `x-kubernetes-embedded-resource: true`: the value is a whole object with `apiVersion`,
    /// `kind` and `metadata`.
    pub(crate) fn embedded_resource(self) -> bool {
        self.flag("x-kubernetes-embedded-resource")
    }

    /// `x-kubernetes-int-or-string: true`.
    pub(crate) fn int_or_string(self) -> bool {
        self.flag("x-kubernetes-int-or-string")
    }

    /// `nullable: true`.
    pub(crate) fn nullable(self) -> bool {
        self.flag("nullable")
    }

    /// `x-kubernetes-list-type` (`atomic`, `set` or `map`); `None` means atomic.
    pub(crate) fn list_type(self) -> Option<&'a str> {
        self.get("x-kubernetes-list-type").and_then(Value::as_str)
    }

    /// `x-kubernetes-list-map-keys`.
    pub(crate) fn list_map_keys(self) -> Vec<&'a str> {
        self.get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .map(|keys| keys.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }

    /// `x-kubernetes-map-type` (`granular` or `atomic`).
    pub(crate) fn map_type(self) -> Option<&'a str> {
        self.get("x-kubernetes-map-type").and_then(Value::as_str)
    }

    /// `default`.
    pub(crate) fn default_value(self) -> Option<&'a Value> {
        self.get("default")
    }

    /// The sub-schemas of `allOf`, `anyOf` or `oneOf`.
    pub(crate) fn sub_schemas(self, key: &str) -> Vec<Node<'a>> {
        self.get(key)
            .and_then(Value::as_array)
            .map(|list| list.iter().filter(|v| v.is_object()).map(Node).collect())
            .unwrap_or_default()
    }
}

/// The keys `metadata` keeps at the root of an object and in embedded resources: the fields of
/// `metav1.ObjectMeta`. kube-apiserver drops others when it decodes the object.
pub(crate) const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// `field.Path.Child`: `parent.name`, or `name` at the root.
pub(crate) fn child_path(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}.{name}")
    }
}

/// `field.Path.Index`: `parent[i]`.
pub(crate) fn index_path(parent: &str, index: usize) -> String {
    format!("{parent}[{index}]")
}

/// For a list with `x-kubernetes-list-type: map`, the item of `old` whose map keys equal those of
/// `item` (kube-apiserver correlates list-map items this way for ratcheting and transition
/// rules).
pub(crate) fn correlate_map_item<'v>(
    keys: &[&str],
    item: &Value,
    old: &'v [Value],
) -> Option<&'v Value> {
    if keys.is_empty() {
        return None;
    }
    let wanted: Vec<Option<&Value>> = keys.iter().map(|k| item.get(*k)).collect();
    old.iter().find(|candidate| {
        keys.iter()
            .zip(&wanted)
            .all(|(k, w)| candidate.get(*k) == *w)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn root_unwraps_version_schema() {
        let wrapped = json!({"openAPIV3Schema": {"type": "object"}});
        assert_eq!(Node::root(&wrapped).type_name(), Some("object"));
        let bare = json!({"type": "string"});
        assert_eq!(Node::root(&bare).type_name(), Some("string"));
    }

    #[test]
    fn paths_are_spelled_like_field_path() {
        assert_eq!(child_path("", "spec"), "spec");
        assert_eq!(child_path("spec", "domain"), "spec.domain");
        assert_eq!(index_path("spec.ips", 1), "spec.ips[1]");
    }

    #[test]
    fn map_items_correlate_by_key() {
        let old = vec![json!({"type": "A", "v": 1}), json!({"type": "B", "v": 2})];
        let item = json!({"type": "B", "v": 3});
        assert_eq!(correlate_map_item(&["type"], &item, &old), Some(&old[1]));
        assert_eq!(correlate_map_item(&[], &item, &old), None);
    }
}
