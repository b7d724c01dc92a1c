//! Server-side apply and the field ownership of other writes, as kube-apiserver does them
//! (Kubernetes docs, "Server-Side Apply": "Field management", "Conflicts", "Merge strategy").
//!
//! An apply sets every field of the applied configuration and makes the manager own exactly
//! those fields (leaves, plus the items of list-type `map`/`set` lists). Fields the manager owned
//! through its previous apply and no longer applies are removed, unless another manager owns
//! them too. Applying a field another manager owns with a different value is a conflict, unless
//! forced, which moves the ownership. Updates (`PUT`, `PATCH` other than apply, `POST`) take
//! ownership of the fields they change, never conflict, and are recorded with operation
//! `Update`.

use std::fmt;

use serde_json::{Map, Value};

use super::fieldset::{self, FieldPath, FieldSet, PathElement, covers, key_element, path_string};
use super::managed::{
    self, Entry, SERVER_METADATA, prune_entries, read_entries, remove_at, tracked, value_at,
    write_entries,
};
use super::shape::{ListKind, Place};

/// An apply that would change fields other managers own (HTTP 409 `Conflict` in kube-apiserver).
///
/// Each conflict is `(field path, other manager)`, the path as structured-merge-diff prints it:
/// `.spec.name`, `.status.conditions[type="Ready"].status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyConflict {
    /// `(field path, other manager)` pairs, in the order of the managed fields entries.
    pub conflicts: Vec<(String, String)>,
}

impl ApplyConflict {
    /// kube-apiserver's message for this conflict, given the `apiVersion` the managers used:
    /// `Apply failed with 1 conflict: conflict with "mgr" using v1: .spec.name`, or for several,
    /// `Apply failed with 2 conflicts: conflicts with "mgr" using v1:\n- .spec.a\n- .spec.b`.
    pub fn message(&self, api_version: &str) -> String {
        let count = self.conflicts.len();
        let noun = if count == 1 { "conflict" } else { "conflicts" };
        let body = match self.conflicts.as_slice() {
            [(path, manager)] => format!("conflict with \"{manager}\" using {api_version}: {path}"),
            _ => {
                let mut managers: Vec<&String> = Vec::new();
                for (_, m) in &self.conflicts {
                    if !managers.contains(&m) {
                        managers.push(m);
                    }
                }
                let mut out = String::from("conflicts with");
                for manager in &managers {
                    if managers.len() == 1 {
                        out.push_str(&format!(" \"{manager}\" using {api_version}:"));
                    } else {
                        out.push_str(&format!("\n\"{manager}\" using {api_version}:"));
                    }
                    for (path, _) in self.conflicts.iter().filter(|(_, m)| m == *manager) {
                        out.push_str(&format!("\n- {path}"));
                    }
                }
                out
            }
        };
        format!("Apply failed with {count} {noun}: {body}")
    }
}

impl fmt::Display for ApplyConflict {
    /// The message without the `using <apiVersion>` parts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .conflicts
            .iter()
            .map(|(path, m)| format!("conflict with \"{m}\": {path}"))
            .collect();
        write!(
            f,
            "Apply failed with {} conflict(s): {}",
            self.conflicts.len(),
            parts.join("; ")
        )
    }
}

impl std::error::Error for ApplyConflict {}

/// Server-side apply of `applied` (a partial object, the body of an `application/apply-patch+yaml`
/// request as JSON) onto `live` (`None` when the apply creates the object) for field manager
/// `manager`.
///
/// - `force`: `?force=true`; conflicting fields are then taken over instead of refused.
/// - `subresource`: `Some("status")` for `PATCH .../status`: only the applied `status` is used
///   and the ownership is recorded in a separate entry with `subresource: status`. With `None`
///   everything applied is used; a caller whose CRD has a status subresource removes `status`
///   from `applied` first, as kube-apiserver ignores it there.
/// - `schema`: the CRD's `openAPIV3Schema` (or version `schema`), whose
///   `x-kubernetes-list-type`/`x-kubernetes-list-map-keys`/`x-kubernetes-map-type` decide how
///   lists and maps merge; without it lists are atomic, maps merge key by key, and
///   `metadata.finalizers` (set) and `metadata.ownerReferences` (map by `uid`) follow ObjectMeta.
///
/// Returns the new object, with `metadata.managedFields` holding an entry for `manager` with
/// `operation: Apply`, `fieldsType: FieldsV1`, the real `f:`/`k:`/`v:` encoding, the applied
/// `apiVersion` and the current time. Server-set metadata (`uid`, `resourceVersion`,
/// `creationTimestamp`, `generation`, ...) is never taken from `applied`.
///
/// Errors: [`ApplyConflict`] when, without `force`, a field another manager owns would change.
pub fn server_side_apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    subresource: Option<&str>,
    schema: Option<&Value>,
) -> Result<Value, ApplyConflict> {
    let place = Place::root(schema);
    let applied = scope_to_subresource(applied, subresource);
    let applied_tracked = tracked(&applied);
    let mut applied_set = FieldSet::new();
    collect_apply(&applied_tracked, &place, &mut Vec::new(), &mut applied_set);

    let live_obj = live.cloned().unwrap_or_else(|| Value::Object(Map::new()));
    let live_tracked = tracked(&live_obj);
    let mut entries = read_entries(live);
    let ours = entries
        .iter()
        .position(|e| e.is(manager, "Apply", subresource));

    let mut conflicts: Vec<(String, String)> = Vec::new();
    let mut taken: Vec<(usize, FieldPath)> = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        if Some(i) == ours {
            continue;
        }
        for path in applied_set.intersection(&entry.fields) {
            if matches!(
                path.last(),
                Some(PathElement::Key(_) | PathElement::Value(_))
            ) {
                continue;
            }
            if value_at(&applied_tracked, path) != value_at(&live_tracked, path) {
                let conflict = (path_string(path), entry.manager.clone());
                if !conflicts.contains(&conflict) {
                    conflicts.push(conflict);
                }
                taken.push((i, path.clone()));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(ApplyConflict { conflicts });
    }
    for (i, path) in taken {
        entries[i].fields.remove(&path);
    }

    let mut merged = live_obj;
    merge_applied(&mut merged, &applied, &place);

    let previous = ours.map(|i| entries[i].fields.clone()).unwrap_or_default();
    let others: FieldSet = entries
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != ours)
        .flat_map(|(_, e)| e.fields.iter().cloned())
        .collect();
    let mut all_owned = others.clone();
    all_owned.extend(applied_set.iter().cloned());
    // Fields this manager stops applying, unless another manager also owns them (or something
    // below them); a node removed as a whole takes its children along.
    let dropped: Vec<&FieldPath> = previous
        .difference(&applied_set)
        .filter(|p| !covers(&others, p))
        .collect();
    let outermost: Vec<&FieldPath> = dropped
        .iter()
        .copied()
        .filter(|p| {
            !dropped
                .iter()
                .any(|q| q.len() < p.len() && p.starts_with(q))
        })
        .collect();
    for path in outermost.into_iter().rev() {
        if remove_at(&mut merged, path) {
            remove_emptied_parents(&mut merged, path, &all_owned);
        }
    }

    let api_version = applied
        .get("apiVersion")
        .or_else(|| merged.get("apiVersion"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let entry = Entry {
        manager: manager.to_string(),
        operation: "Apply".to_string(),
        subresource: subresource.map(str::to_string),
        api_version,
        time: managed::now(),
        fields: applied_set,
    };
    match ours {
        Some(i) => entries[i] = entry,
        None => entries.push(entry),
    }
    prune_entries(&mut entries, &tracked(&merged));
    write_entries(&mut merged, &entries);
    Ok(merged)
}

/// Records a non-apply write (`POST`, `PUT`, merge/JSON/strategic patch) of `after` over `before`
/// (`None` for a create) by `manager` in `after.metadata.managedFields`: the fields the write
/// added or changed become owned by `manager` in an `operation: Update` entry (for
/// `subresource`), and leave the other managers; fields that no longer exist leave every
/// manager. Lists are atomic except `metadata.finalizers` and `metadata.ownerReferences`; see
/// [`record_update_with_schema`] to follow a CRD schema's list types. The existing entries come
/// from `after` when the write carried `managedFields`, else from `before`.
pub fn record_update(
    before: Option<&Value>,
    after: &mut Value,
    manager: &str,
    subresource: Option<&str>,
) {
    record_update_with_schema(before, after, manager, subresource, None);
}

/// [`record_update`] with the CRD schema (`openAPIV3Schema` or version `schema`) deciding how
/// lists and maps are tracked, as in [`server_side_apply`].
pub fn record_update_with_schema(
    before: Option<&Value>,
    after: &mut Value,
    manager: &str,
    subresource: Option<&str>,
    schema: Option<&Value>,
) {
    let place = Place::root(schema);
    let carried = after
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .is_some_and(|l| !l.is_empty());
    let mut entries = if carried {
        read_entries(Some(after))
    } else {
        read_entries(before)
    };
    let before_tracked = before.map(tracked);
    let after_tracked = tracked(after);
    let mut changed = FieldSet::new();
    collect_changes(
        before_tracked.as_ref(),
        &after_tracked,
        &place,
        &mut Vec::new(),
        &mut changed,
    );

    for entry in entries
        .iter_mut()
        .filter(|e| !e.is(manager, "Update", subresource))
    {
        entry
            .fields
            .retain(|p| !changed.iter().any(|c| p.starts_with(c)));
    }
    if !changed.is_empty() {
        let api_version = after
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        match entries
            .iter_mut()
            .find(|e| e.is(manager, "Update", subresource))
        {
            Some(entry) => {
                entry.fields.extend(changed);
                entry.api_version = api_version;
                entry.time = managed::now();
            }
            None => entries.push(Entry {
                manager: manager.to_string(),
                operation: "Update".to_string(),
                subresource: subresource.map(str::to_string),
                api_version,
                time: managed::now(),
                fields: changed,
            }),
        }
    }
    prune_entries(&mut entries, &after_tracked);
    write_entries(after, &entries);
}

/// The applied configuration limited to what the (sub)resource accepts: for `status`, only
/// `apiVersion`, `kind`, `metadata.name`/`namespace` and `status`; `metadata.managedFields` is
/// always dropped.
fn scope_to_subresource(applied: &Value, subresource: Option<&str>) -> Value {
    let mut out = applied.clone();
    if let Some(map) = out.as_object_mut() {
        if subresource == Some("status") {
            map.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status"));
            if let Some(Value::Object(meta)) = map.get_mut("metadata") {
                meta.retain(|k, _| k == "name" || k == "namespace");
            }
        }
        if let Some(Value::Object(meta)) = map.get_mut("metadata") {
            meta.remove("managedFields");
        }
    }
    out
}

/// The fields an apply of `value` owns: leaves (scalars, atomic lists and maps, empty maps),
/// items of set and map lists, and the fields inside map-list items.
fn collect_apply(value: &Value, place: &Place<'_>, path: &mut FieldPath, out: &mut FieldSet) {
    match value {
        Value::Object(map) if !place.atomic_map() => {
            if map.is_empty() && !path.is_empty() {
                out.insert(path.clone());
            }
            for (key, child) in map {
                path.push(PathElement::Field(key.clone()));
                collect_apply(child, &place.field(key), path, out);
                path.pop();
            }
        }
        Value::Array(items) => match place.list_kind() {
            ListKind::Atomic => {
                out.insert(path.clone());
            }
            ListKind::Set => {
                if items.is_empty() {
                    out.insert(path.clone());
                }
                for item in items {
                    let mut item_path = path.clone();
                    item_path.push(PathElement::Value(fieldset::canonical_json(item)));
                    out.insert(item_path);
                }
            }
            ListKind::Map(keys) => {
                if items.is_empty() {
                    out.insert(path.clone());
                }
                let item_place = place.item();
                for item in items {
                    path.push(key_element(item, &keys));
                    out.insert(path.clone());
                    if let Value::Object(fields) = item {
                        for (key, child) in fields {
                            path.push(PathElement::Field(key.clone()));
                            collect_apply(child, &item_place.field(key), path, out);
                            path.pop();
                        }
                    }
                    path.pop();
                }
            }
        },
        _ => {
            if !path.is_empty() {
                out.insert(path.clone());
            }
        }
    }
}

/// Every field of a value an update added: the value's own node (except the root and
/// `metadata`) and everything below it.
fn collect_added(value: &Value, place: &Place<'_>, path: &mut FieldPath, out: &mut FieldSet) {
    let is_metadata = path.len() == 1 && path[0] == PathElement::Field("metadata".to_string());
    if !path.is_empty() && !is_metadata {
        out.insert(path.clone());
    }
    match value {
        Value::Object(map) if !place.atomic_map() => {
            for (key, child) in map {
                path.push(PathElement::Field(key.clone()));
                collect_added(child, &place.field(key), path, out);
                path.pop();
            }
        }
        Value::Array(items) => match place.list_kind() {
            ListKind::Atomic => {}
            ListKind::Set => {
                for item in items {
                    let mut item_path = path.clone();
                    item_path.push(PathElement::Value(fieldset::canonical_json(item)));
                    out.insert(item_path);
                }
            }
            ListKind::Map(keys) => {
                let item_place = place.item();
                for item in items {
                    path.push(key_element(item, &keys));
                    collect_added(item, &item_place, path, out);
                    path.pop();
                }
            }
        },
        _ => {}
    }
}

/// The fields an update added or changed going from `before` to `after`.
fn collect_changes(
    before: Option<&Value>,
    after: &Value,
    place: &Place<'_>,
    path: &mut FieldPath,
    out: &mut FieldSet,
) {
    let Some(before) = before else {
        collect_added(after, place, path, out);
        return;
    };
    match (before, after) {
        (Value::Object(old), Value::Object(new)) if !place.atomic_map() => {
            for (key, child) in new {
                path.push(PathElement::Field(key.clone()));
                collect_changes(old.get(key), child, &place.field(key), path, out);
                path.pop();
            }
        }
        (Value::Array(old), Value::Array(new)) => match place.list_kind() {
            ListKind::Atomic => {
                if old != new {
                    out.insert(path.clone());
                }
            }
            ListKind::Set => {
                for item in new.iter().filter(|item| !old.contains(item)) {
                    let mut item_path = path.clone();
                    item_path.push(PathElement::Value(fieldset::canonical_json(item)));
                    out.insert(item_path);
                }
            }
            ListKind::Map(keys) => {
                let item_place = place.item();
                for item in new {
                    let element = key_element(item, &keys);
                    let old_item = old.iter().find(|o| key_element(o, &keys) == element);
                    path.push(element);
                    collect_changes(old_item, item, &item_place, path, out);
                    path.pop();
                }
            }
        },
        (old, new) => {
            if old != new {
                collect_added(new, place, path, out);
            }
        }
    }
}

/// Merges an applied configuration into `live`: maps key by key (except atomic ones), set lists
/// by union, map lists item by item, everything else replaced. Server-set metadata is skipped.
fn merge_applied(live: &mut Value, applied: &Value, place: &Place<'_>) {
    match (live, applied) {
        (Value::Object(live_map), Value::Object(applied_map)) if !place.atomic_map() => {
            let in_metadata = place.names.len() == 1 && place.names[0] == "metadata";
            for (key, value) in applied_map {
                if in_metadata && SERVER_METADATA.contains(&key.as_str()) {
                    continue;
                }
                let child = place.field(key);
                match live_map.get_mut(key) {
                    Some(existing) => merge_applied(existing, value, &child),
                    None => {
                        live_map.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (Value::Array(live_items), Value::Array(applied_items)) => match place.list_kind() {
            ListKind::Atomic => *live_items = applied_items.clone(),
            ListKind::Set => {
                for item in applied_items {
                    if !live_items.contains(item) {
                        live_items.push(item.clone());
                    }
                }
            }
            ListKind::Map(keys) => {
                let item_place = place.item();
                for item in applied_items {
                    let element = key_element(item, &keys);
                    match live_items
                        .iter_mut()
                        .find(|x| key_element(x, &keys) == element)
                    {
                        Some(existing) => merge_applied(existing, item, &item_place),
                        None => live_items.push(item.clone()),
                    }
                }
            }
        },
        (live, applied) => *live = applied.clone(),
    }
}

/// After removing `path`, removes the maps above it that the removal left empty and nobody owns
/// (never the root or `metadata`).
fn remove_emptied_parents(obj: &mut Value, path: &[PathElement], owned: &FieldSet) {
    for len in (2..path.len()).rev() {
        let parent = &path[..len];
        if !matches!(parent.last(), Some(PathElement::Field(_))) {
            return;
        }
        let empty = value_at(obj, parent)
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty);
        if !empty || owned.contains(parent) {
            return;
        }
        remove_at(obj, parent);
    }
    if let Some(first) = path.first()
        && path.len() >= 2
        && *first != PathElement::Field("metadata".to_string())
    {
        let top = &path[..1];
        let empty = value_at(obj, top)
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty);
        if empty && !owned.contains(top) {
            remove_at(obj, top);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conflict_messages_match_kube_apiserver() {
        let one = ApplyConflict {
            conflicts: vec![(".spec.name".into(), "op".into())],
        };
        assert_eq!(
            one.message("v1"),
            "Apply failed with 1 conflict: conflict with \"op\" using v1: .spec.name"
        );
        let two = ApplyConflict {
            conflicts: vec![
                (".spec.a".into(), "op".into()),
                (".spec.b".into(), "op".into()),
            ],
        };
        assert_eq!(
            two.message("v1"),
            "Apply failed with 2 conflicts: conflicts with \"op\" using v1:\n- .spec.a\n- .spec.b"
        );
    }

    #[test]
    fn scope_keeps_only_status_for_the_status_subresource() {
        let applied = json!({"apiVersion": "v", "kind": "K", "metadata": {"name": "n", "labels": {"a": "b"}}, "spec": {"x": 1}, "status": {"y": 2}});
        assert_eq!(
            scope_to_subresource(&applied, Some("status")),
            json!({"apiVersion": "v", "kind": "K", "metadata": {"name": "n"}, "status": {"y": 2}})
        );
    }
}
