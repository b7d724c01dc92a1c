//! Structural defaulting, as kube-apiserver applies a CRD schema's `default`s when it decodes a
//! custom resource (Kubernetes docs, "Custom Resource Definitions", section "Defaulting"):
//!
//! - a property that is absent gets a deep copy of its schema's `default`; defaulting then
//!   continues inside the defaulted value, so nested defaults apply too;
//! - a property that is `null` while its schema is not `nullable` gets the default as well, and is
//!   removed when there is none (kube-apiserver's "prune non-nullable nulls without defaults");
//! - `null` list items get the `items` default when the items are not `nullable`;
//! - present values are never overwritten.

use serde_json::Value;

use super::node::Node;

/// Applies the defaults of `schema` to `value` in place. `resource_root` marks the object's root or
/// an embedded resource, whose `metadata` is left alone.
pub(crate) fn apply_defaults(schema: Node<'_>, value: &mut Value, resource_root: bool) {
    match value {
        Value::Object(map) => {
            if let Some(properties) = schema.properties() {
                for (name, prop) in properties {
                    if resource_root && name == "metadata" {
                        continue;
                    }
                    let prop = Node(prop);
                    match map.get(name) {
                        None => {
                            if let Some(default) = prop.default_value() {
                                map.insert(name.clone(), default.clone());
                            }
                        }
                        Some(Value::Null) if !prop.nullable() => match prop.default_value() {
                            Some(default) => {
                                map.insert(name.clone(), default.clone());
                            }
                            None => {
                                map.remove(name);
                            }
                        },
                        Some(_) => {}
                    }
                }
            }
            for (name, child) in map.iter_mut() {
                if resource_root && (name == "metadata" || name == "apiVersion" || name == "kind") {
                    continue;
                }
                if let Some(child_schema) = schema.child(name) {
                    apply_defaults(child_schema, child, child_schema.embedded_resource());
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.items() {
                for item in items.iter_mut() {
                    if item.is_null()
                        && !item_schema.nullable()
                        && let Some(default) = item_schema.default_value()
                    {
                        *item = default.clone();
                    }
                    apply_defaults(item_schema, item, item_schema.embedded_resource());
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(schema: Value, mut value: Value) -> Value {
        apply_defaults(Node(&schema), &mut value, true);
        value
    }

    #[test]
    fn absent_fields_get_defaults_nested() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "default": {}, "properties": {
            "policy": {"type": "string", "default": "Delete"},
            "inner": {"type": "object", "default": {}, "properties": {"n": {"type": "integer", "default": 3}}}
        }}}});
        assert_eq!(
            run(schema, json!({})),
            json!({"spec": {"policy": "Delete", "inner": {"n": 3}}})
        );
    }

    #[test]
    fn present_values_are_kept() {
        let schema =
            json!({"type": "object", "properties": {"p": {"type": "string", "default": "A"}}});
        assert_eq!(run(schema, json!({"p": "B"})), json!({"p": "B"}));
    }

    #[test]
    fn nulls_are_defaulted_or_dropped_unless_nullable() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "string", "default": "x"},
            "b": {"type": "string"},
            "c": {"type": "string", "nullable": true, "default": "y"}
        }});
        assert_eq!(
            run(schema, json!({"a": null, "b": null, "c": null})),
            json!({"a": "x", "c": null})
        );
    }

    #[test]
    fn list_items_and_map_values_are_defaulted() {
        let schema = json!({"type": "object", "properties": {
            "list": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string", "default": "d"}}}},
            "map": {"type": "object", "additionalProperties": {"type": "object", "properties": {"k": {"type": "integer", "default": 1}}}}
        }});
        assert_eq!(
            run(schema, json!({"list": [{}, {"k": "x"}], "map": {"a": {}}})),
            json!({"list": [{"k": "d"}, {"k": "x"}], "map": {"a": {"k": 1}}})
        );
    }
}
