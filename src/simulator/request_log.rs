//! The request log and the in-flight counter.
//!
//! Every request to an interface path is recorded in arrival order (requests to the
//! `/_simulator/*` control endpoints are not). Records hold no bodies and no header but the
//! `User-Agent` (which tells several clients apart), and the id of the API key a request came
//! with (never the key), so no secret ends up in the log.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::Serialize;

/// One served request.
///
/// JSON form (`GET /_simulator/requests`): `{"method", "path", "query", "status", "unixMs",
/// "durationMs", "userAgent", "keyId"}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    /// HTTP method, upper case (`GET`, `POST`, ...).
    pub method: String,
    /// Request path without the query string, e.g. `/api-key/3`.
    pub path: String,
    /// The raw query string without `?`, if any.
    pub query: Option<String>,
    /// Status code of the response (for a reset connection: the status the handler produced).
    pub status: u16,
    /// Arrival time, Unix milliseconds.
    pub unix_ms: i64,
    /// Time from arrival to the response being produced, including simulated latency.
    pub duration: Duration,
    /// The request's `User-Agent` header, if any (as text; `None` when absent or not text).
    pub user_agent: Option<String>,
    /// The id of the API key the request's `Authorization` header carried, when it names an
    /// existing key; `None` for the company key of the configuration, or no known key. Tells
    /// which credential a client called with (a sub account's, or the company's).
    pub key_id: Option<i64>,
}

impl RequestRecord {
    /// True for `POST`, `PUT` and `DELETE` on the interface's paths (never for
    /// `/_simulator/*`): the requests that can change the service's state.
    pub fn is_write(&self) -> bool {
        matches!(self.method.as_str(), "POST" | "PUT" | "DELETE")
            && !self.path.starts_with("/_simulator")
    }

    /// The endpoint called, as the interface document names it: method and path with every
    /// all-digit segment written `{id}`, e.g. `GET /api-key/{id}` for `GET /api-key/17`.
    pub fn endpoint(&self) -> String {
        let path: Vec<&str> = self
            .path
            .split('/')
            .map(|s| {
                if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
                    "{id}"
                } else {
                    s
                }
            })
            .collect();
        format!("{} {}", self.method, path.join("/"))
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RequestRecordJson<'a> {
    method: &'a str,
    path: &'a str,
    query: Option<&'a str>,
    status: u16,
    unix_ms: i64,
    duration_ms: u64,
    user_agent: Option<&'a str>,
    key_id: Option<i64>,
}

impl Serialize for RequestRecord {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        RequestRecordJson {
            method: &self.method,
            path: &self.path,
            query: self.query.as_deref(),
            status: self.status,
            unix_ms: self.unix_ms,
            duration_ms: u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX),
            user_agent: self.user_agent.as_deref(),
            key_id: self.key_id,
        }
        .serialize(serializer)
    }
}

/// Shared log plus concurrency counters.
#[derive(Default)]
pub(crate) struct RequestLog {
    records: Mutex<Vec<RequestRecord>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

/// Decrements the in-flight counter when the request ends, however it ends.
pub(crate) struct InFlightGuard<'a> {
    log: &'a RequestLog,
}

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        self.log.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl RequestLog {
    /// Marks a request as started; keep the guard until it ends.
    pub fn enter(&self) -> InFlightGuard<'_> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlightGuard { log: self }
    }

    pub fn push(&self, record: RequestRecord) {
        self.records_lock().push(record);
    }

    pub fn records(&self) -> Vec<RequestRecord> {
        self.records_lock().clone()
    }

    pub fn clear(&self) {
        self.records_lock().clear();
    }

    pub fn max_concurrent(&self) -> usize {
        self.max_in_flight.load(Ordering::SeqCst)
    }

    fn records_lock(&self) -> std::sync::MutexGuard<'_, Vec<RequestRecord>> {
        self.records
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(method: &str, path: &str) -> RequestRecord {
        RequestRecord {
            method: method.into(),
            path: path.into(),
            query: None,
            status: 200,
            unix_ms: 0,
            duration: Duration::from_millis(3),
            user_agent: None,
            key_id: None,
        }
    }

    /// Writes are POST/PUT/DELETE on interface paths only.
    #[test]
    fn is_write_table() {
        for (method, path, expected) in [
            ("GET", "/api-key", false),
            ("POST", "/api-key", true),
            ("PUT", "/domain/sending/1/verify-txt", true),
            ("DELETE", "/api-key/1", true),
            ("PUT", "/_simulator/faults", false),
            ("DELETE", "/_simulator/requests", false),
        ] {
            assert_eq!(record(method, path).is_write(), expected, "{method} {path}");
        }
    }

    /// Ids become `{id}`; other segments, including names with digits, stay.
    #[test]
    fn endpoint_names_the_template() {
        for (method, path, expected) in [
            ("GET", "/api-key", "GET /api-key"),
            ("GET", "/api-key/17", "GET /api-key/{id}"),
            (
                "PUT",
                "/domain/sending/3/verify-txt",
                "PUT /domain/sending/{id}/verify-txt",
            ),
            ("GET", "/sub-account/team1", "GET /sub-account/team1"),
        ] {
            assert_eq!(record(method, path).endpoint(), expected);
        }
    }

    /// The maximum in-flight count survives requests ending.
    #[test]
    fn max_in_flight_is_remembered() {
        let log = RequestLog::default();
        {
            let _a = log.enter();
            let _b = log.enter();
        }
        let _c = log.enter();
        assert_eq!(log.max_concurrent(), 2);
    }

    /// The JSON form uses camelCase and whole milliseconds.
    #[test]
    fn json_form() {
        let json = serde_json::to_value(record("GET", "/x")).unwrap();
        assert_eq!(json["durationMs"], 3);
        assert_eq!(json["unixMs"], 0);
        assert!(json["query"].is_null());
    }
}
