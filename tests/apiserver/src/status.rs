//! `metav1.Status` error answers, shaped as kube-apiserver shapes them (Kubernetes API conventions,
//! "Response Status Kind"): `{"kind":"Status","apiVersion":"v1","status":"Failure","message",
//! "reason","details","code"}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::resources::ResourceType;

/// One failure answered as a `metav1.Status`.
///
/// `code` is the HTTP status, `reason` the machine-readable `metav1.StatusReason` (e.g. `NotFound`),
/// `details` the optional `metav1.StatusDetails` object.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status code (also `status.code`).
    pub code: u16,
    /// `metav1.StatusReason`, e.g. `"NotFound"`, `"Invalid"`.
    pub reason: &'static str,
    /// Human-readable message as kube-apiserver words it.
    pub message: String,
    /// `metav1.StatusDetails` (`name`, `group`, `kind`, `causes`, ...), if any.
    pub details: Option<Value>,
}

/// A field-level cause of an `Invalid` answer (`metav1.StatusCause`).
#[derive(Debug, Clone)]
pub struct Cause {
    /// `metav1.CauseType`, e.g. `FieldValueInvalid`.
    pub reason: String,
    /// The error body without the field path, e.g. `Invalid value: "x": must be ...`.
    pub message: String,
    /// The field path, e.g. `spec.domain`.
    pub field: String,
}

/// The `kind.group` name kube-apiserver uses in messages about a resource: `widgets.example.com`,
/// or the bare plural for the core group (`configmaps`).
pub fn qualified_resource(rt: &ResourceType) -> String {
    if rt.group.is_empty() {
        rt.plural.clone()
    } else {
        format!("{}.{}", rt.plural, rt.group)
    }
}

/// The group-qualified kind used in `Invalid` messages: `Widget.example.com`, or `ConfigMap`.
pub fn qualified_kind(rt: &ResourceType) -> String {
    if rt.group.is_empty() {
        rt.kind.clone()
    } else {
        format!("{}.{}", rt.kind, rt.group)
    }
}

fn resource_details(rt: &ResourceType, name: &str) -> Value {
    let mut d = json!({"name": name, "kind": rt.plural});
    if !rt.group.is_empty() {
        d["group"] = json!(rt.group);
    }
    d
}

impl ApiError {
    /// Builds an error with no details.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// 400 `BadRequest`.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    /// 403 `Forbidden` about an object, message `<resource> "<name>" is forbidden: <why>`.
    pub fn forbidden(rt: &ResourceType, name: &str, why: &str) -> ApiError {
        ApiError {
            details: Some(resource_details(rt, name)),
            ..ApiError::new(
                403,
                "Forbidden",
                format!(
                    "{} \"{}\" is forbidden: {}",
                    qualified_resource(rt),
                    name,
                    why
                ),
            )
        }
    }

    /// 404 `NotFound`: `<resource> "<name>" not found`.
    pub fn not_found(rt: &ResourceType, name: &str) -> ApiError {
        ApiError {
            details: Some(resource_details(rt, name)),
            ..ApiError::new(
                404,
                "NotFound",
                format!("{} \"{}\" not found", qualified_resource(rt), name),
            )
        }
    }

    /// 404 `NotFound` for a namespace: `namespaces "<name>" not found`.
    pub fn namespace_not_found(name: &str) -> ApiError {
        ApiError {
            details: Some(json!({"name": name, "kind": "namespaces"})),
            ..ApiError::new(404, "NotFound", format!("namespaces \"{name}\" not found"))
        }
    }

    /// 404 `NotFound` for a path that names no served resource.
    pub fn path_not_found(path: &str) -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource (path {path})"),
        )
    }

    /// 409 `AlreadyExists`.
    pub fn already_exists(rt: &ResourceType, name: &str) -> ApiError {
        ApiError {
            details: Some(resource_details(rt, name)),
            ..ApiError::new(
                409,
                "AlreadyExists",
                format!("{} \"{}\" already exists", qualified_resource(rt), name),
            )
        }
    }

    /// 409 `Conflict`: `Operation cannot be fulfilled on <resource> "<name>": <why>`.
    pub fn conflict(rt: &ResourceType, name: &str, why: &str) -> ApiError {
        ApiError {
            details: Some(resource_details(rt, name)),
            ..ApiError::new(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {} \"{}\": {}",
                    qualified_resource(rt),
                    name,
                    why
                ),
            )
        }
    }

    /// 409 `Conflict` for a stale `metadata.resourceVersion` (optimistic concurrency).
    pub fn stale(rt: &ResourceType, name: &str) -> ApiError {
        ApiError::conflict(
            rt,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 `Invalid` with one cause per field error; message
    /// `<Kind.group> "<name>" is invalid: <field>: <body>` (several joined in `[...]`).
    pub fn invalid(rt: &ResourceType, name: &str, causes: Vec<Cause>) -> ApiError {
        let parts: Vec<String> = causes
            .iter()
            .map(|c| {
                if c.field.is_empty() {
                    c.message.clone()
                } else {
                    format!("{}: {}", c.field, c.message)
                }
            })
            .collect();
        let joined = if parts.len() == 1 {
            parts[0].clone()
        } else {
            format!("[{}]", parts.join(", "))
        };
        let mut details = json!({"name": name, "kind": rt.kind});
        if !rt.group.is_empty() {
            details["group"] = json!(rt.group);
        }
        details["causes"] = Value::Array(
            causes
                .iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect(),
        );
        ApiError {
            details: Some(details),
            ..ApiError::new(
                422,
                "Invalid",
                format!("{} \"{}\" is invalid: {}", qualified_kind(rt), name, joined),
            )
        }
    }

    /// 405 `MethodNotAllowed`.
    pub fn method_not_allowed(message: impl Into<String>) -> ApiError {
        ApiError::new(405, "MethodNotAllowed", message)
    }

    /// 415 `UnsupportedMediaType`.
    pub fn unsupported_media_type(message: impl Into<String>) -> ApiError {
        ApiError::new(415, "UnsupportedMediaType", message)
    }

    /// 406 `NotAcceptable`.
    pub fn not_acceptable(message: impl Into<String>) -> ApiError {
        ApiError::new(406, "NotAcceptable", message)
    }

    /// 410 `Expired`, as kube-apiserver answers a too-old resourceVersion or continue token.
    pub fn expired(message: impl Into<String>) -> ApiError {
        ApiError::new(410, "Expired", message)
    }

    /// 500 `InternalError`.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(500, "InternalError", message)
    }

    /// 501 `NotImplemented`: a feature this emulator does not simulate. The message starts with
    /// `not implemented by the test API server: ` so a test sees at once what is missing.
    pub fn not_implemented(what: impl AsRef<str>) -> ApiError {
        ApiError::new(
            501,
            "NotImplemented",
            format!("not implemented by the test API server: {}", what.as_ref()),
        )
    }

    /// The Status object as JSON.
    pub fn to_status(&self) -> Value {
        let mut v = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            v["details"] = d.clone();
        }
        v
    }

    /// Maps an HTTP status code to the reason kube-apiserver uses for it (used by injected faults).
    pub fn reason_for_code(code: u16) -> &'static str {
        match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            405 => "MethodNotAllowed",
            406 => "NotAcceptable",
            409 => "Conflict",
            410 => "Expired",
            415 => "UnsupportedMediaType",
            422 => "Invalid",
            429 => "TooManyRequests",
            501 => "NotImplemented",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "InternalError",
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        crate::server::json_response(code, &self.to_status())
    }
}

/// A successful `metav1.Status` (as answered by DELETE of built-in kinds).
pub fn success_status(details: Value) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}
