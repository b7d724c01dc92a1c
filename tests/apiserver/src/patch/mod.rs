//! The patch formats the test API server accepts (Kubernetes docs, "Update API Objects in Place
//! Using kubectl patch", and "Server-Side Apply"): JSON merge patch, JSON patch, strategic merge
//! patch, server-side apply, and the field ownership recorded by other writes.

mod apply;
mod fieldset;
mod managed;
mod shape;
mod strategic;

use serde_json::Value;

pub use apply::{ApplyConflict, record_update, record_update_with_schema, server_side_apply};
pub use strategic::strategic_merge_patch;

/// RFC 7386 JSON merge patch (`application/merge-patch+json`): objects merge recursively, `null`
/// removes a key, anything else (lists included) replaces. A non-object patch replaces `target`.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// RFC 6902 JSON patch (`application/json-patch+json`): a list of `add`, `remove`, `replace`,
/// `move`, `copy` and `test` operations, applied atomically (on error `target` is unchanged).
///
/// Errors: a body that is not a list of operations, or an operation that fails (missing path,
/// failed `test`), as a message naming the operation.
///
/// As in kube-apiserver (evanphx/json-patch), a `test` of a path that does not exist passes
/// when the expected value is `null`: kube-rs's finalizer helper relies on it when it adds the
/// first finalizer.
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), String> {
    let mut patch = patch.clone();
    if let Some(ops) = patch.as_array_mut() {
        ops.retain(|op| {
            let is_null_test = op.get("op").and_then(Value::as_str) == Some("test")
                && op.get("value").is_some_and(Value::is_null);
            let path = op.get("path").and_then(Value::as_str).unwrap_or_default();
            !(is_null_test && target.pointer(path).is_none_or(Value::is_null))
        });
    }
    let operations: json_patch::Patch =
        serde_json::from_value(patch).map_err(|e| format!("invalid JSON patch: {e}"))?;
    json_patch::patch(target, &operations).map_err(|e| e.to_string())
}
