//! `metadata.managedFields` entries (`metav1.ManagedFieldsEntry`) read from and written to an
//! object, and the parts of an object that field management tracks.

use serde_json::{Map, Value, json};

use super::fieldset::{self, FieldPath, FieldSet, PathElement};

/// `metadata` fields the API server sets itself; field management never tracks them and apply
/// never copies them from the applied configuration.
pub(crate) const SERVER_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "managedFields",
];

/// One `metav1.ManagedFieldsEntry`.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// `manager`.
    pub(crate) manager: String,
    /// `operation`: `Apply` or `Update`.
    pub(crate) operation: String,
    /// `subresource` (`status`), `None` for the main resource.
    pub(crate) subresource: Option<String>,
    /// `apiVersion` of the request that wrote the fields.
    pub(crate) api_version: String,
    /// `time` (RFC 3339, seconds).
    pub(crate) time: String,
    /// The owned fields (`fieldsV1`).
    pub(crate) fields: FieldSet,
}

impl Entry {
    /// Whether this entry belongs to `manager` doing `operation` on `subresource`.
    pub(crate) fn is(&self, manager: &str, operation: &str, subresource: Option<&str>) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
    }
}

/// The entries of `obj.metadata.managedFields`; malformed entries are skipped.
pub(crate) fn read_entries(obj: Option<&Value>) -> Vec<Entry> {
    let Some(list) = obj
        .and_then(|o| o.pointer("/metadata/managedFields"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|e| {
            let text = |k: &str| e.get(k).and_then(Value::as_str).map(str::to_string);
            Some(Entry {
                manager: text("manager")?,
                operation: text("operation").unwrap_or_else(|| "Update".to_string()),
                subresource: text("subresource").filter(|s| !s.is_empty()),
                api_version: text("apiVersion").unwrap_or_default(),
                time: text("time").unwrap_or_default(),
                fields: e.get("fieldsV1").map(fieldset::decode).unwrap_or_default(),
            })
        })
        .collect()
}

/// Writes `entries` to `obj.metadata.managedFields` (removing the key when there are none).
pub(crate) fn write_entries(obj: &mut Value, entries: &[Entry]) {
    let Some(root) = obj.as_object_mut() else {
        return;
    };
    let metadata = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(metadata) = metadata.as_object_mut() else {
        return;
    };
    if entries.is_empty() {
        metadata.remove("managedFields");
        return;
    }
    let list: Vec<Value> = entries
        .iter()
        .map(|e| {
            let mut v = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": fieldset::encode(&e.fields),
            });
            if let (Some(sub), Some(map)) = (&e.subresource, v.as_object_mut()) {
                map.insert("subresource".to_string(), Value::String(sub.clone()));
            }
            v
        })
        .collect();
    metadata.insert("managedFields".to_string(), Value::Array(list));
}

/// The current time as `managedFields[].time` spells it (`2024-01-02T03:04:05Z`).
pub(crate) fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The part of an object field management tracks: without `apiVersion`, `kind`,
/// `metadata.name`, `metadata.namespace` and the server-set metadata; an emptied `metadata` is
/// dropped.
pub(crate) fn tracked(obj: &Value) -> Value {
    let mut copy = obj.clone();
    if let Some(map) = copy.as_object_mut() {
        map.remove("apiVersion");
        map.remove("kind");
        let mut drop_meta = false;
        if let Some(Value::Object(meta)) = map.get_mut("metadata") {
            meta.remove("name");
            meta.remove("namespace");
            for key in SERVER_METADATA {
                meta.remove(*key);
            }
            drop_meta = meta.is_empty();
        }
        if drop_meta {
            map.remove("metadata");
        }
    }
    copy
}

/// Whether a list item matches a `k:` or `v:` element.
fn item_matches(item: &Value, element: &PathElement) -> bool {
    match element {
        PathElement::Key(json) => match serde_json::from_str::<Map<String, Value>>(json) {
            Ok(keys) => keys.iter().all(|(k, v)| item.get(k) == Some(v)),
            Err(_) => false,
        },
        PathElement::Value(json) => fieldset::canonical_json(item) == *json,
        _ => false,
    }
}

/// The value at `path`, if it exists.
pub(crate) fn value_at<'v>(value: &'v Value, path: &[PathElement]) -> Option<&'v Value> {
    let mut current = value;
    for element in path {
        current = match element {
            PathElement::Field(name) => current.as_object()?.get(name)?,
            PathElement::Index(i) => current.as_array()?.get(*i)?,
            other => current
                .as_array()?
                .iter()
                .find(|item| item_matches(item, other))?,
        };
    }
    Some(current)
}

fn value_at_mut<'v>(value: &'v mut Value, path: &[PathElement]) -> Option<&'v mut Value> {
    let mut current = value;
    for element in path {
        current = match element {
            PathElement::Field(name) => current.as_object_mut()?.get_mut(name)?,
            PathElement::Index(i) => current.as_array_mut()?.get_mut(*i)?,
            other => current
                .as_array_mut()?
                .iter_mut()
                .find(|item| item_matches(item, other))?,
        };
    }
    Some(current)
}

/// Removes the value at `path`; `false` when it did not exist.
pub(crate) fn remove_at(value: &mut Value, path: &[PathElement]) -> bool {
    let Some((last, parent_path)) = path.split_last() else {
        return false;
    };
    let Some(parent) = value_at_mut(value, parent_path) else {
        return false;
    };
    match (last, parent) {
        (PathElement::Field(name), Value::Object(map)) => map.remove(name).is_some(),
        (PathElement::Index(i), Value::Array(items)) if *i < items.len() => {
            items.remove(*i);
            true
        }
        (element, Value::Array(items)) => {
            match items.iter().position(|item| item_matches(item, element)) {
                Some(pos) => {
                    items.remove(pos);
                    true
                }
                None => false,
            }
        }
        _ => false,
    }
}

/// Drops from every entry the paths that no longer exist in `tracked_obj`, then the entries left
/// without fields.
pub(crate) fn prune_entries(entries: &mut Vec<Entry>, tracked_obj: &Value) {
    for entry in entries.iter_mut() {
        entry
            .fields
            .retain(|p: &FieldPath| value_at(tracked_obj, p).is_some());
    }
    entries.retain(|e| !e.fields.is_empty());
}
