//! Reading answer bodies with a size cap, and decoding them into typed values with error
//! messages that never contain body text (bodies may hold API key values or DKIM private keys).

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::error::ApiError;

/// Longest path kept in a decode error message, in characters.
const MAX_PATH_CHARS: usize = 200;

/// An answer body read up to a cap.
pub(crate) struct CappedBody {
    /// The bytes read (at most the cap).
    pub(crate) bytes: Vec<u8>,
    /// True when the body was longer than the cap and reading stopped.
    pub(crate) truncated: bool,
}

/// Reads `response`'s body chunk by chunk, stopping once more than `limit` bytes arrived, so
/// memory stays bounded whatever the server sends. A `Content-Length` above the cap stops
/// before reading anything.
pub(crate) async fn read_capped(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<CappedBody, reqwest::Error> {
    let announced = response.content_length().unwrap_or(0);
    if usize::try_from(announced).map_or(true, |announced| announced > limit) {
        return Ok(CappedBody {
            bytes: Vec::new(),
            truncated: true,
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(announced).unwrap_or(0));
    while let Some(chunk) = response.chunk().await? {
        let room = limit - bytes.len();
        if chunk.len() > room {
            bytes.extend_from_slice(&chunk[..room]);
            return Ok(CappedBody {
                bytes,
                truncated: true,
            });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(CappedBody {
        bytes,
        truncated: false,
    })
}

/// Parses a body as JSON (syntax only).
pub(crate) fn parse_json(endpoint: &'static str, body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|err| ApiError::Decode {
        endpoint,
        message: syntax_message(&err),
    })
}

/// Decodes a parsed body into `T`; on failure the message names the path and what was
/// expected, never the value found.
pub(crate) fn from_value<T: DeserializeOwned>(
    endpoint: &'static str,
    value: &Value,
) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(|err| ApiError::Decode {
        endpoint,
        message: data_message(value, &err),
    })
}

/// Parses and decodes a body into `T`.
pub(crate) fn decode<T: DeserializeOwned>(
    endpoint: &'static str,
    body: &[u8],
) -> Result<T, ApiError> {
    from_value(endpoint, &parse_json(endpoint, body)?)
}

/// The message of a JSON syntax error: serde_json's own texts for syntax and end-of-input
/// errors are fixed phrases plus a position, never input text.
fn syntax_message(err: &serde_json::Error) -> String {
    match err.classify() {
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
            format!("malformed JSON: {err}")
        }
        serde_json::error::Category::Data | serde_json::error::Category::Io => format!(
            "malformed JSON at line {} column {}",
            err.line(),
            err.column()
        ),
    }
}

/// The message of a shape error: where, what kind of JSON value was found there, and what was
/// expected. serde's own message is only kept when it cannot contain input text.
fn data_message(value: &Value, err: &serde_path_to_error::Error<serde_json::Error>) -> String {
    let path = shorten(&err.path().to_string());
    let inner = err.inner().to_string();
    let found = lookup(value, err.path()).map(json_kind);
    let expected = inner
        .rsplit_once(", expected ")
        .map(|(_, expected)| expected);
    let safe_prefixes = ["missing field", "duplicate field", "invalid length"];
    let what = if safe_prefixes.iter().any(|p| inner.starts_with(p)) {
        inner.clone()
    } else if inner.starts_with("invalid type") || inner.starts_with("invalid value") {
        match (found, expected) {
            (Some(found), Some(expected)) => format!("found {found}, expected {expected}"),
            (None, Some(expected)) => format!("invalid value, expected {expected}"),
            _ => "invalid value".to_owned(),
        }
    } else if let Some(expected) = expected {
        format!("unexpected value, expected {expected}")
    } else {
        "value does not match the expected shape".to_owned()
    };
    format!("at `{path}`: {what}")
}

/// Follows a serde path into the parsed value.
fn lookup<'v>(value: &'v Value, path: &serde_path_to_error::Path) -> Option<&'v Value> {
    use serde_path_to_error::Segment;
    path.iter()
        .try_fold(value, |current, segment| match segment {
            Segment::Seq { index } => current.get(*index),
            Segment::Map { key } => current.get(key.as_str()),
            Segment::Enum { .. } | Segment::Unknown => Some(current),
        })
}

/// The JSON type of a value, for messages.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a floating point number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Keeps a path readable and bounded.
fn shorten(path: &str) -> String {
    match path.char_indices().nth(MAX_PATH_CHARS) {
        Some((cut, _)) => format!("{}…", &path[..cut]),
        None => path.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::types::{ApiKeyDetail, ApiKeyList};

    const EP: &str = "GET /api-key/{id}";

    fn decode_message<T: DeserializeOwned>(body: &str) -> String {
        match decode::<T>(EP, body.as_bytes()) {
            Err(ApiError::Decode { message, .. }) => message,
            Err(other) => panic!("unexpected error {other:?}"),
            Ok(_) => panic!("decoded {body}"),
        }
    }

    /// A secret in a field of the wrong type never reaches the error message.
    #[test]
    fn wrong_type_message_names_path_not_value() {
        let body = r#"{"apiKeys":[{"id":"sk-live-SECRET","key":"x"}],"count":1}"#;
        let message = decode_message::<ApiKeyList>(body);
        assert!(!message.contains("SECRET"), "{message}");
        assert!(message.contains("apiKeys[0].id"), "{message}");
        assert!(message.contains("found a string"), "{message}");
        assert!(message.contains("expected i64"), "{message}");
    }

    /// A secret sent where a number or list belongs is not echoed either.
    #[test]
    fn secret_in_wrong_place_is_not_echoed() {
        let body = r#"{"id":1,"permissions":"sk-live-SECRET, expected nothing"}"#;
        let message = decode_message::<ApiKeyDetail>(body);
        assert!(!message.contains("SECRET"), "{message}");
        assert!(message.contains("permissions"), "{message}");
    }

    /// A missing required field is named.
    #[test]
    fn missing_id_is_named() {
        let message = decode_message::<ApiKeyDetail>(r#"{"key":"sk-live-SECRET"}"#);
        assert!(message.contains("missing field `id`"), "{message}");
        assert!(!message.contains("SECRET"), "{message}");
    }

    /// Malformed JSON gives a position, not text.
    #[test]
    fn malformed_json() {
        let message = decode_message::<ApiKeyDetail>(r#"{"id":1,"key":"sk-live-SECRET"#);
        assert!(message.starts_with("malformed JSON"), "{message}");
        assert!(!message.contains("SECRET"), "{message}");
        let message = decode_message::<ApiKeyDetail>("<html>oops</html>");
        assert!(message.starts_with("malformed JSON"), "{message}");
    }

    /// Paths of absurd length are cut.
    #[test]
    fn long_paths_are_shortened() {
        assert_eq!(shorten("abc"), "abc");
        assert_eq!(
            shorten(&"a".repeat(1000)).chars().count(),
            MAX_PATH_CHARS + 1
        );
    }
}
