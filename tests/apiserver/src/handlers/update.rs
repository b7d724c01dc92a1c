//! PUT (replace) and the update path shared with PATCH: optimistic concurrency, the status
//! subresource split, immutable metadata, finalizer rules while deleting, generation, and no-op
//! detection (Kubernetes API conventions, "Concurrency Control and Consistency", "Spec and
//! Status"; "Finalizers").

use std::sync::Arc;

use axum::response::Response;
use base64::Engine;
use serde_json::{Value, json};

use super::{WriteOptions, check_type, decode_body, served};
use crate::admission;
use crate::convert::to_internal;
use crate::resources::{Builtin, ResourceType};
use crate::server::{ResourceRequest, Shared, json_with_warnings};
use crate::status::{ApiError, Cause};
use crate::store::{Store, finalizers, is_deleting, meta_mut, meta_str};
use crate::{crd, gc, ops};

/// Drops an empty `metadata.finalizers`, as kube-apiserver stores it: `ObjectMeta.Finalizers`
/// is `omitempty`, and custom resources' metadata is decoded into `ObjectMeta` and encoded
/// again on write (apiextensions-apiserver `schema/objectmeta.Coerce`), so a list emptied by a
/// patch (`[]`) reads back as absent, and a JSON patch `test` of `/metadata/finalizers`
/// against `null` then holds.
pub(crate) fn drop_empty_finalizers(obj: &mut Value) {
    let m = meta_mut(obj);
    if m.get("finalizers")
        .is_some_and(|f| f.as_array().is_some_and(Vec::is_empty))
    {
        m.remove("finalizers");
    }
}

/// Moves Secret `stringData` into base64 `data` (as kube-apiserver does on write).
pub(crate) fn normalize_secret(obj: &mut Value) {
    let Some(sd) = obj.get("stringData").and_then(|v| v.as_object()).cloned() else {
        if let Some(m) = obj.as_object_mut() {
            m.remove("stringData");
        }
        return;
    };
    if !obj["data"].is_object() {
        obj["data"] = json!({});
    }
    for (k, v) in sd {
        let text = v.as_str().unwrap_or_default();
        obj["data"][k] = json!(base64::engine::general_purpose::STANDARD.encode(text));
    }
    if let Some(m) = obj.as_object_mut() {
        m.remove("stringData");
    }
    if obj["type"].as_str().unwrap_or_default().is_empty() {
        obj["type"] = json!("Opaque");
    }
}

pub(crate) fn replace(shared: &Arc<Shared>, rr: &ResourceRequest) -> Result<Response, ApiError> {
    let opts = WriteOptions::from_request(rr)?;
    let mut body = decode_body(rr)?;
    check_type(rr, &mut body)?;
    let name = rr.name.clone().unwrap_or_default();
    match body["metadata"]["name"].as_str() {
        Some(n) if n != name => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        _ => {}
    }
    if rr.rt.namespaced {
        let ns = rr.namespace.as_deref().unwrap_or_default();
        match body["metadata"]["namespace"].as_str() {
            Some(n) if !n.is_empty() && n != ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {}
        }
    }
    let new = to_internal(&rr.rt, &body);
    let mut st = shared.store();
    let ns = rr.namespace.as_deref().unwrap_or_default();
    let old = st
        .get(&rr.rt.storage, ns, &name)
        .cloned()
        .ok_or_else(|| ApiError::not_found(&rr.rt, &name))?;
    match meta_str(&new, "resourceVersion").filter(|s| !s.is_empty()) {
        None if rr.rt.requires_rv_on_update() => {
            return Err(ApiError::invalid(
                &rr.rt,
                &name,
                vec![Cause {
                    reason: "FieldValueInvalid".into(),
                    message: "Invalid value: 0x0: must be specified for an update".into(),
                    field: "metadata.resourceVersion".into(),
                }],
            ));
        }
        Some(rv) if Some(rv) != meta_str(&old, "resourceVersion") => {
            return Err(ApiError::stale(&rr.rt, &name));
        }
        _ => {}
    }
    let manager = opts.update_manager(rr);
    let (obj, warnings) = finish_update(
        &mut st,
        &rr.rt,
        rr.subresource.as_deref(),
        &old,
        new,
        &opts,
        Some(&manager),
    )?;
    Ok(json_with_warnings(200, &served(rr, &obj), &warnings))
}

fn without(v: &Value, keys: &[&str]) -> Value {
    let mut c = v.clone();
    if let Some(m) = c.as_object_mut() {
        for k in keys {
            m.remove(*k);
        }
    }
    c
}

fn equal_ignoring_bookkeeping(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut c = v.clone();
        if let Some(m) = c.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            m.remove("resourceVersion");
            m.remove("managedFields");
        }
        c
    };
    strip(a) == strip(b)
}

/// Completes an update of `old` (stored) to `new` (stored form, resourceVersion already checked):
/// applies subresource rules, keeps server-owned metadata, admits, bumps generation, stores (or
/// removes, when the last finalizer of a deleting object goes). A change that alters nothing
/// returns `old` untouched (no new resourceVersion, no event), like kube-apiserver.
pub(crate) fn finish_update(
    st: &mut Store,
    rt: &ResourceType,
    subresource: Option<&str>,
    old: &Value,
    mut new: Value,
    opts: &WriteOptions,
    manager: Option<&str>,
) -> Result<(Value, Vec<String>), ApiError> {
    let name = meta_str(old, "name").unwrap_or_default().to_string();
    let ns = meta_str(old, "namespace").unwrap_or_default().to_string();
    // Subresource split.
    if subresource == Some("status") {
        let mut merged = old.clone();
        match new.get("status") {
            Some(s) => merged["status"] = s.clone(),
            None => {
                if let Some(m) = merged.as_object_mut() {
                    m.remove("status");
                }
            }
        }
        if let Some(mf) = new["metadata"].get("managedFields") {
            merged["metadata"]["managedFields"] = mf.clone();
        }
        new = merged;
    } else if rt.status_subresource() {
        match old.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                if let Some(m) = new.as_object_mut() {
                    m.remove("status");
                }
            }
        }
    }
    // Server-owned metadata.
    {
        let old_meta = old["metadata"].clone();
        let m = meta_mut(&mut new);
        for k in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "resourceVersion",
        ] {
            match old_meta.get(k) {
                Some(v) => {
                    m.insert(k.into(), v.clone());
                }
                None => {
                    m.remove(k);
                }
            }
        }
        m.remove("selfLink");
        if !m.contains_key("managedFields")
            && let Some(mf) = old_meta.get("managedFields")
        {
            m.insert("managedFields".into(), mf.clone());
        }
    }
    new["apiVersion"] = old["apiVersion"].clone();
    new["kind"] = old["kind"].clone();
    drop_empty_finalizers(&mut new);
    // Built-in specifics.
    match rt.builtin() {
        Some(Builtin::Secret) => normalize_secret(&mut new),
        Some(Builtin::Namespace) if subresource.is_none() => {
            new["spec"] = old["spec"].clone();
        }
        Some(Builtin::Crd) => crd::apply_defaults(&mut new),
        _ => {}
    }
    // No new finalizers while deleting.
    if is_deleting(old) {
        let had = finalizers(old);
        let added: Vec<String> = finalizers(&new)
            .into_iter()
            .filter(|f| !had.contains(f))
            .collect();
        if !added.is_empty() {
            let list = added
                .iter()
                .map(|f| format!("\"{f}\""))
                .collect::<Vec<_>>()
                .join(", ");
            return Err(ApiError::invalid(
                rt,
                &name,
                vec![Cause {
                    reason: "FieldValueForbidden".into(),
                    message: format!(
                        "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{list}}}"
                    ),
                    field: "metadata.finalizers".into(),
                }],
            ));
        }
    }
    let warnings = admission::admit(rt, &mut new, Some(old), opts.validation)?;
    if rt.builtin() == Some(Builtin::Crd) {
        new["status"] = crd::established_status(&new, Some(old));
        if is_deleting(old) {
            crd::mark_terminating(&mut new);
        }
    }
    // Generation: bumped by any change outside metadata (and status, with the subresource).
    if rt.has_generation() {
        let ignored: &[&str] = if rt.status_subresource() {
            &["metadata", "status"]
        } else {
            &["metadata"]
        };
        let g = old["metadata"]["generation"].as_i64().unwrap_or(1);
        let g = if without(&new, ignored) != without(old, ignored) {
            g + 1
        } else {
            g
        };
        meta_mut(&mut new).insert("generation".into(), json!(g));
    }
    if equal_ignoring_bookkeeping(&new, old) {
        return Ok((old.clone(), warnings));
    }
    if let Some(manager) = manager {
        crate::patch::record_update(Some(old), &mut new, manager, subresource);
    }
    if opts.dry_run {
        return Ok((new, warnings));
    }
    let ns_held = rt.builtin() == Some(Builtin::Namespace)
        && new["spec"]["finalizers"]
            .as_array()
            .is_some_and(|a| !a.is_empty());
    let result = if is_deleting(&new) && finalizers(&new).is_empty() && !ns_held {
        ops::commit_remove(st, &rt.storage, &ns, &name, Some(new.clone())).unwrap_or(new)
    } else {
        ops::commit_put(st, &rt.storage, new)
    };
    gc::sweep(st);
    Ok((result, warnings))
}
