//! Error responses in the interface's shape.
//!
//! The interface document, section "Errors": 400, 401 and 500 carry
//! `{"error": string, "message": string, "data": {}}`; the 400 body of the transmission
//! endpoint has only `error` and `message`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// `error` value for a malformed or invalid request (bad JSON, wrong type, bad query value).
pub const INVALID_REQUEST: &str = "INVALID_REQUEST";
/// `error` value for an unknown id (answered with 400, as the interface lists no 404).
pub const NOT_FOUND: &str = "NOT_FOUND";
/// `error` value for a name or domain that already exists.
pub const DUPLICATE: &str = "DUPLICATE";
/// `error` value for missing or unacceptable credentials (401).
pub const UNAUTHORIZED: &str = "UNAUTHORIZED";
/// `error` value for an injected or internal server error (500).
pub const INTERNAL_ERROR: &str = "INTERNAL_ERROR";
/// `error` value for an injected rate limit (429).
pub const RATE_LIMITED: &str = "RATE_LIMITED";
/// `error` value for an injected failure with a status other than 5xx or 429.
pub const INJECTED_FAULT: &str = "INJECTED_FAULT";
/// `error` value for a method the path does not support (405).
pub const METHOD_NOT_ALLOWED: &str = "METHOD_NOT_ALLOWED";
/// `error` value for a request body over its route's limit (413; see `docs/simulator.md`).
pub const PAYLOAD_TOO_LARGE: &str = "PAYLOAD_TOO_LARGE";
/// `error` value for a path that is not part of the interface (404).
pub const ROUTE_NOT_FOUND: &str = "ROUTE_NOT_FOUND";

/// An error answer. Messages never contain key values or private keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiError {
    pub status: StatusCode,
    pub error: &'static str,
    pub message: String,
    /// False for the transmission endpoint's 400 body (no `data`).
    pub with_data: bool,
}

pub(crate) type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(status: StatusCode, error: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            error,
            message: message.into(),
            with_data: true,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, INVALID_REQUEST, message)
    }

    pub fn not_found(kind: &str, id: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            NOT_FOUND,
            format!("{kind} {id} not found"),
        )
    }

    pub fn duplicate(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, DUPLICATE, message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, UNAUTHORIZED, message)
    }

    /// The transmission endpoint's variant: a 400 without `data`; other statuses unchanged.
    pub fn for_transmission(mut self) -> Self {
        if self.status == StatusCode::BAD_REQUEST {
            self.with_data = false;
        }
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = if self.with_data {
            json!({"error": self.error, "message": self.message, "data": {}})
        } else {
            json!({"error": self.error, "message": self.message})
        };
        (self.status, Json(body)).into_response()
    }
}

/// 405 for a method the path does not serve, in the interface's error shape.
pub(crate) async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        METHOD_NOT_ALLOWED,
        "this method is not supported on this path",
    )
}

/// 404 for a path outside the interface, in the interface's error shape.
pub(crate) async fn route_not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, ROUTE_NOT_FOUND, "no such endpoint")
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body_of(error: ApiError) -> (StatusCode, serde_json::Value) {
        let response = error.into_response();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    /// Ordinary errors carry error, message and an empty data object.
    #[tokio::test]
    async fn shape_with_data() {
        let (status, body) = body_of(ApiError::not_found("API key", 7)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(
            body,
            json!({"error": "NOT_FOUND", "message": "API key 7 not found", "data": {}})
        );
    }

    /// The transmission 400 has no data field; its 401 keeps the common shape.
    #[tokio::test]
    async fn transmission_shape() {
        let (_, body) =
            body_of(ApiError::bad_request("subject is required").for_transmission()).await;
        assert_eq!(
            body,
            json!({"error": "INVALID_REQUEST", "message": "subject is required"})
        );
        let (_, body) = body_of(ApiError::unauthorized("no").for_transmission()).await;
        assert!(body.get("data").is_some());
    }
}
