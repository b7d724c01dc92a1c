//! Strategic merge patch (`application/strategic-merge-patch+json`), as kube-apiserver applies it
//! to built-in kinds (Kubernetes docs, "Update API Objects in Place Using kubectl patch", and the
//! strategic merge patch design in the Kubernetes community repository).
//!
//! - Maps merge recursively; `null` deletes a key; scalars replace.
//! - Directives inside a map: `$patch: replace` (the patch's map replaces the original),
//!   `$patch: delete` (the map is removed), `$patch: merge` (the default), `$retainKeys: [...]`
//!   (after merging, keys not listed are cleared), `$setElementOrder/<list>` (accepted, the order
//!   is not applied), `$deleteFromPrimitiveList/<list>: [...]` (those values leave the list).
//! - Lists with a merge key merge item by item (an item `{"<key>": ..., "$patch": "delete"}`
//!   removes the item; an item `{"$patch": "replace"}` makes the rest of the list replace the
//!   original): `metadata.ownerReferences` by `uid`, `conditions` by `type`, pod template lists
//!   (`containers`, `initContainers`, `ephemeralContainers`, `env`, `volumes`, `imagePullSecrets`)
//!   by `name`, `volumeMounts` by `mountPath`.
//! - `metadata.finalizers` merges as a set of strings (the patch's values are added).
//! - Other lists are replaced.

use serde_json::{Map, Value};

/// How a list at a given field merges.
enum ListStrategy {
    Replace,
    MergePrimitive,
    MergeByKey(&'static str),
}

fn list_strategy(path: &[String], field: &str) -> ListStrategy {
    let in_metadata = path.len() == 1 && path[0] == "metadata";
    match field {
        "finalizers" if in_metadata => ListStrategy::MergePrimitive,
        "ownerReferences" if in_metadata => ListStrategy::MergeByKey("uid"),
        "conditions" => ListStrategy::MergeByKey("type"),
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets" => ListStrategy::MergeByKey("name"),
        "volumeMounts" => ListStrategy::MergeByKey("mountPath"),
        _ => ListStrategy::Replace,
    }
}

/// Applies a strategic merge patch to `target` (see the module documentation).
///
/// Errors: a patch that is not a JSON object, a `$patch` directive other than `replace`,
/// `delete` or `merge`, `$patch: delete` at the root, or a `$retainKeys` that is not a list of
/// strings. `target` may be partly patched when an error is returned.
pub fn strategic_merge_patch(target: &mut Value, patch: &Value) -> Result<(), String> {
    let Some(patch_map) = patch.as_object() else {
        return Err("strategic merge patch must be a JSON object".to_string());
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Some(target_map) = target.as_object_mut() else {
        return Err("the object to patch is not a JSON object".to_string());
    };
    match merge_map(target_map, patch_map, &mut Vec::new())? {
        Outcome::Keep => Ok(()),
        Outcome::Delete => {
            Err("$patch: delete is not allowed at the root of a strategic merge patch".to_string())
        }
    }
}

enum Outcome {
    Keep,
    Delete,
}

fn merge_map(
    original: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    path: &mut Vec<String>,
) -> Result<Outcome, String> {
    match patch.get("$patch") {
        None => {}
        Some(Value::String(directive)) => match directive.as_str() {
            "merge" => {}
            "replace" => {
                *original = clean_map(patch)?;
                return Ok(Outcome::Keep);
            }
            "delete" => return Ok(Outcome::Delete),
            other => return Err(format!("unknown patch type: {other}")),
        },
        Some(other) => return Err(format!("unknown patch type: {other}")),
    }
    let retain_keys = match patch.get("$retainKeys") {
        None => None,
        Some(Value::Array(keys)) => {
            let names: Option<Vec<String>> = keys
                .iter()
                .map(|k| k.as_str().map(str::to_string))
                .collect();
            Some(names.ok_or_else(|| "$retainKeys must be a list of strings".to_string())?)
        }
        Some(_) => return Err("$retainKeys must be a list of strings".to_string()),
    };

    for (key, value) in patch {
        if key == "$patch" || key == "$retainKeys" || key.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(remove)) =
                (original.get_mut(field), value)
            {
                list.retain(|item| !remove.contains(item));
            }
            continue;
        }
        match value {
            Value::Null => {
                original.remove(key);
            }
            Value::Object(child_patch) => match original.get_mut(key) {
                Some(Value::Object(child)) => {
                    path.push(key.clone());
                    let outcome = merge_map(child, child_patch, path)?;
                    path.pop();
                    if let Outcome::Delete = outcome {
                        original.remove(key);
                    }
                }
                _ => {
                    if child_patch.get("$patch").and_then(Value::as_str) == Some("delete") {
                        original.remove(key);
                    } else {
                        original.insert(key.clone(), Value::Object(clean_map(child_patch)?));
                    }
                }
            },
            Value::Array(items) => {
                let merged = match (list_strategy(path, key), original.get_mut(key)) {
                    (ListStrategy::MergeByKey(merge_key), Some(Value::Array(existing))) => {
                        path.push(key.clone());
                        let result = merge_keyed_list(existing, items, merge_key, path);
                        path.pop();
                        result?;
                        None
                    }
                    (ListStrategy::MergePrimitive, Some(Value::Array(existing))) => {
                        merge_primitive_list(existing, items)?;
                        None
                    }
                    _ => Some(clean_list(items)?),
                };
                if let Some(list) = merged {
                    original.insert(key.clone(), Value::Array(list));
                }
            }
            scalar => {
                original.insert(key.clone(), scalar.clone());
            }
        }
    }

    if let Some(keep) = retain_keys {
        original.retain(|k, _| keep.contains(k));
    }
    Ok(Outcome::Keep)
}

fn is_replace_directive(item: &Value) -> bool {
    item.get("$patch").and_then(Value::as_str) == Some("replace")
}

fn merge_keyed_list(
    original: &mut Vec<Value>,
    patch: &[Value],
    key: &str,
    path: &mut Vec<String>,
) -> Result<(), String> {
    if patch.iter().any(is_replace_directive) {
        let rest: Vec<Value> = patch
            .iter()
            .filter(|i| !is_replace_directive(i))
            .cloned()
            .collect();
        *original = clean_list(&rest)?;
        return Ok(());
    }
    for item in patch {
        let Some(item_map) = item.as_object() else {
            original.push(item.clone());
            continue;
        };
        let id = item_map.get(key);
        let position = id.and_then(|id| original.iter().position(|o| o.get(key) == Some(id)));
        if item_map.get("$patch").and_then(Value::as_str) == Some("delete") {
            if let Some(id) = id {
                original.retain(|o| o.get(key) != Some(id));
            }
            continue;
        }
        match position.and_then(|p| original.get_mut(p)) {
            Some(Value::Object(existing)) => {
                if let Outcome::Delete = merge_map(existing, item_map, path)?
                    && let Some(p) = position
                {
                    original.remove(p);
                }
            }
            _ => original.push(Value::Object(clean_map(item_map)?)),
        }
    }
    Ok(())
}

fn merge_primitive_list(original: &mut Vec<Value>, patch: &[Value]) -> Result<(), String> {
    if patch.iter().any(is_replace_directive) {
        *original = patch
            .iter()
            .filter(|i| !is_replace_directive(i))
            .cloned()
            .collect();
        return Ok(());
    }
    for item in patch {
        if !original.contains(item) {
            original.push(item.clone());
        }
    }
    Ok(())
}

/// A patch map as a new value: directives removed, nested `$patch: delete` maps dropped.
fn clean_map(patch: &Map<String, Value>) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for (key, value) in patch {
        if key.starts_with('$') {
            continue;
        }
        match value {
            Value::Null => {}
            Value::Object(child) => {
                if child.get("$patch").and_then(Value::as_str) != Some("delete") {
                    out.insert(key.clone(), Value::Object(clean_map(child)?));
                }
            }
            Value::Array(items) => {
                out.insert(key.clone(), Value::Array(clean_list(items)?));
            }
            other => {
                out.insert(key.clone(), other.clone());
            }
        }
    }
    Ok(out)
}

fn clean_list(items: &[Value]) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for item in items {
        match item {
            Value::Object(map) if map.contains_key("$patch") => {}
            Value::Object(map) => out.push(Value::Object(clean_map(map)?)),
            other => out.push(other.clone()),
        }
    }
    Ok(out)
}
