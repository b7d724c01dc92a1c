//! Errors of the API client and the mapping from HTTP answers to them.
//!
//! The interface document (section "Errors") gives error bodies as `{error, message, data}` on
//! 400, 401 and 500 and lists no 404; the simulator answers an unknown id with 400 and `error`
//! `NOT_FOUND` (and an unknown transmission id, where the interface lists only 401 and 500,
//! with 500 and `NOT_FOUND`). A plain 404, and a 400 or 5xx whose `error` says not found,
//! become [`ApiError::NotFound`].
//!
//! No variant ever carries a secret: bodies of successful answers (which may hold API key values
//! or DKIM private keys) are never copied into an error, only the path and the expected type of
//! the value that failed to decode.

use std::time::Duration;

use crate::text::printable;

/// Result of the API client.
pub type Result<T, E = ApiError> = std::result::Result<T, E>;

/// Longest excerpt of an error body kept in an error, in characters.
const MAX_BODY_EXCERPT: usize = 512;

/// A failed call to the service. `endpoint` is the method and path template of the call, e.g.
/// `"GET /api-key/{id}"` (never an id or a query).
#[derive(thiserror::Error, Debug)]
#[non_exhaustive]
pub enum ApiError {
    /// The object does not exist: status 404, or 400 or 5xx whose `error` says not found.
    #[error("{endpoint}: not found (status {status}, error {error:?}): {message}")]
    NotFound {
        /// Method and path template.
        endpoint: &'static str,
        /// HTTP status (404 or 400).
        status: u16,
        /// The `error` field of the body (empty when absent).
        error: String,
        /// The `message` field of the body (or a truncated text body).
        message: String,
    },
    /// The credentials were refused (401).
    #[error("{endpoint}: authentication failed (status 401): {message}")]
    Unauthorized {
        /// Method and path template.
        endpoint: &'static str,
        /// The `message` field of the body (or a truncated text body).
        message: String,
    },
    /// The request was rejected (400, not a not-found).
    #[error("{endpoint}: request rejected (status 400, error {error:?}): {message}")]
    BadRequest {
        /// Method and path template.
        endpoint: &'static str,
        /// The `error` field of the body (empty when absent).
        error: String,
        /// The `message` field of the body (or a truncated text body).
        message: String,
    },
    /// Another 4xx answer the interface does not list (403, 409, 422, ...).
    #[error("{endpoint}: request rejected (status {status}, error {error:?}): {message}")]
    Rejected {
        /// Method and path template.
        endpoint: &'static str,
        /// HTTP status.
        status: u16,
        /// The `error` field of the body (empty when absent).
        error: String,
        /// The `message` field of the body (or a truncated text body).
        message: String,
    },
    /// Too many requests (429); `retry_after` comes from the `Retry-After` header.
    #[error("{endpoint}: rate limited (status 429{})", retry_after_text(*.retry_after))]
    RateLimited {
        /// Method and path template.
        endpoint: &'static str,
        /// Delay the service asked for, if it sent a valid `Retry-After`.
        retry_after: Option<Duration>,
    },
    /// The service failed (5xx).
    #[error("{endpoint}: server error (status {status}): {body}")]
    Server {
        /// Method and path template.
        endpoint: &'static str,
        /// HTTP status.
        status: u16,
        /// `error: message` from the body, or a truncated text body.
        body: String,
    },
    /// No complete answer within the configured timeout.
    #[error("{endpoint}: timed out after {after:?}")]
    Timeout {
        /// Method and path template.
        endpoint: &'static str,
        /// The timeout that expired.
        after: Duration,
    },
    /// The connection failed (refused, reset, TLS, body cut short).
    #[error("{endpoint}: transport error: {message}")]
    Transport {
        /// Method and path template.
        endpoint: &'static str,
        /// Description of the failure (no body, no credentials).
        message: String,
    },
    /// A successful answer did not match the documented shape.
    #[error("{endpoint}: unexpected response body: {message}")]
    Decode {
        /// Method and path template.
        endpoint: &'static str,
        /// Where decoding failed and what was expected (never the body text).
        message: String,
    },
    /// The answer body was larger than the configured cap.
    #[error("{endpoint}: response body larger than {limit} bytes")]
    TooLarge {
        /// Method and path template.
        endpoint: &'static str,
        /// The cap, in bytes.
        limit: usize,
    },
    /// The request could not be built (an argument is unusable, e.g. an empty transmission id).
    #[error("{endpoint}: invalid request: {message}")]
    InvalidRequest {
        /// Method and path template.
        endpoint: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A write (POST, PUT, DELETE) the client's [`WriteGate`](crate::api::WriteGate) refused:
    /// nothing was sent. Retryable: the gate opens again (this replica becomes leader again),
    /// or the caller stops.
    #[error(
        "{endpoint}: not sent: this replica may not write now (it does not hold the leader lease within its renew deadline)"
    )]
    NotWritable {
        /// Method and path template.
        endpoint: &'static str,
    },
    /// The client configuration is unusable (bad URL scheme, unusable API key characters).
    #[error("invalid client configuration: {message}")]
    Config {
        /// What is wrong (never the key value).
        message: String,
    },
}

impl ApiError {
    /// True when the service answered but its body could not be used: malformed, mistyped, or
    /// over the size cap. For a write, the service may well have committed it.
    pub fn is_unreadable_answer(&self) -> bool {
        matches!(self, ApiError::Decode { .. } | ApiError::TooLarge { .. })
    }

    /// True for errors worth retrying an idempotent call on: 429, 5xx, timeouts and transport
    /// errors.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::RateLimited { .. }
                | Self::Server { .. }
                | Self::Timeout { .. }
                | Self::Transport { .. }
                | Self::NotWritable { .. }
        )
    }

    /// True when the object does not exist ([`ApiError::NotFound`]).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }

    /// A fixed, low-cardinality label for metrics and events.
    pub fn category(&self) -> &'static str {
        match self {
            Self::NotFound { .. } => "not_found",
            Self::Unauthorized { .. } => "unauthorized",
            Self::BadRequest { .. } => "bad_request",
            Self::Rejected { .. } => "rejected",
            Self::RateLimited { .. } => "rate_limited",
            Self::Server { .. } => "server",
            Self::Timeout { .. } => "timeout",
            Self::Transport { .. } => "transport",
            Self::Decode { .. } => "decode",
            Self::TooLarge { .. } => "too_large",
            Self::InvalidRequest { .. } => "invalid_request",
            Self::NotWritable { .. } => "not_writable",
            Self::Config { .. } => "config",
        }
    }

    /// The HTTP status of the answer, when there was one.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::NotFound { status, .. }
            | Self::Rejected { status, .. }
            | Self::Server { status, .. } => Some(*status),
            Self::Unauthorized { .. } => Some(401),
            Self::BadRequest { .. } => Some(400),
            Self::RateLimited { .. } => Some(429),
            _ => None,
        }
    }

    /// The method and path template of the failed call, when there was one.
    pub fn endpoint(&self) -> Option<&'static str> {
        match self {
            Self::NotFound { endpoint, .. }
            | Self::Unauthorized { endpoint, .. }
            | Self::BadRequest { endpoint, .. }
            | Self::Rejected { endpoint, .. }
            | Self::RateLimited { endpoint, .. }
            | Self::Server { endpoint, .. }
            | Self::Timeout { endpoint, .. }
            | Self::Transport { endpoint, .. }
            | Self::Decode { endpoint, .. }
            | Self::TooLarge { endpoint, .. }
            | Self::InvalidRequest { endpoint, .. }
            | Self::NotWritable { endpoint } => Some(endpoint),
            Self::Config { .. } => None,
        }
    }

    /// The same error with every text that came from the service made safe to print and log
    /// ([`scrub`]): a server that echoes the request cannot make the client show its own
    /// credential, nor forge terminal output with control characters.
    pub(crate) fn scrubbed(self, credential: &str) -> Self {
        let s = |t: String| scrub(&t, credential);
        match self {
            Self::NotFound {
                endpoint,
                status,
                error,
                message,
            } => Self::NotFound {
                endpoint,
                status,
                error: s(error),
                message: s(message),
            },
            Self::Unauthorized { endpoint, message } => Self::Unauthorized {
                endpoint,
                message: s(message),
            },
            Self::BadRequest {
                endpoint,
                error,
                message,
            } => Self::BadRequest {
                endpoint,
                error: s(error),
                message: s(message),
            },
            Self::Rejected {
                endpoint,
                status,
                error,
                message,
            } => Self::Rejected {
                endpoint,
                status,
                error: s(error),
                message: s(message),
            },
            Self::Server {
                endpoint,
                status,
                body,
            } => Self::Server {
                endpoint,
                status,
                body: s(body),
            },
            other => other,
        }
    }

    /// Maps a non-2xx answer to an error.
    ///
    /// `body` is the (possibly truncated) error body; `retry_after` the parsed `Retry-After`.
    pub(crate) fn from_status(
        endpoint: &'static str,
        status: u16,
        retry_after: Option<Duration>,
        body: &[u8],
    ) -> Self {
        let ErrorBody { error, message } = ErrorBody::parse(body);
        match status {
            404 => Self::NotFound {
                endpoint,
                status,
                error,
                message,
            },
            400 | 500..=599 if says_not_found(&error) => Self::NotFound {
                endpoint,
                status,
                error,
                message,
            },
            400 => Self::BadRequest {
                endpoint,
                error,
                message,
            },
            401 => Self::Unauthorized { endpoint, message },
            429 => Self::RateLimited {
                endpoint,
                retry_after,
            },
            500..=599 => Self::Server {
                endpoint,
                status,
                body: match (error.is_empty(), message.is_empty()) {
                    (true, _) => message,
                    (false, true) => error,
                    (false, false) => format!("{error}: {message}"),
                },
            },
            _ => Self::Rejected {
                endpoint,
                status,
                error,
                message,
            },
        }
    }
}

/// Longest text from the service kept in an error, in characters.
pub const MAX_SERVICE_TEXT_CHARS: usize = 300;

/// `text` (from the service) made safe to print and log: every occurrence of `credential` (the
/// client's own key) replaced by `[REDACTED]`, then [`printable`] (control characters such as
/// newlines, escapes and carriage returns escaped, cut to [`MAX_SERVICE_TEXT_CHARS`] characters
/// with `…`).
pub fn scrub(text: &str, credential: &str) -> String {
    let redacted = if credential.is_empty() {
        text.to_string()
    } else {
        text.replace(credential, "[REDACTED]")
    };
    let mut out = printable(&redacted, MAX_SERVICE_TEXT_CHARS);
    // A text cut short (here or upstream) may end in the start of the credential.
    let end = out.strip_suffix('…').map_or(out.len(), str::len);
    if let Some(cut) = (8..credential.len().min(end + 1))
        .rev()
        .find(|n| credential.is_char_boundary(*n) && out[..end].ends_with(&credential[..*n]))
    {
        let tail = out[end..].to_string();
        out.truncate(end - cut);
        out.push_str("[REDACTED]");
        out.push_str(&tail);
    }
    out
}

/// True when an `error` code says "not found" (`NOT_FOUND`, `not found`, `NotFound`, ...).
fn says_not_found(error: &str) -> bool {
    let folded: String = error
        .chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect();
    folded.contains("notfound")
}

/// The `error` and `message` of an error body, or a truncated text body as the message.
#[derive(Debug, Default, PartialEq, Eq)]
struct ErrorBody {
    error: String,
    message: String,
}

impl ErrorBody {
    fn parse(body: &[u8]) -> Self {
        if let Ok(serde_json::Value::Object(fields)) = serde_json::from_slice(body) {
            let text = |name: &str| match fields.get(name) {
                Some(serde_json::Value::String(s)) => truncate(s),
                Some(serde_json::Value::Null) | None => String::new(),
                Some(other) => truncate(&other.to_string()),
            };
            return Self {
                error: text("error"),
                message: text("message"),
            };
        }
        Self {
            error: String::new(),
            message: truncate(String::from_utf8_lossy(body).trim()),
        }
    }
}

/// Keeps at most [`MAX_BODY_EXCERPT`] characters, marking a cut with an ellipsis.
fn truncate(text: &str) -> String {
    match text.char_indices().nth(MAX_BODY_EXCERPT) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// `, retry after 2s` for a `Retry-After` the service sent (whole seconds, as the header gives
/// them; milliseconds when shorter), nothing without one.
fn retry_after_text(retry_after: Option<Duration>) -> String {
    match retry_after {
        Some(d) if d.subsec_millis() == 0 => format!(", retry after {}s", d.as_secs()),
        Some(d) => format!(", retry after {}ms", d.as_millis()),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 429 says how long the service asked to wait in seconds (or milliseconds), and
    /// nothing when it did not say.
    #[test]
    fn rate_limited_reads_as_text() {
        let limited = |retry_after| ApiError::RateLimited {
            endpoint: "GET /api-key",
            retry_after,
        };
        let shown = |d| limited(d).to_string();
        assert_eq!(
            shown(Some(Duration::from_secs(2))),
            "GET /api-key: rate limited (status 429, retry after 2s)"
        );
        assert!(shown(Some(Duration::from_millis(1500))).ends_with("retry after 1500ms)"));
        assert_eq!(shown(None), "GET /api-key: rate limited (status 429)");
    }

    const EP: &str = "GET /api-key/{id}";

    /// Every documented status (and the simulator's not-found convention) maps to one variant.
    #[test]
    fn status_mapping_table() {
        let json = |error: &str, message: &str| {
            serde_json::json!({"error": error, "message": message, "data": {}}).to_string()
        };
        let cases: Vec<(u16, String, &str)> = vec![
            (404, String::new(), "not_found"),
            (404, json("whatever", "gone"), "not_found"),
            (400, json("NOT_FOUND", "no such key"), "not_found"),
            (400, json("api key not found", ""), "not_found"),
            (400, json("DomainNotFound", ""), "not_found"),
            (400, json("VALIDATION", "name required"), "bad_request"),
            (400, "plain text".into(), "bad_request"),
            (401, json("UNAUTHORIZED", "bad key"), "unauthorized"),
            (403, json("FORBIDDEN", "no"), "rejected"),
            (409, String::new(), "rejected"),
            (429, String::new(), "rate_limited"),
            (500, json("INTERNAL", "boom"), "server"),
            (500, json("NOT_FOUND", "no such transmission"), "not_found"),
            (502, "<html>bad gateway</html>".into(), "server"),
            (503, String::new(), "server"),
        ];
        for (status, body, category) in cases {
            let err = ApiError::from_status(EP, status, None, body.as_bytes());
            assert_eq!(err.category(), category, "status {status} body {body}");
            assert_eq!(err.status(), Some(status), "status {status}");
            assert_eq!(err.endpoint(), Some(EP));
        }
    }

    /// `error` and `message` are taken from a JSON error body.
    #[test]
    fn bad_request_keeps_error_and_message() {
        let body = br#"{"error":"VALIDATION","message":"name is required","data":{}}"#;
        match ApiError::from_status(EP, 400, None, body) {
            ApiError::BadRequest { error, message, .. } => {
                assert_eq!(error, "VALIDATION");
                assert_eq!(message, "name is required");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    /// A huge non-JSON error body is kept as a bounded excerpt.
    #[test]
    fn non_json_body_is_truncated() {
        let body = "x".repeat(10_000);
        match ApiError::from_status(EP, 400, None, body.as_bytes()) {
            ApiError::BadRequest { error, message, .. } => {
                assert!(error.is_empty());
                assert_eq!(message.chars().count(), MAX_BODY_EXCERPT + 1);
                assert!(message.ends_with('…'));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    /// A cut inside a multi-byte character does not panic.
    #[test]
    fn truncation_respects_char_boundaries() {
        let text = "é".repeat(MAX_BODY_EXCERPT * 2);
        assert_eq!(truncate(&text).chars().count(), MAX_BODY_EXCERPT + 1);
        let invalid_utf8 = [0xff_u8, 0xfe, 0xfd];
        let err = ApiError::from_status(EP, 500, None, &invalid_utf8);
        assert_eq!(err.category(), "server");
    }

    /// 429 keeps the parsed Retry-After.
    #[test]
    fn rate_limited_keeps_retry_after() {
        let err = ApiError::from_status(EP, 429, Some(Duration::from_secs(3)), b"");
        match err {
            ApiError::RateLimited { retry_after, .. } => {
                assert_eq!(retry_after, Some(Duration::from_secs(3)));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Only transient failures are retryable.
    #[test]
    fn retryable_classification() {
        let retryable = [
            ApiError::from_status(EP, 429, None, b""),
            ApiError::from_status(EP, 500, None, b""),
            ApiError::Timeout {
                endpoint: EP,
                after: Duration::from_secs(1),
            },
            ApiError::Transport {
                endpoint: EP,
                message: "reset".into(),
            },
        ];
        for err in retryable {
            assert!(err.is_retryable(), "{err:?}");
        }
        let permanent = [
            ApiError::from_status(EP, 400, None, b""),
            ApiError::from_status(EP, 401, None, b""),
            ApiError::from_status(EP, 404, None, b""),
            ApiError::Decode {
                endpoint: EP,
                message: "x".into(),
            },
            ApiError::TooLarge {
                endpoint: EP,
                limit: 1,
            },
        ];
        for err in permanent {
            assert!(!err.is_retryable(), "{err:?}");
        }
    }

    /// The not-found test ignores case and separators.
    #[test]
    fn not_found_codes() {
        for code in ["NOT_FOUND", "not found", "NotFound", "ApiKey-Not-Found"] {
            assert!(says_not_found(code), "{code}");
        }
        for code in ["", "FOUND", "NOT_ALLOWED", "BAD_REQUEST"] {
            assert!(!says_not_found(code), "{code}");
        }
    }
}

#[cfg(test)]
mod scrub_tests {
    use super::{MAX_SERVICE_TEXT_CHARS, scrub};

    /// The credential, its start at a cut, control and bidi characters never survive.
    #[test]
    fn scrubs_what_could_leak_or_forge() {
        let key = "sk-live-0123456789abcdef";
        assert_eq!(scrub(&format!("echo {key}!"), key), "echo [REDACTED]!");
        assert_eq!(scrub("a\u{1b}[2K\rb\nc", key), "a\\u001b[2K\\rb\\nc");
        assert_eq!(scrub("x\u{202E}y", key), "x\\u202ey");
        // A text cut upstream in the middle of the key (the error body is cut at 512 bytes).
        let cut = format!("{}{}", "x".repeat(20), &key[..12]);
        assert_eq!(scrub(&cut, key), format!("{}[REDACTED]", "x".repeat(20)));
        let long = "y".repeat(MAX_SERVICE_TEXT_CHARS + 5);
        assert!(scrub(&long, key).ends_with('…'));
        // The cap itself lands in the middle of a key cut upstream.
        let cut = format!("{}{}", "y".repeat(MAX_SERVICE_TEXT_CHARS - 10), &key[..20]);
        assert_eq!(
            scrub(&cut, key),
            format!("{}[REDACTED]…", "y".repeat(MAX_SERVICE_TEXT_CHARS - 10))
        );
    }
}
