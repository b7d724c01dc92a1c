//! POST: create an object (Kubernetes API concepts, "Create"; "Object Names and IDs" for
//! `generateName` and name rules; namespaced objects need an existing, non-terminating namespace).

use std::sync::Arc;

use axum::response::Response;
use serde_json::{Value, json};

use super::{WriteOptions, check_type, decode_body, served};
use crate::admission;
use crate::convert::to_internal;
use crate::resources::{Builtin, ResourceType, StoreKey};
use crate::server::{ResourceRequest, Shared, json_with_warnings};
use crate::status::{ApiError, Cause};
use crate::store::{Store, is_deleting, meta_mut, meta_str, now_rfc3339};
use crate::{crd, gc, names, ops};

/// A Namespace object as the server creates it (phase Active, `kubernetes` finalizer, the
/// `kubernetes.io/metadata.name` label).
pub(crate) fn new_namespace_object(name: &str, now: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "uid": uuid::Uuid::new_v4().to_string(), "creationTimestamp": now,
            "labels": {"kubernetes.io/metadata.name": name}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    })
}

pub(crate) fn create(shared: &Arc<Shared>, rr: &ResourceRequest) -> Result<Response, ApiError> {
    let opts = WriteOptions::from_request(rr)?;
    let mut body = decode_body(rr)?;
    check_type(rr, &mut body)?;
    let mut st = shared.store();
    let manager = opts.update_manager(rr);
    let (obj, warnings) = create_object(
        &mut st,
        &rr.rt,
        rr.namespace.as_deref(),
        body,
        &opts,
        Some(&manager),
    )?;
    Ok(json_with_warnings(201, &served(rr, &obj), &warnings))
}

fn namespace_gate(st: &Store, rt: &ResourceType, ns: &str, name: &str) -> Result<(), ApiError> {
    let key = StoreKey {
        group: "".into(),
        plural: "namespaces".into(),
    };
    match st.get(&key, "", ns) {
        None => Err(ApiError::namespace_not_found(ns)),
        Some(n) if is_deleting(n) => Err(ApiError::forbidden(
            rt,
            name,
            &format!(
                "unable to create new content in namespace {ns} because it is being terminated"
            ),
        )),
        Some(_) => Ok(()),
    }
}

/// Creates `body` (served form, type already checked) as a new object of `rt` in `path_ns`.
/// `manager` is recorded in managedFields (None: the caller, server-side apply, did it).
/// Returns the stored object and warnings; with `dry_run` nothing is stored.
pub(crate) fn create_object(
    st: &mut Store,
    rt: &ResourceType,
    path_ns: Option<&str>,
    body: Value,
    opts: &WriteOptions,
    manager: Option<&str>,
) -> Result<(Value, Vec<String>), ApiError> {
    let mut obj = to_internal(rt, &body);
    // Namespace.
    let body_ns = meta_str(&obj, "namespace").unwrap_or_default().to_string();
    if rt.namespaced {
        let ns = path_ns.unwrap_or_default();
        if !body_ns.is_empty() && body_ns != ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        meta_mut(&mut obj).insert("namespace".into(), json!(ns));
    } else {
        meta_mut(&mut obj).remove("namespace");
    }
    // Name.
    let mut name = meta_str(&obj, "name").unwrap_or_default().to_string();
    if name.is_empty() {
        match meta_str(&obj, "generateName").filter(|g| !g.is_empty()) {
            Some(prefix) => {
                name = names::generate_name(prefix);
                meta_mut(&mut obj).insert("name".into(), json!(name));
            }
            None => {
                return Err(ApiError::invalid(
                    rt,
                    "",
                    vec![Cause {
                        reason: "FieldValueRequired".into(),
                        message: "Required value: name or generateName is required".into(),
                        field: "metadata.name".into(),
                    }],
                ));
            }
        }
    }
    if let Some(c) = names::validate_name(&name, rt.builtin() == Some(Builtin::Namespace)) {
        return Err(ApiError::invalid(rt, &name, vec![c]));
    }
    if meta_str(&obj, "resourceVersion").is_some_and(|r| !r.is_empty()) {
        return Err(ApiError::internal(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let ns = meta_str(&obj, "namespace").unwrap_or_default().to_string();
    if rt.namespaced {
        namespace_gate(st, rt, &ns, &name)?;
    }
    if let Some(c) = rt.custom() {
        let crd_key = StoreKey {
            group: "apiextensions.k8s.io".into(),
            plural: "customresourcedefinitions".into(),
        };
        if st.get(&crd_key, "", &c.crd_name).is_some_and(is_deleting) {
            return Err(ApiError::method_not_allowed(
                "create not allowed while custom resource definition is terminating",
            ));
        }
    }
    if st.get(&rt.storage, &ns, &name).is_some() {
        return Err(ApiError::already_exists(rt, &name));
    }

    // Server-owned metadata.
    let now = now_rfc3339();
    {
        let m = meta_mut(&mut obj);
        m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        m.insert("creationTimestamp".into(), json!(now));
        for k in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
            "resourceVersion",
        ] {
            m.remove(k);
        }
        if rt.has_generation() {
            m.insert("generation".into(), json!(1));
        } else {
            m.remove("generation");
        }
    }
    // The status of a new object is the server's to set (custom resources with the status
    // subresource, and the stored-only built-ins Deployment, Service and PodDisruptionBudget,
    // whose strategies reset it on create in kube-apiserver).
    let server_status = rt.custom().is_some()
        || matches!(
            rt.builtin(),
            Some(Builtin::Deployment | Builtin::Service | Builtin::PodDisruptionBudget)
        );
    if server_status
        && rt.status_subresource()
        && let Some(m) = obj.as_object_mut()
    {
        m.remove("status");
    }
    super::update::drop_empty_finalizers(&mut obj);
    match rt.builtin() {
        Some(Builtin::Namespace) => {
            obj["spec"]["finalizers"] = json!(["kubernetes"]);
            obj["status"] = json!({"phase": "Active"});
            if !obj["metadata"]["labels"].is_object() {
                obj["metadata"]["labels"] = json!({});
            }
            obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
        }
        Some(Builtin::Secret) => super::update::normalize_secret(&mut obj),
        Some(Builtin::Crd) => crd::apply_defaults(&mut obj),
        _ => {}
    }
    let warnings = admission::admit(rt, &mut obj, None, opts.validation)?;
    if rt.builtin() == Some(Builtin::Crd) {
        let mut fins = crate::store::finalizers(&obj);
        if !fins.iter().any(|f| f == crd::CLEANUP_FINALIZER) {
            fins.push(crd::CLEANUP_FINALIZER.into());
        }
        crate::store::set_finalizers(&mut obj, &fins);
        obj["status"] = crd::established_status(&obj, None);
    }
    if let Some(manager) = manager {
        crate::patch::record_update(None, &mut obj, manager, None);
    }
    if opts.dry_run {
        return Ok((obj, warnings));
    }
    let stored = ops::commit_put(st, &rt.storage, obj);
    gc::sweep(st);
    Ok((stored, warnings))
}
