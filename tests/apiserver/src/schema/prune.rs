//! Structural pruning: removes fields a CRD's schema does not specify, as kube-apiserver does
//! before it stores a custom resource (Kubernetes docs, "Custom Resource Definitions", section
//! "Field pruning").
//!
//! Rules: a key of an object is kept when the object's schema lists it in `properties`, when
//! `additionalProperties` is a schema or `true`, or when the object has
//! `x-kubernetes-preserve-unknown-fields: true`; otherwise it is dropped. At the root and in
//! `x-kubernetes-embedded-resource` objects, `apiVersion` and `kind` are always kept and `metadata`
//! keeps the `ObjectMeta` fields only. Below a node without a schema nothing is pruned. Every
//! dropped field is reported by path (`spec.foo`, `spec.items[0].bar`, `metadata.foo`), the list
//! kube-apiserver turns into `unknown field "spec.foo"` for `fieldValidation=Strict|Warn`.

use serde_json::Value;

use super::node::{Additional, Node, OBJECT_META_FIELDS, child_path, index_path};

/// Prunes `value` in place against `schema` and appends the dropped fields' paths to `dropped`.
/// `resource_root` marks the object's root or an embedded resource.
pub(crate) fn prune(
    schema: Node<'_>,
    value: &mut Value,
    path: &str,
    resource_root: bool,
    dropped: &mut Vec<String>,
) {
    match value {
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let child = child_path(path, &key);
                let Some(child_value) = map.get_mut(&key) else {
                    continue;
                };
                if resource_root {
                    match key.as_str() {
                        "metadata" => {
                            prune_object_meta(child_value, &child, dropped);
                            continue;
                        }
                        "apiVersion" | "kind" if schema.property(&key).is_none() => continue,
                        _ => {}
                    }
                }
                if let Some(prop) = schema.property(&key) {
                    prune(prop, child_value, &child, prop.embedded_resource(), dropped);
                    continue;
                }
                match schema.additional() {
                    Additional::Schema(node) => {
                        prune(node, child_value, &child, node.embedded_resource(), dropped)
                    }
                    Additional::Bool(true) => {}
                    _ if schema.preserve_unknown() => {}
                    _ => {
                        map.remove(&key);
                        dropped.push(child);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.items() {
                for (i, item) in items.iter_mut().enumerate() {
                    prune(
                        item_schema,
                        item,
                        &index_path(path, i),
                        item_schema.embedded_resource(),
                        dropped,
                    );
                }
            }
        }
        _ => {}
    }
}

/// Drops the keys of a `metadata` object that `metav1.ObjectMeta` does not have.
fn prune_object_meta(meta: &mut Value, path: &str, dropped: &mut Vec<String>) {
    if let Value::Object(map) = meta {
        let unknown: Vec<String> = map
            .keys()
            .filter(|k| !OBJECT_META_FIELDS.contains(&k.as_str()))
            .cloned()
            .collect();
        for key in unknown {
            map.remove(&key);
            dropped.push(child_path(path, &key));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sorted(mut v: Vec<String>) -> Vec<String> {
        v.sort();
        v
    }

    fn run(schema: &Value, mut value: Value) -> (Value, Vec<String>) {
        let mut dropped = Vec::new();
        prune(Node(schema), &mut value, "", true, &mut dropped);
        (value, dropped)
    }

    #[test]
    fn drops_unknown_keeps_type_meta_and_object_meta() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}});
        let (out, dropped) = run(
            &schema,
            json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n", "bogus": 1}, "spec": {"a": "x", "b": 1}, "extra": true}),
        );
        assert_eq!(
            out,
            json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n"}, "spec": {"a": "x"}})
        );
        assert_eq!(sorted(dropped), vec!["extra", "metadata.bogus", "spec.b"]);
    }

    #[test]
    fn preserve_unknown_fields_and_additional_properties_keep_keys() {
        let schema = json!({"type": "object", "properties": {
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"known": {"type": "object", "properties": {}}}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "list": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "string"}}}}
        }});
        let (out, dropped) = run(
            &schema,
            json!({"free": {"x": {"deep": 1}, "known": {"gone": 1}}, "labels": {"a": "b"}, "list": [{"n": "a", "z": 1}]}),
        );
        assert_eq!(
            out,
            json!({"free": {"x": {"deep": 1}, "known": {}}, "labels": {"a": "b"}, "list": [{"n": "a"}]})
        );
        assert_eq!(sorted(dropped), vec!["free.known.gone", "list[0].z"]);
    }

    #[test]
    fn embedded_resources_keep_their_type_meta() {
        let schema = json!({"type": "object", "properties": {"template": {
            "type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": false,
            "properties": {"spec": {"type": "object"}}}}});
        let (out, dropped) = run(
            &schema,
            json!({"template": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "a", "x": 1}, "spec": {}, "data": {}}}),
        );
        assert_eq!(
            out,
            json!({"template": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "a"}, "spec": {}}})
        );
        assert_eq!(
            sorted(dropped),
            vec!["template.data", "template.metadata.x"]
        );
    }
}
