//! Request body reading: a size cap, a content type check and JSON parsing whose errors name
//! the offending field, all answered with 400 in the interface's error shape (never a 500 or
//! a dropped connection).

use axum::body::Body;
use axum::http::HeaderMap;
use axum::http::header::CONTENT_TYPE;
use futures::StreamExt;
use serde::de::DeserializeOwned;

use super::errors::{ApiError, ApiResult};

/// Largest accepted request body: 1 MiB.
pub const MAX_BODY_BYTES: usize = 1 << 20;
/// An oversize body is read (and discarded) up to this size so the client gets the 400
/// before the connection closes.
const DRAIN_LIMIT_BYTES: usize = 64 << 20;

/// Reads the body and parses it as `T`. An empty body counts as `{}`. A non-empty body needs
/// `Content-Type: application/json` (the interface document, section "Authentication",
/// point 2).
pub(crate) async fn read_json<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
) -> ApiResult<T> {
    let bytes = read_capped(body).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return parse(b"{}");
    }
    check_content_type(headers)?;
    parse(&bytes)
}

/// Reads the body of an endpoint that takes none (share, verify-txt): an empty body or a JSON
/// object (its fields ignored) is accepted; anything else, or more than [`MAX_BODY_BYTES`], is a
/// 400. Reading it, rather than leaving it unread, means the client always gets the answer
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

async fn read_capped(body: Body) -> ApiResult<Vec<u8>> {
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
        if total <= MAX_BODY_BYTES {
            bytes.extend_from_slice(&chunk);
        }
    }
    if total > MAX_BODY_BYTES {
        return Err(ApiError::bad_request(format!(
            "the request body is larger than {MAX_BODY_BYTES} bytes"
        )));
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

    /// Bad JSON, trailing garbage, non-objects and oversize bodies are 400s.
    #[tokio::test]
    async fn malformed_bodies() {
        for body in ["{", "{} x", "[]", "42", "\"s\""] {
            assert!(read(json_headers(), body).await.is_err(), "{body}");
        }
        let big = format!("{{\"name\": \"{}\"}}", "a".repeat(MAX_BODY_BYTES));
        let err = read(json_headers(), big).await.unwrap_err();
        assert!(err.message.contains("larger"));
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
