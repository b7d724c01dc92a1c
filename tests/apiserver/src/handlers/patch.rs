//! PATCH in the four formats kube-apiserver takes (Kubernetes API concepts, "Patch" and
//! "Server-Side Apply"): JSON merge patch, JSON patch, strategic merge patch (built-ins only; 415
//! for custom resources) and apply patches (`fieldManager` required, `force`, 201 when created,
//! 409 on field-ownership conflicts). Any of them carrying a `metadata.resourceVersion` that is
//! not the stored one gets 409 Conflict.

use std::sync::Arc;

use axum::http::header;
use axum::response::Response;
use serde_json::{Value, json};

use super::create::create_object;
use super::update::finish_update;
use super::{WriteOptions, served};
use crate::convert::{to_external, to_internal};
use crate::patch as p;
use crate::server::{ResourceRequest, Shared, json_with_warnings};
use crate::status::{ApiError, Cause};
use crate::store::{meta_mut, meta_str};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PatchKind {
    Merge,
    Json,
    Strategic,
    Apply,
}

fn apply_conflict(rr: &ResourceRequest, name: &str, c: &p::ApplyConflict) -> ApiError {
    let gv = rr.rt.api_version();
    let lines: Vec<String> = c
        .conflicts
        .iter()
        .map(|(field, manager)| format!("conflict with \"{manager}\" using {gv}: {field}"))
        .collect();
    let message = if lines.len() == 1 {
        format!("Apply failed with 1 conflict: {}", lines[0])
    } else {
        format!(
            "Apply failed with {} conflicts: {}",
            lines.len(),
            lines.join("\n")
        )
    };
    let causes: Vec<Value> = c
        .conflicts
        .iter()
        .map(|(field, manager)| {
            json!({"reason": "FieldManagerConflict", "message": format!("conflict with \"{manager}\" using {gv}"), "field": field})
        })
        .collect();
    let mut details = json!({"name": name, "kind": rr.rt.plural, "causes": causes});
    if !rr.rt.group.is_empty() {
        details["group"] = json!(rr.rt.group);
    }
    ApiError {
        details: Some(details),
        ..ApiError::new(409, "Conflict", message)
    }
}

pub(crate) fn patch(shared: &Arc<Shared>, rr: &ResourceRequest) -> Result<Response, ApiError> {
    let opts = WriteOptions::from_request(rr)?;
    let ct = rr
        .header(header::CONTENT_TYPE)
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let kind = match ct.as_str() {
        "application/merge-patch+json" => PatchKind::Merge,
        "application/json-patch+json" => PatchKind::Json,
        "application/strategic-merge-patch+json" if rr.rt.accepts_strategic_merge() => {
            PatchKind::Strategic
        }
        "application/apply-patch+yaml" => PatchKind::Apply,
        _ => {
            let accepted = if rr.rt.accepts_strategic_merge() {
                "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"
            } else {
                "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
            };
            return Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: {accepted}"
            )));
        }
    };
    let patch_body: Value = if kind == PatchKind::Apply {
        serde_yaml::from_slice(&rr.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?
    } else {
        serde_json::from_slice(&rr.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?
    };
    if kind == PatchKind::Json && !patch_body.is_array() {
        return Err(ApiError::bad_request(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
        ));
    }
    if kind != PatchKind::Json && !patch_body.is_object() {
        return Err(ApiError::bad_request(
            "the patch body must be a JSON object",
        ));
    }
    let name = rr.name.clone().unwrap_or_default();
    let ns = rr.namespace.as_deref().unwrap_or_default();
    let mut st = shared.store();
    let old = st.get(&rr.rt.storage, ns, &name).cloned();

    if kind == PatchKind::Apply {
        let manager = opts.field_manager.clone().ok_or_else(|| {
            ApiError::invalid(
                &rr.rt,
                &name,
                vec![Cause {
                    reason: "FieldValueRequired".into(),
                    message: "Required value: is required for apply patch".into(),
                    field: "fieldManager".into(),
                }],
            )
        })?;
        let mut applied = patch_body;
        let av = rr.rt.api_version();
        if applied["apiVersion"].as_str() != Some(av.as_str())
            || applied["kind"].as_str() != Some(rr.rt.kind.as_str())
        {
            return Err(ApiError::bad_request(format!(
                "invalid object type: apply patches must name apiVersion {av} and kind {}",
                rr.rt.kind
            )));
        }
        match applied["metadata"]["name"].as_str() {
            Some(n) if n == name => {}
            Some(n) => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
            None => {
                meta_mut(&mut applied).insert("name".into(), json!(name));
            }
        }
        // An applied `metadata.resourceVersion` is a precondition, as in kube-apiserver: its
        // apply handler (k8s.io/apiserver `pkg/endpoints/handlers/patch.go`) hands the merged
        // object, which keeps the applied resourceVersion, to the registry's Update
        // (`pkg/registry/generic/registry/store.go`), which answers 409 Conflict when it is not
        // the stored one; for the status subresource too (apiextensions-apiserver's
        // `customresource/status_strategy.go` relies on that check having run).
        let precondition = applied["metadata"]["resourceVersion"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        let live_ext = old.as_ref().map(|o| to_external(&rr.rt, o));
        let schema = rr.rt.custom().and_then(|c| c.schema.as_ref());
        let merged = p::server_side_apply(
            live_ext.as_ref(),
            &applied,
            &manager,
            opts.force,
            rr.subresource.as_deref(),
            schema,
        )
        .map_err(|c| apply_conflict(rr, &name, &c))?;
        return match old {
            None => {
                if rr.subresource.is_some() {
                    return Err(ApiError::not_found(&rr.rt, &name));
                }
                let mut body = merged;
                if let Some(m) = body["metadata"].as_object_mut() {
                    m.remove("resourceVersion");
                }
                let (obj, warnings) =
                    create_object(&mut st, &rr.rt, rr.namespace.as_deref(), body, &opts, None)?;
                Ok(json_with_warnings(201, &served(rr, &obj), &warnings))
            }
            Some(old) => {
                let mut new = to_internal(&rr.rt, &merged);
                if let Some(rv) = precondition {
                    meta_mut(&mut new).insert("resourceVersion".into(), json!(rv));
                }
                check_rv(rr, &name, &old, &new)?;
                let (obj, warnings) = finish_update(
                    &mut st,
                    &rr.rt,
                    rr.subresource.as_deref(),
                    &old,
                    new,
                    &opts,
                    None,
                )?;
                Ok(json_with_warnings(200, &served(rr, &obj), &warnings))
            }
        };
    }

    let old = old.ok_or_else(|| ApiError::not_found(&rr.rt, &name))?;
    let mut candidate = to_external(&rr.rt, &old);
    match kind {
        PatchKind::Merge => p::merge_patch(&mut candidate, &patch_body),
        PatchKind::Json => p::json_patch(&mut candidate, &patch_body).map_err(|e| {
            ApiError::new(
                422,
                "Invalid",
                format!("the server rejected our request due to an error in our request: {e}"),
            )
        })?,
        PatchKind::Strategic => {
            p::strategic_merge_patch(&mut candidate, &patch_body).map_err(|e| {
                ApiError::bad_request(format!("error applying strategic merge patch: {e}"))
            })?
        }
        PatchKind::Apply => unreachable!("handled above"),
    }
    if !candidate.is_object() {
        return Err(ApiError::bad_request(
            "the patched object is not a JSON object",
        ));
    }
    let mut new = to_internal(&rr.rt, &candidate);
    if meta_str(&new, "resourceVersion").is_none() {
        let rv = meta_str(&old, "resourceVersion")
            .unwrap_or_default()
            .to_string();
        meta_mut(&mut new).insert("resourceVersion".into(), json!(rv));
    }
    check_rv(rr, &name, &old, &new)?;
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

fn check_rv(rr: &ResourceRequest, name: &str, old: &Value, new: &Value) -> Result<(), ApiError> {
    match meta_str(new, "resourceVersion").filter(|s| !s.is_empty()) {
        Some(rv) if Some(rv) != meta_str(old, "resourceVersion") => {
            Err(ApiError::stale(&rr.rt, name))
        }
        _ => Ok(()),
    }
}
