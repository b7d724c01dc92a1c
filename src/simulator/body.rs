//! Request bodies: a size limit per route family, answered 413 in the interface's error shape;
//! a content type check; and JSON parsing whose errors name the offending field, answered with
//! 400 (never a 500 or a dropped connection).
//!
//! The interface document leaves the maximum body size "not shown"; the simulator's limits are
//! [`MAX_MANAGEMENT_BODY_BYTES`], [`MAX_TRANSMISSION_BODY_BYTES`] and
//! [`MAX_CONTROL_BODY_BYTES`]. A body over its limit is read and discarded up to 64 MiB before
//! the 413 is sent, as servers that close lingering connections gracefully do, so the client
//! reads the answer instead of a connection reset while it was still sending.

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::de::DeserializeOwned;

use super::errors::{self, ApiError, ApiResult};

/// Largest request body of the management routes (API keys, sub accounts, sending domains,
/// analytics): 64 KiB. Their largest valid body (names of 255 characters, a note of 1000, a
/// list of permission ids or addresses) is a few KiB.
pub const MAX_MANAGEMENT_BODY_BYTES: usize = 64 << 10;
/// Largest request body of the transmission endpoint: 10 MiB (message bodies and attachments).
pub const MAX_TRANSMISSION_BODY_BYTES: usize = 10 << 20;
/// Largest request body of the control routes (`/_simulator/*`): 64 KiB.
pub const MAX_CONTROL_BODY_BYTES: usize = 64 << 10;
/// An oversize body is read (and discarded) up to this size so the client gets the 413
/// before the connection closes.
const DRAIN_LIMIT_BYTES: usize = 64 << 20;

/// `routes` with request bodies limited to `max` bytes: a larger body (announced by
/// `Content-Length` or streamed) is answered 413 `PAYLOAD_TOO_LARGE` before the handler runs.
pub(crate) fn limited<S>(routes: Router<S>, max: usize) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    routes.layer(middleware::from_fn(move |request: Request, next: Next| {
        within(max, request, next)
    }))
}

/// Reads the body up to `max` bytes and hands the request on, or answers 413.
async fn within(max: usize, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    match read_capped(body, max).await {
        Ok(bytes) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Err(error) => error.into_response(),
    }
}

/// Reads the body and parses it as `T`. An empty body counts as `{}`. A non-empty body needs
/// `Content-Type: application/json` (the interface document, section "Authentication",
/// point 2).
pub(crate) async fn read_json<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
) -> ApiResult<T> {
    // Already read within its route's limit (see [`limited`]); the cap here only bounds a
    // route that was not wrapped.
    let bytes = read_capped(body, MAX_TRANSMISSION_BODY_BYTES).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return parse(b"{}");
    }
    check_content_type(headers)?;
    parse(&bytes)
}

/// Reads the body of an endpoint that takes none (share, verify-txt): an empty body or a JSON
/// object (its fields ignored) is accepted; anything else is a 400. Reading it, rather than leaving it unread, means the client always gets the answer
/// instead of a connection closed while it was still sending.
pub(crate) async fn read_ignored(headers: &HeaderMap, body: Body) -> ApiResult<()> {
    read_json::<serde_json::Map<String, serde_json::Value>>(headers, body)
        .await
        .map(|_| ())
}

fn check_content_type(headers: &HeaderMap) -> ApiResult<()> {
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let essence = content_type.split(';').next().unwrap_or("").trim();
    if essence.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        Err(ApiError::bad_request(
            "Content-Type must be application/json for a request with a body",
        ))
    }
}

/// The body, or 413 when it has more than `max` bytes (read and discarded up to 64 MiB).
async fn read_capped(body: Body, max: usize) -> ApiResult<Vec<u8>> {
    let mut stream = body.into_data_stream();
    let mut bytes = Vec::new();
    let mut total = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|_| ApiError::bad_request("the request body could not be read"))?;
        total = total.saturating_add(chunk.len());
        if total > DRAIN_LIMIT_BYTES {
            break;
        }
        if total <= max {
            bytes.extend_from_slice(&chunk);
        }
    }
    if total > max {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            errors::PAYLOAD_TOO_LARGE,
            format!("the request body is larger than {max} bytes, the limit of this endpoint"),
        ));
    }
    Ok(bytes)
}

fn parse<T: DeserializeOwned>(bytes: &[u8]) -> ApiResult<T> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut deserializer).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if path == "." || path.is_empty() {
            ApiError::bad_request(format!("invalid JSON body: {inner}"))
        } else {
            ApiError::bad_request(format!("invalid JSON body at {path}: {inner}"))
        }
    })?;
    deserializer
        .end()
        .map_err(|err| ApiError::bad_request(format!("invalid JSON body: {err}")))?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Sample {
        name: Option<String>,
        permission_ids: Option<Vec<i64>>,
    }

    fn json_headers() -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        headers
    }

    async fn read(headers: HeaderMap, body: impl Into<Body>) -> ApiResult<Sample> {
        read_json::<Sample>(&headers, body.into()).await
    }

    /// Wrong types name the field path.
    #[tokio::test]
    async fn errors_name_the_field() {
        let err = read(json_headers(), r#"{"permissionIds": [1, "x"]}"#)
            .await
            .unwrap_err();
        assert!(err.message.contains("permissionIds[1]"), "{}", err.message);
        assert_eq!(err.status, axum::http::StatusCode::BAD_REQUEST);
    }

    /// Bad JSON, trailing garbage and non-objects are 400s.
    #[tokio::test]
    async fn malformed_bodies() {
        for body in ["{", "{} x", "[]", "42", "\"s\""] {
            let err = read(json_headers(), body).await.unwrap_err();
            assert_eq!(err.status, axum::http::StatusCode::BAD_REQUEST, "{body}");
        }
    }

    /// A body over the limit is a 413 in the error shape; one at the limit is read whole.
    #[tokio::test]
    async fn oversize_bodies_are_413() {
        let err = read_capped(Body::from(vec![b' '; 101]), 100)
            .await
            .unwrap_err();
        assert_eq!(err.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(err.error, errors::PAYLOAD_TOO_LARGE);
        assert!(
            err.message.contains("larger than 100 bytes"),
            "{}",
            err.message
        );
        let read = read_capped(Body::from(vec![b' '; 100]), 100).await.unwrap();
        assert_eq!(read.len(), 100);
    }

    /// An empty body is an empty object and needs no content type.
    #[tokio::test]
    async fn empty_body_is_empty_object() {
        let sample = read(HeaderMap::new(), "").await.unwrap();
        assert!(sample.name.is_none());
    }

    /// A body without a JSON content type is rejected.
    #[tokio::test]
    async fn content_type_required() {
        let err = read(HeaderMap::new(), "{}").await.unwrap_err();
        assert!(err.message.contains("Content-Type"));
    }
}
