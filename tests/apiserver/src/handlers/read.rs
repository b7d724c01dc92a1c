//! GET of one object and of collections (Kubernetes API concepts: "Retrieving large results sets
//! in chunks", "Resource versions" semantics for list: unset/`0`/`NotOlderThan`/`Exact`).

use std::sync::Arc;

use axum::http::{StatusCode, header};
use axum::response::Response;
use base64::Engine;
use serde_json::{Value, json};

use crate::convert::{partial_metadata, to_external};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::server::{Output, ResourceRequest, Shared, json_response, negotiate};
use crate::status::ApiError;
use crate::store::Bucket;
use crate::table;

pub(crate) fn get(shared: &Arc<Shared>, rr: &ResourceRequest) -> Result<Response, ApiError> {
    let output = negotiate(rr.header(header::ACCEPT))?;
    let st = shared.store();
    let name = rr.name.as_deref().unwrap_or_default();
    let ns = rr.namespace.as_deref().unwrap_or_default();
    let obj = st
        .get(&rr.rt.storage, ns, name)
        .ok_or_else(|| ApiError::not_found(&rr.rt, name))?;
    let ext = to_external(&rr.rt, obj);
    let body = match output {
        Output::Json => ext,
        Output::Table => {
            let rv = ext["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            table::table(&rr.rt, std::slice::from_ref(&ext), &rv, None)
        }
        Output::Metadata => partial_metadata(&ext),
    };
    Ok(json_response(StatusCode::OK, &body))
}

/// A decoded continue token: the list's resourceVersion and the last key returned.
struct ContinueToken {
    rv: u64,
    after: (String, String),
}

fn encode_continue(rv: u64, after: &(String, String)) -> String {
    let v = json!({"v": "test-apiserver/1", "rv": rv, "ns": after.0, "name": after.1});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
}

fn decode_continue(s: &str) -> Result<ContinueToken, ApiError> {
    let bad = || {
        ApiError::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s.trim_end_matches('='))
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    Ok(ContinueToken {
        rv: v["rv"].as_u64().ok_or_else(bad)?,
        after: (
            v["ns"].as_str().ok_or_else(bad)?.to_string(),
            v["name"].as_str().ok_or_else(bad)?.to_string(),
        ),
    })
}

/// Parses a resourceVersion query value.
pub(crate) fn parse_rv(s: &str) -> Result<u64, ApiError> {
    s.parse::<u64>().map_err(|_| {
        ApiError::bad_request(format!(
            "resourceVersion: Invalid value: \"{s}\": must be a non-negative integer"
        ))
    })
}

/// 504 for a resourceVersion newer than any the server has produced.
pub(crate) fn too_large(rv: u64, current: u64) -> ApiError {
    ApiError::new(
        504,
        "Timeout",
        format!("Too large resource version: {rv}, current: {current}"),
    )
}

pub(crate) fn list(shared: &Arc<Shared>, rr: &ResourceRequest) -> Result<Response, ApiError> {
    let output = negotiate(rr.header(header::ACCEPT))?;
    let labels = LabelSelector::parse(rr.q("labelSelector").unwrap_or_default())?;
    let fields = FieldSelector::parse(rr.q("fieldSelector").unwrap_or_default(), &rr.rt)?;
    let limit: usize = match rr.q("limit") {
        None | Some("") => 0,
        Some(l) => l
            .parse()
            .map_err(|_| ApiError::bad_request(format!("limit: invalid value \"{l}\"")))?,
    };
    let token = match rr.q("continue") {
        None | Some("") => None,
        Some(c) => Some(decode_continue(c)?),
    };
    let rv_param = rr.q("resourceVersion").filter(|s| !s.is_empty());
    let rv_match = rr.q("resourceVersionMatch").filter(|s| !s.is_empty());
    if rv_match.is_some() && rv_param.is_none() {
        return Err(ApiError::bad_request(
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        ));
    }
    if token.is_some() && rv_param.is_some_and(|r| r != "0") {
        return Err(ApiError::bad_request(
            "specifying resource version is not allowed when using continue",
        ));
    }

    let st = shared.store();
    let current = st.current_rv();
    let (bucket, list_rv): (Bucket, u64) = if let Some(t) = &token {
        let b = st.snapshot_at(&rr.rt.storage, t.rv).ok_or_else(|| {
            ApiError::expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
        })?;
        (b, t.rv)
    } else {
        match (rv_param, rv_match) {
            (None, _) | (Some("0"), _) => (
                st.bucket(&rr.rt.storage).cloned().unwrap_or_default(),
                current,
            ),
            (Some(r), Some("Exact")) => {
                let n = parse_rv(r)?;
                if n > current {
                    return Err(too_large(n, current));
                }
                let b = st.snapshot_at(&rr.rt.storage, n).ok_or_else(|| {
                    ApiError::expired(format!(
                        "too old resource version: {n} ({})",
                        st.oldest_watchable_rv()
                    ))
                })?;
                (b, n)
            }
            (Some(r), None) | (Some(r), Some("NotOlderThan")) => {
                let n = parse_rv(r)?;
                if n > current {
                    return Err(too_large(n, current));
                }
                (
                    st.bucket(&rr.rt.storage).cloned().unwrap_or_default(),
                    current,
                )
            }
            (Some(_), Some(other)) => {
                return Err(ApiError::bad_request(format!(
                    "resourceVersionMatch: Unsupported value: \"{other}\": supported values: \"Exact\", \"NotOlderThan\""
                )));
            }
        }
    };
    drop(st);

    let ns = rr.namespace.as_deref();
    let mut all: Vec<(&(String, String), &Value)> = bucket
        .iter()
        .filter(|((ons, _), o)| {
            ns.is_none_or(|n| n == ons) && labels.matches(o) && fields.matches(o)
        })
        .collect();
    if let Some(t) = &token {
        all.retain(|(k, _)| **k > t.after);
    }
    let (page, rest) = if limit > 0 && all.len() > limit {
        all.split_at(limit)
    } else {
        (&all[..], &[][..])
    };
    let continue_token = if rest.is_empty() {
        None
    } else {
        page.last().map(|(k, _)| encode_continue(list_rv, k))
    };
    let items: Vec<Value> = page.iter().map(|(_, o)| to_external(&rr.rt, o)).collect();
    let rv_s = list_rv.to_string();
    let body = match output {
        Output::Table => table::table(&rr.rt, &items, &rv_s, continue_token.as_deref()),
        Output::Json | Output::Metadata => {
            let mut meta = json!({"resourceVersion": rv_s});
            if let Some(c) = &continue_token {
                meta["continue"] = json!(c);
                meta["remainingItemCount"] = json!(rest.len());
            }
            if output == Output::Json {
                json!({"kind": rr.rt.list_kind, "apiVersion": rr.rt.api_version(), "metadata": meta, "items": items})
            } else {
                let partial: Vec<Value> = items.iter().map(partial_metadata).collect();
                json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "items": partial})
            }
        }
    };
    Ok(json_response(StatusCode::OK, &body))
}
