//! The invariants of `x-kubernetes-list-type` lists, as kube-apiserver checks them for custom
//! resources (`apiextensions-apiserver/pkg/apiserver/schema/listtype`): items of a `set` are
//! unique, items of a `map` have unique `x-kubernetes-list-map-keys` values. A repeated item is a
//! `Duplicate value` error at the later item's index.

use serde_json::{Map, Value};

use super::error::{FieldError, render_value};
use super::node::{Node, child_path, index_path};
use super::validate::json_equal;

/// Checks every list below `value` (inclusive) and appends duplicates to `errs`.
pub(crate) fn validate_list_types(
    schema: Node<'_>,
    value: &Value,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    match value {
        Value::Array(items) => {
            match schema.list_type() {
                Some("set") => {
                    for (i, item) in items.iter().enumerate() {
                        if items[..i].iter().any(|earlier| json_equal(earlier, item)) {
                            errs.push(FieldError::duplicate(
                                &index_path(path, i),
                                &render_value(item),
                            ));
                        }
                    }
                }
                Some("map") => {
                    let keys = schema.list_map_keys();
                    let key_of = |item: &Value| -> Value {
                        let mut key = Map::new();
                        for k in &keys {
                            if let Some(v) = item.get(*k) {
                                key.insert((*k).to_string(), v.clone());
                            }
                        }
                        Value::Object(key)
                    };
                    for (i, item) in items.iter().enumerate() {
                        let key = key_of(item);
                        if items[..i]
                            .iter()
                            .any(|earlier| json_equal(&key_of(earlier), &key))
                        {
                            errs.push(FieldError::duplicate(
                                &index_path(path, i),
                                &render_value(&key),
                            ));
                        }
                    }
                }
                _ => {}
            }
            if let Some(item_schema) = schema.items() {
                for (i, item) in items.iter().enumerate() {
                    validate_list_types(item_schema, item, &index_path(path, i), errs);
                }
            }
        }
        Value::Object(map) => {
            for (key, child) in map {
                if let Some(child_schema) = schema.child(key) {
                    validate_list_types(child_schema, child, &child_path(path, key), errs);
                }
            }
        }
        _ => {}
    }
}
