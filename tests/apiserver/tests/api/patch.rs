//! Patch formats and field management: JSON merge patch, JSON patch, strategic merge patch, and
//! server-side apply with its managedFields, conflicts and merge strategies.

use mailtarget_test_apiserver::patch::{
    ApplyConflict, json_patch, merge_patch, record_update, server_side_apply, strategic_merge_patch,
};
use serde_json::{Value, json};

/// RFC 7386: nested maps merge, `null` deletes, lists replace.
#[test]
fn merge_patch_merges_deletes_and_replaces_lists() {
    let mut target = json!({"spec": {"a": 1, "b": 2, "list": [1, 2]}, "keep": true});
    merge_patch(
        &mut target,
        &json!({"spec": {"b": null, "c": 3, "list": [3]}}),
    );
    assert_eq!(
        target,
        json!({"spec": {"a": 1, "c": 3, "list": [3]}, "keep": true})
    );
}

/// RFC 6902: operations apply in order; a failing operation leaves the target unchanged.
#[test]
fn json_patch_applies_atomically() {
    let mut target = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"x": 1}});
    json_patch(
        &mut target,
        &json!([
            {"op": "add", "path": "/metadata/labels/b", "value": "2"},
            {"op": "remove", "path": "/metadata/labels/a"},
            {"op": "replace", "path": "/spec/x", "value": 5}
        ]),
    )
    .expect("valid patch");
    assert_eq!(
        target,
        json!({"metadata": {"labels": {"b": "2"}}, "spec": {"x": 5}})
    );

    let before = target.clone();
    let err = json_patch(
        &mut target,
        &json!([{"op": "replace", "path": "/spec/x", "value": 6}, {"op": "test", "path": "/spec/x", "value": 1}]),
    )
    .expect_err("failed test op");
    assert!(!err.is_empty());
    assert_eq!(target, before);
    assert!(json_patch(&mut target, &json!({"op": "add"})).is_err());
    assert!(json_patch(&mut target, &json!([{"op": "remove", "path": "/nope"}])).is_err());
}

/// Maps merge, `null` deletes, other lists replace; kubectl's Secret patches work.
#[test]
fn strategic_merge_patch_merges_maps_and_deletes_nulls() {
    let mut secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "annotations": {"x": "1"}},
        "data": {"a": "YQ==", "b": "Yg=="}, "type": "Opaque"});
    strategic_merge_patch(
        &mut secret,
        &json!({"data": {"a": null, "c": "Yw=="}, "metadata": {"annotations": {"y": "2"}}, "$setElementOrder/whatever": []}),
    )
    .expect("valid");
    assert_eq!(
        secret,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "annotations": {"x": "1", "y": "2"}},
            "data": {"b": "Yg==", "c": "Yw=="}, "type": "Opaque"})
    );
}

/// `$patch: replace|delete`, `$retainKeys` and `$deleteFromPrimitiveList` directives.
#[test]
fn strategic_merge_patch_directives() {
    let mut obj = json!({"data": {"a": "1", "b": "2"}, "spec": {"x": 1, "y": 2, "z": 3}, "gone": {"k": 1},
        "metadata": {"finalizers": ["f1", "f2"]}});
    strategic_merge_patch(
        &mut obj,
        &json!({
            "data": {"$patch": "replace", "c": "3"},
            "gone": {"$patch": "delete"},
            "spec": {"$retainKeys": ["x", "w"], "w": 4},
            "metadata": {"$deleteFromPrimitiveList/finalizers": ["f1"], "finalizers": ["f3"]}
        }),
    )
    .expect("valid");
    assert_eq!(
        obj,
        json!({"data": {"c": "3"}, "spec": {"x": 1, "w": 4}, "metadata": {"finalizers": ["f2", "f3"]}})
    );

    assert!(strategic_merge_patch(&mut obj, &json!({"data": {"$patch": "explode"}})).is_err());
    assert!(strategic_merge_patch(&mut obj, &json!(["not", "an", "object"])).is_err());
    assert!(strategic_merge_patch(&mut obj, &json!({"$patch": "delete"})).is_err());
}

/// Lists with merge keys merge item by item; `$patch: delete` items remove; other lists replace.
#[test]
fn strategic_merge_patch_keyed_lists() {
    let mut obj = json!({
        "metadata": {"ownerReferences": [{"uid": "1", "name": "a"}, {"uid": "2", "name": "b"}]},
        "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "Stalled", "status": "True"}]},
        "spec": {"finalizers": ["kubernetes"], "list": [1, 2]}
    });
    strategic_merge_patch(
        &mut obj,
        &json!({
            "metadata": {"ownerReferences": [{"uid": "2", "$patch": "delete"}, {"uid": "3", "name": "c"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
            "spec": {"finalizers": [], "list": [3]}
        }),
    )
    .expect("valid");
    assert_eq!(
        obj,
        json!({
            "metadata": {"ownerReferences": [{"uid": "1", "name": "a"}, {"uid": "3", "name": "c"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Stalled", "status": "True"}]},
            "spec": {"finalizers": [], "list": [3]}
        })
    );
    strategic_merge_patch(
        &mut obj,
        &json!({"status": {"conditions": [{"$patch": "replace"}, {"type": "Only"}]}}),
    )
    .expect("valid");
    assert_eq!(obj["status"]["conditions"], json!([{"type": "Only"}]));
}

fn managed(obj: &Value) -> Vec<Value> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn entry<'a>(entries: &'a [Value], manager: &str, operation: &str) -> &'a Value {
    entries
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == operation)
        .unwrap_or_else(|| panic!("no {manager}/{operation} entry in {entries:?}"))
}

fn widget(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "ns"}, "spec": spec})
}

/// Create, then a re-apply without a field removes it; managedFields use the FieldsV1 encoding.
#[test]
fn apply_creates_and_reapply_removes_dropped_fields() {
    let mut first = widget(json!({"name": "x", "note": "n"}));
    first["metadata"]["labels"] = json!({"app": "a"});
    let created = server_side_apply(None, &first, "op", false, None, None).expect("create");
    assert_eq!(created["spec"], json!({"name": "x", "note": "n"}));
    assert_eq!(created["metadata"]["name"], "w");
    let entries = managed(&created);
    assert_eq!(entries.len(), 1);
    let e = entry(&entries, "op", "Apply");
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert_eq!(e["apiVersion"], "example.com/v1");
    assert!(e["time"].as_str().is_some_and(|t| t.ends_with('Z')));
    assert!(e.get("subresource").is_none());
    assert_eq!(
        e["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:app": {}}}, "f:spec": {"f:name": {}, "f:note": {}}})
    );

    let second = server_side_apply(
        Some(&created),
        &widget(json!({"name": "x"})),
        "op",
        false,
        None,
        None,
    )
    .expect("re-apply");
    assert_eq!(second["spec"], json!({"name": "x"}));
    assert!(second["metadata"].get("labels").is_none(), "{second}");
    assert_eq!(
        entry(&managed(&second), "op", "Apply")["fieldsV1"],
        json!({"f:spec": {"f:name": {}}})
    );
}

/// Another manager's different value conflicts; the same value is shared; force takes over.
#[test]
fn apply_conflicts_and_force() {
    let live = server_side_apply(
        None,
        &widget(json!({"name": "x", "size": 1})),
        "op",
        false,
        None,
        None,
    )
    .expect("create");

    let err = server_side_apply(
        Some(&live),
        &widget(json!({"name": "y"})),
        "other",
        false,
        None,
        None,
    )
    .expect_err("conflict");
    assert_eq!(
        err,
        ApplyConflict {
            conflicts: vec![(".spec.name".to_string(), "op".to_string())]
        }
    );
    assert_eq!(
        err.message("example.com/v1"),
        "Apply failed with 1 conflict: conflict with \"op\" using example.com/v1: .spec.name"
    );

    let shared = server_side_apply(
        Some(&live),
        &widget(json!({"name": "x"})),
        "other",
        false,
        None,
        None,
    )
    .expect("same value");
    let entries = managed(&shared);
    assert_eq!(
        entry(&entries, "other", "Apply")["fieldsV1"],
        json!({"f:spec": {"f:name": {}}})
    );
    assert_eq!(
        entry(&entries, "op", "Apply")["fieldsV1"],
        json!({"f:spec": {"f:name": {}, "f:size": {}}})
    );

    let forced = server_side_apply(
        Some(&live),
        &widget(json!({"name": "y"})),
        "other",
        true,
        None,
        None,
    )
    .expect("forced");
    assert_eq!(forced["spec"], json!({"name": "y", "size": 1}));
    let entries = managed(&forced);
    assert_eq!(
        entry(&entries, "op", "Apply")["fieldsV1"],
        json!({"f:spec": {"f:size": {}}})
    );
    assert_eq!(
        entry(&entries, "other", "Apply")["fieldsV1"],
        json!({"f:spec": {"f:name": {}}})
    );

    // "op" no longer owns spec.name: dropping it from op's apply keeps other's value.
    let after = server_side_apply(
        Some(&forced),
        &widget(json!({"size": 1})),
        "op",
        false,
        None,
        None,
    )
    .expect("re-apply");
    assert_eq!(after["spec"], json!({"name": "y", "size": 1}));
}

/// A field co-owned by another manager survives its removal from one manager's apply.
#[test]
fn removal_keeps_fields_other_managers_own() {
    let live = server_side_apply(
        None,
        &widget(json!({"name": "x", "size": 1})),
        "op",
        false,
        None,
        None,
    )
    .expect("create");
    let shared = server_side_apply(
        Some(&live),
        &widget(json!({"size": 1})),
        "other",
        false,
        None,
        None,
    )
    .expect("share");
    let after = server_side_apply(
        Some(&shared),
        &widget(json!({"name": "x"})),
        "op",
        false,
        None,
        None,
    )
    .expect("drop size");
    assert_eq!(after["spec"], json!({"name": "x", "size": 1}));
}

/// Status applied through the status subresource gets its own entry and touches only status.
#[test]
fn status_subresource_entries_are_separate() {
    let live = server_side_apply(None, &widget(json!({"name": "x"})), "op", false, None, None)
        .expect("create");
    let mut status_apply = widget(json!({"name": "ignored"}));
    status_apply["status"] = json!({"phase": "Ready"});
    let after = server_side_apply(
        Some(&live),
        &status_apply,
        "controller",
        false,
        Some("status"),
        None,
    )
    .expect("status");
    assert_eq!(after["spec"], json!({"name": "x"}));
    assert_eq!(after["status"], json!({"phase": "Ready"}));
    let entries = managed(&after);
    assert_eq!(entries.len(), 2);
    let status_entry = entry(&entries, "controller", "Apply");
    assert_eq!(status_entry["subresource"], "status");
    assert_eq!(
        status_entry["fieldsV1"],
        json!({"f:status": {"f:phase": {}}})
    );
    assert_eq!(
        entry(&entries, "op", "Apply")["fieldsV1"],
        json!({"f:spec": {"f:name": {}}})
    );
}

fn conditions_schema() -> Value {
    json!({"type": "object", "properties": {"status": {"type": "object", "properties": {"conditions": {
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
        "items": {"type": "object", "properties": {"type": {"type": "string"}, "status": {"type": "string"}}}}}}}})
}

fn with_conditions(conditions: Value) -> Value {
    let mut obj = widget(json!({}));
    obj.as_object_mut().map(|m| m.remove("spec"));
    obj["status"] = json!({"conditions": conditions});
    obj
}

/// With a list-type map schema, conditions merge by `type` and are owned per item.
#[test]
fn list_map_conditions_merge_by_type() {
    let schema = conditions_schema();
    let a = server_side_apply(
        None,
        &with_conditions(json!([{"type": "Ready", "status": "True"}])),
        "a",
        false,
        Some("status"),
        Some(&schema),
    )
    .expect("a");
    let b = server_side_apply(
        Some(&a),
        &with_conditions(json!([{"type": "Synced", "status": "False"}])),
        "b",
        false,
        Some("status"),
        Some(&schema),
    )
    .expect("b");
    assert_eq!(
        b["status"]["conditions"],
        json!([{"type": "Ready", "status": "True"}, {"type": "Synced", "status": "False"}])
    );
    assert_eq!(
        entry(&managed(&b), "a", "Apply")["fieldsV1"],
        json!({"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}, "f:type": {}}}}})
    );

    let err = server_side_apply(
        Some(&b),
        &with_conditions(
            json!([{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "False"}]),
        ),
        "b",
        false,
        Some("status"),
        Some(&schema),
    )
    .expect_err("b changes a's condition");
    assert_eq!(
        err.conflicts,
        vec![(
            ".status.conditions[type=\"Ready\"].status".to_string(),
            "a".to_string()
        )]
    );

    // a drops its condition: the item goes, b's stays.
    let c = server_side_apply(
        Some(&b),
        &with_conditions(json!([])),
        "a",
        false,
        Some("status"),
        Some(&schema),
    )
    .expect("a drops");
    assert_eq!(
        c["status"]["conditions"],
        json!([{"type": "Synced", "status": "False"}])
    );

    // Without the schema the list is atomic: b's apply would replace a's list, a conflict.
    let a_atomic = server_side_apply(
        None,
        &with_conditions(json!([{"type": "Ready"}])),
        "a",
        false,
        Some("status"),
        None,
    )
    .expect("a");
    let err = server_side_apply(
        Some(&a_atomic),
        &with_conditions(json!([{"type": "Synced"}])),
        "b",
        false,
        Some("status"),
        None,
    )
    .expect_err("atomic list conflict");
    assert_eq!(
        err.conflicts,
        vec![(".status.conditions".to_string(), "a".to_string())]
    );
}

/// Updates own what they change (new maps with `.`), take fields from appliers, and never
/// conflict; the applier then conflicts on the taken field.
#[test]
fn updates_record_ownership() {
    let mut created = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "labels": {"a": "1"}},
        "data": {"k": "dg=="}, "type": "Opaque"});
    record_update(None, &mut created, "kubectl-create", None);
    let entries = managed(&created);
    assert_eq!(
        entry(&entries, "kubectl-create", "Update")["fieldsV1"],
        json!({"f:data": {".": {}, "f:k": {}}, "f:metadata": {"f:labels": {".": {}, "f:a": {}}}, "f:type": {}})
    );

    let applied = server_side_apply(
        Some(&created),
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "dg==", "j": "ag=="}}),
        "applier",
        false,
        None,
        None,
    )
    .expect("same value is shared");
    let mut updated = applied.clone();
    updated["data"]["j"] = json!("eA==");
    updated["metadata"]
        .as_object_mut()
        .map(|m| m.remove("managedFields"));
    record_update(Some(&applied), &mut updated, "editor", None);
    let entries = managed(&updated);
    assert_eq!(
        entry(&entries, "editor", "Update")["fieldsV1"],
        json!({"f:data": {"f:j": {}}})
    );
    assert_eq!(
        entry(&entries, "applier", "Apply")["fieldsV1"],
        json!({"f:data": {"f:k": {}}})
    );

    let err = server_side_apply(
        Some(&updated),
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "dg==", "j": "ag=="}}),
        "applier",
        false,
        None,
        None,
    )
    .expect_err("editor owns data.j now");
    assert_eq!(
        err.conflicts,
        vec![(".data.j".to_string(), "editor".to_string())]
    );

    // Removing a field removes it from every manager.
    let mut removed = updated.clone();
    removed["data"].as_object_mut().map(|m| m.remove("j"));
    record_update(Some(&updated), &mut removed, "editor", None);
    assert!(
        managed(&removed).iter().all(|e| e["manager"] != "editor"),
        "{removed}"
    );
}

/// Finalizers merge as a set and owner references by uid, without a schema.
#[test]
fn apply_metadata_lists_follow_object_meta() {
    let mut first = widget(json!({}));
    first["metadata"]["finalizers"] = json!(["a/f"]);
    let live = server_side_apply(None, &first, "one", false, None, None).expect("create");
    let mut second = widget(json!({}));
    second["metadata"]["finalizers"] = json!(["b/f"]);
    let both = server_side_apply(Some(&live), &second, "two", false, None, None).expect("second");
    assert_eq!(both["metadata"]["finalizers"], json!(["a/f", "b/f"]));
    assert_eq!(
        entry(&managed(&both), "two", "Apply")["fieldsV1"],
        json!({"f:metadata": {"f:finalizers": {"v:\"b/f\"": {}}}, "f:spec": {}})
    );
    let dropped =
        server_side_apply(Some(&both), &widget(json!({})), "one", false, None, None).expect("drop");
    assert_eq!(dropped["metadata"]["finalizers"], json!(["b/f"]));
}

/// A JSON patch `test` of a missing path against `null` passes, as kube-apiserver does (kube-rs's
/// finalizer helper sends it when adding the first finalizer); against another value it fails.
#[test]
fn json_patch_test_of_missing_path_against_null_passes() {
    let mut obj = serde_json::json!({"metadata": {"name": "x"}});
    let patch = serde_json::json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["f"]}
    ]);
    mailtarget_test_apiserver::patch::json_patch(&mut obj, &patch).unwrap();
    assert_eq!(obj["metadata"]["finalizers"], serde_json::json!(["f"]));
    let wrong = serde_json::json!([{"op": "test", "path": "/metadata/missing", "value": "v"}]);
    assert!(mailtarget_test_apiserver::patch::json_patch(&mut obj, &wrong).is_err());
}
