//! DELETE of one object and of a collection (Kubernetes API concepts, "Delete"; DeleteOptions
//! `propagationPolicy`, `gracePeriodSeconds`, `preconditions`, `dryRun`, from the body or the query).

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use crate::convert::to_external;
use crate::gc;
use crate::ops::{DeleteOutcome, Propagation, begin_delete};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::server::{ResourceRequest, Shared, json_response};
use crate::status::{ApiError, success_status};
use crate::store::meta_str;

struct DeleteOptions {
    policy: Propagation,
    dry_run: bool,
    precondition_uid: Option<String>,
    precondition_rv: Option<String>,
}

fn options(rr: &ResourceRequest) -> Result<DeleteOptions, ApiError> {
    let body: Value = if rr.body.iter().all(|b| b.is_ascii_whitespace()) {
        json!({})
    } else if rr
        .header(axum::http::header::CONTENT_TYPE)
        .is_some_and(|c| c.starts_with("application/vnd.kubernetes.protobuf"))
    {
        crate::protobuf::decode_protobuf_object(&rr.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?
    } else {
        serde_json::from_slice(&rr.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?
    };
    let policy_s = body["propagationPolicy"]
        .as_str()
        .map(str::to_string)
        .or_else(|| rr.q("propagationPolicy").map(str::to_string));
    let orphan_legacy = body["orphanDependents"]
        .as_bool()
        .or_else(|| rr.q("orphanDependents").map(|v| v == "true"));
    let policy = match (policy_s.as_deref(), orphan_legacy) {
        (Some("Background"), _) => Propagation::Background,
        (Some("Foreground"), _) => Propagation::Foreground,
        (Some("Orphan"), _) => Propagation::Orphan,
        (Some(other), _) => {
            return Err(ApiError::bad_request(format!(
                "propagationPolicy: Unsupported value: \"{other}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
            )));
        }
        (None, Some(true)) => Propagation::Orphan,
        (None, _) => Propagation::Background,
    };
    let dry_run = match body["dryRun"].as_array() {
        Some(a) => a.iter().any(|v| v == "All"),
        None => rr.q("dryRun") == Some("All"),
    };
    if let Some(g) = body["gracePeriodSeconds"]
        .as_i64()
        .or_else(|| rr.q("gracePeriodSeconds").and_then(|g| g.parse().ok()))
        && g < 0
    {
        return Err(ApiError::bad_request("gracePeriodSeconds must be >= 0"));
    }
    Ok(DeleteOptions {
        policy,
        dry_run,
        precondition_uid: body["preconditions"]["uid"].as_str().map(str::to_string),
        precondition_rv: body["preconditions"]["resourceVersion"]
            .as_str()
            .map(str::to_string),
    })
}

pub(crate) fn delete(shared: &Arc<Shared>, rr: &ResourceRequest) -> Result<Response, ApiError> {
    let o = options(rr)?;
    let name = rr.name.clone().unwrap_or_default();
    let ns = rr.namespace.as_deref().unwrap_or_default();
    let mut st = shared.store();
    let current = st
        .get(&rr.rt.storage, ns, &name)
        .cloned()
        .ok_or_else(|| ApiError::not_found(&rr.rt, &name))?;
    let uid = meta_str(&current, "uid").unwrap_or_default().to_string();
    if let Some(want) = &o.precondition_uid
        && *want != uid
    {
        return Err(ApiError::conflict(
            &rr.rt,
            &name,
            &format!("Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"),
        ));
    }
    if let Some(want) = &o.precondition_rv {
        let have = meta_str(&current, "resourceVersion").unwrap_or_default();
        if want != have {
            return Err(ApiError::conflict(
                &rr.rt,
                &name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {have}"
                ),
            ));
        }
    }
    let outcome = begin_delete(&mut st, &rr.rt.storage, ns, &name, o.policy, o.dry_run)
        .ok_or_else(|| ApiError::not_found(&rr.rt, &name))?;
    if !o.dry_run {
        gc::sweep(&mut st);
    }
    let body = match outcome {
        DeleteOutcome::Pending(obj) => to_external(&rr.rt, &obj),
        DeleteOutcome::Removed(obj) => {
            if rr.rt.returns_deleted_object() {
                to_external(&rr.rt, &obj)
            } else {
                let mut d = json!({"name": name, "kind": rr.rt.plural, "uid": uid});
                if !rr.rt.group.is_empty() {
                    d["group"] = json!(rr.rt.group);
                }
                success_status(d)
            }
        }
    };
    Ok(json_response(StatusCode::OK, &body))
}

pub(crate) fn delete_collection(
    shared: &Arc<Shared>,
    rr: &ResourceRequest,
) -> Result<Response, ApiError> {
    let o = options(rr)?;
    let labels = LabelSelector::parse(rr.q("labelSelector").unwrap_or_default())?;
    let fields = FieldSelector::parse(rr.q("fieldSelector").unwrap_or_default(), &rr.rt)?;
    let ns = rr.namespace.clone().unwrap_or_default();
    let mut st = shared.store();
    let targets: Vec<String> = st
        .bucket(&rr.rt.storage)
        .map(|b| {
            b.iter()
                .filter(|((ons, _), obj)| *ons == ns && labels.matches(obj) && fields.matches(obj))
                .map(|((_, n), _)| n.clone())
                .collect()
        })
        .unwrap_or_default();
    let mut items = Vec::new();
    for name in targets {
        match begin_delete(&mut st, &rr.rt.storage, &ns, &name, o.policy, o.dry_run) {
            Some(DeleteOutcome::Pending(obj)) | Some(DeleteOutcome::Removed(obj)) => {
                items.push(to_external(&rr.rt, &obj));
            }
            None => {}
        }
    }
    if !o.dry_run {
        gc::sweep(&mut st);
    }
    let rv = st.current_rv().to_string();
    Ok(json_response(
        StatusCode::OK,
        &json!({"kind": rr.rt.list_kind, "apiVersion": rr.rt.api_version(),
            "metadata": {"resourceVersion": rv}, "items": items}),
    ))
}
