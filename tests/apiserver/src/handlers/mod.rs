//! Resource request handlers: routing by method and path shape, plus what every write shares
//! (query options, body decoding).

mod create;
mod delete;
mod patch;
pub(crate) mod read;
mod update;

use std::sync::Arc;

use axum::http::{Method, header};
use axum::response::Response;
use serde_json::{Value, json};

use crate::admission::FieldValidation;
use crate::resources::{Builtin, StoreKey};
use crate::server::{ResourceRequest, Shared};
use crate::status::ApiError;
use crate::store::now_rfc3339;

/// Routes a resource request.
pub(crate) async fn dispatch(
    shared: &Arc<Shared>,
    rr: ResourceRequest,
) -> Result<Response, ApiError> {
    match rr.subresource.as_deref() {
        None => {}
        Some("status") if rr.rt.status_subresource() => {}
        Some("scale") if rr.rt.custom().is_some_and(|c| c.scale_subresource) => {
            return Err(ApiError::not_implemented("the scale subresource"));
        }
        Some("finalize") if rr.rt.builtin() == Some(Builtin::Namespace) => {
            return Err(ApiError::not_implemented(
                "the namespaces/finalize subresource",
            ));
        }
        Some(_) => {
            return Err(ApiError::path_not_found(&format!(
                "{}/{}",
                rr.rt.plural,
                rr.subresource.as_deref().unwrap_or_default()
            )));
        }
    }
    let is_collection = rr.name.is_none();
    let m = rr.method.clone();
    if is_collection {
        if m == Method::GET {
            return if matches!(rr.q("watch"), Some("true") | Some("1")) {
                crate::watch::watch(shared, &rr)
            } else {
                read::list(shared, &rr)
            };
        }
        if rr.rt.namespaced && rr.namespace.is_none() {
            return Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource: {} {} without a namespace",
                m, rr.rt.plural
            )));
        }
        if m == Method::POST {
            return create::create(shared, &rr);
        }
        if m == Method::DELETE {
            return delete::delete_collection(shared, &rr);
        }
    } else {
        if m == Method::GET {
            return read::get(shared, &rr);
        }
        if m == Method::PUT {
            return update::replace(shared, &rr);
        }
        if m == Method::PATCH {
            return patch::patch(shared, &rr);
        }
        if m == Method::DELETE {
            if rr.subresource.is_some() {
                return Err(ApiError::method_not_allowed(
                    "the server does not allow this method on the requested resource",
                ));
            }
            return delete::delete(shared, &rr);
        }
    }
    Err(ApiError::method_not_allowed(format!(
        "the server does not allow this method on the requested resource ({m})"
    )))
}

/// Options every write accepts: `dryRun`, `fieldManager`, `fieldValidation`, `force`.
pub(crate) struct WriteOptions {
    pub dry_run: bool,
    pub field_manager: Option<String>,
    pub validation: FieldValidation,
    pub force: bool,
}

impl WriteOptions {
    pub(crate) fn from_request(rr: &ResourceRequest) -> Result<WriteOptions, ApiError> {
        let dry_run = match rr.q("dryRun") {
            None | Some("") => false,
            Some("All") => true,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "dryRun: Unsupported value: \"{other}\": supported values: \"All\""
                )));
            }
        };
        let force = match rr.q("force") {
            None | Some("") | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "force: invalid value \"{other}\""
                )));
            }
        };
        Ok(WriteOptions {
            dry_run,
            field_manager: rr
                .q("fieldManager")
                .filter(|s| !s.is_empty())
                .map(str::to_string),
            validation: FieldValidation::parse(rr.q("fieldValidation"))?,
            force,
        })
    }

    /// The manager recorded for non-apply writes (kube-apiserver derives one from the user
    /// agent when none is given).
    pub(crate) fn update_manager(&self, rr: &ResourceRequest) -> String {
        if let Some(m) = &self.field_manager {
            return m.clone();
        }
        rr.header(header::USER_AGENT)
            .and_then(|ua| ua.split('/').next())
            .filter(|s| !s.is_empty())
            .unwrap_or("unknown")
            .to_string()
    }
}

/// Decodes a request body by Content-Type: JSON (default), YAML, or Kubernetes protobuf.
pub(crate) fn decode_body(rr: &ResourceRequest) -> Result<Value, ApiError> {
    let ct = rr
        .header(header::CONTENT_TYPE)
        .unwrap_or("application/json")
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let v: Value = match ct.as_str() {
        "application/json" | "" => serde_json::from_slice(&rr.body).map_err(|e| {
            ApiError::bad_request(format!("error decoding request body: json: {e}"))
        })?,
        "application/yaml" => serde_yaml::from_slice(&rr.body).map_err(|e| {
            ApiError::bad_request(format!("error decoding request body: yaml: {e}"))
        })?,
        "application/vnd.kubernetes.protobuf" => crate::protobuf::decode_protobuf_object(&rr.body)
            .map_err(|e| {
                ApiError::bad_request(format!("error decoding protobuf request body: {e}"))
            })?,
        other => {
            return Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf (got {other})"
            )));
        }
    };
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    Ok(v)
}

/// Checks `apiVersion`/`kind` of a body against the resource and fills them when absent.
pub(crate) fn check_type(rr: &ResourceRequest, obj: &mut Value) -> Result<(), ApiError> {
    let rt = &rr.rt;
    let want_av = rt.api_version();
    match obj["apiVersion"].as_str() {
        Some(av) if av != want_av => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({want_av})"
            )));
        }
        _ => obj["apiVersion"] = json!(want_av),
    }
    match obj["kind"].as_str() {
        Some(k) if k != rt.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                rt.kind
            )));
        }
        _ => obj["kind"] = json!(rt.kind),
    }
    Ok(())
}

/// Creates the namespaces that exist in every cluster.
pub(crate) fn bootstrap(shared: &Shared) {
    let mut st = shared.store();
    let key = StoreKey {
        group: "".into(),
        plural: "namespaces".into(),
    };
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let obj = create::new_namespace_object(ns, &now_rfc3339());
        st.put(&key, obj);
    }
}

/// The served form of a stored object.
pub(crate) fn served(rr: &ResourceRequest, stored: &Value) -> Value {
    crate::convert::to_external(&rr.rt, stored)
}
