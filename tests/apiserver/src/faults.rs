//! Fault injection and the request log, reached through [`Faults`] and
//! [`crate::TestApiServer::request_log`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

/// Which requests an injected failure applies to. Empty fields match everything.
#[derive(Clone, Debug, Default)]
pub struct RequestFilter {
    /// HTTP method (`"GET"`, `"PATCH"`...), compared case-insensitively.
    pub method: Option<String>,
    /// Substring of the path and query (e.g. `"/widgets/w1/status"`).
    pub path_contains: Option<String>,
    /// A request header (name, value) it must carry, e.g. one a test client sets with
    /// `kube::Config::headers` to tell its requests apart. Names compare case-insensitively,
    /// values exactly.
    pub header: Option<(String, String)>,
}

impl RequestFilter {
    /// Matches every request.
    pub fn any() -> RequestFilter {
        RequestFilter::default()
    }

    /// Matches requests with this method.
    pub fn method(method: &str) -> RequestFilter {
        RequestFilter {
            method: Some(method.to_string()),
            ..RequestFilter::default()
        }
    }

    /// Matches requests whose path and query contain `s`.
    pub fn path(s: &str) -> RequestFilter {
        RequestFilter {
            path_contains: Some(s.to_string()),
            ..RequestFilter::default()
        }
    }

    /// Matches requests carrying header `name` with `value`.
    pub fn header(name: &str, value: &str) -> RequestFilter {
        RequestFilter {
            header: Some((name.to_string(), value.to_string())),
            ..RequestFilter::default()
        }
    }

    /// Also requires this method.
    pub fn with_method(mut self, method: &str) -> RequestFilter {
        self.method = Some(method.to_string());
        self
    }

    /// Whether a request matches.
    pub fn matches(&self, method: &str, path_and_query: &str, headers: &http::HeaderMap) -> bool {
        self.method
            .as_ref()
            .is_none_or(|m| m.eq_ignore_ascii_case(method))
            && self
                .path_contains
                .as_ref()
                .is_none_or(|p| path_and_query.contains(p.as_str()))
            && self.header.as_ref().is_none_or(|(name, value)| {
                headers
                    .get_all(name.as_str())
                    .iter()
                    .any(|v| v.as_bytes() == value.as_bytes())
            })
    }
}

/// One request as the server saw and answered it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedRequest {
    /// HTTP method.
    pub method: String,
    /// Path with query string, e.g. `/api/v1/namespaces/default/configmaps?limit=500`.
    pub path_and_query: String,
    /// HTTP status answered (for watches: the status the stream started with).
    pub status: u16,
    /// The request's `Content-Type`, if any.
    pub content_type: Option<String>,
    /// The request's `Accept`, if any.
    pub accept: Option<String>,
}

#[derive(Debug)]
struct Injection {
    remaining: u32,
    status: u16,
    filter: RequestFilter,
}

#[derive(Debug, Default)]
pub(crate) struct FaultState {
    injections: Mutex<Vec<Injection>>,
    stalls: Mutex<Vec<RequestFilter>>,
    latency: Mutex<Duration>,
    log: Mutex<Vec<LoggedRequest>>,
}

impl FaultState {
    /// Takes one injected failure for this request, if one matches.
    pub(crate) fn take_failure(
        &self,
        method: &str,
        path_and_query: &str,
        headers: &http::HeaderMap,
    ) -> Option<u16> {
        let mut inj = self.injections.lock().ok()?;
        let idx = inj
            .iter()
            .position(|i| i.remaining > 0 && i.filter.matches(method, path_and_query, headers))?;
        let status = inj[idx].status;
        inj[idx].remaining -= 1;
        if inj[idx].remaining == 0 {
            inj.remove(idx);
        }
        Some(status)
    }

    /// Whether this request is stalled (see [`Faults::stall`]).
    pub(crate) fn stalls(
        &self,
        method: &str,
        path_and_query: &str,
        headers: &http::HeaderMap,
    ) -> bool {
        self.stalls
            .lock()
            .map(|s| s.iter().any(|f| f.matches(method, path_and_query, headers)))
            .unwrap_or(false)
    }

    pub(crate) fn latency(&self) -> Duration {
        self.latency.lock().map(|l| *l).unwrap_or_default()
    }

    pub(crate) fn log(&self, entry: LoggedRequest) {
        if let Ok(mut l) = self.log.lock() {
            l.push(entry);
        }
    }

    pub(crate) fn entries(&self) -> Vec<LoggedRequest> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

/// Handle to inject faults into a running [`crate::TestApiServer`]. Cheap to clone.
#[derive(Clone)]
pub struct Faults {
    pub(crate) state: Arc<FaultState>,
    pub(crate) drop_tx: Arc<watch::Sender<u64>>,
}

impl Faults {
    /// Ends every open watch stream now (the client sees the stream close, as after an
    /// apiserver restart or a load-balancer timeout). Watches opened later are unaffected.
    pub fn drop_watches(&self) {
        self.drop_tx.send_modify(|g| *g += 1);
    }

    /// Answers the next `n` requests matching `filter` with a `metav1.Status` failure of HTTP
    /// `status_code` (500 → reason `InternalError`, 409 → `Conflict`, others by their usual reason),
    /// without touching any object. Injections are consumed in the order they were added.
    pub fn fail_next(&self, n: u32, status_code: u16, filter: RequestFilter) {
        if n == 0 {
            return;
        }
        if let Ok(mut inj) = self.state.injections.lock() {
            inj.push(Injection {
                remaining: n,
                status: status_code,
                filter,
            });
        }
    }

    /// Stalls every request matching `filter` from now on, as a network partition that drops
    /// packets does: the request is never handled nor answered (the client waits until its own
    /// timeout or until it gives up) and does not appear in the request log. Requests already
    /// handled, and watch streams already open, are not affected: end those with
    /// [`Self::drop_watches`]. [`Self::clear_stalls`] lets later requests through; stalled ones
    /// stay unanswered.
    pub fn stall(&self, filter: RequestFilter) {
        if let Ok(mut s) = self.state.stalls.lock() {
            s.push(filter);
        }
    }

    /// Ends every stall set by [`Self::stall`] (for requests arriving from now on).
    pub fn clear_stalls(&self) {
        if let Ok(mut s) = self.state.stalls.lock() {
            s.clear();
        }
    }

    /// Delays every request by `latency` before it is handled (`Duration::ZERO` turns it off).
    pub fn set_latency(&self, latency: Duration) {
        if let Ok(mut l) = self.state.latency.lock() {
            *l = latency;
        }
    }

    /// Forgets the requests logged so far.
    pub fn clear_request_log(&self) {
        if let Ok(mut l) = self.state.log.lock() {
            l.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn injections_are_consumed() {
        let s = FaultState::default();
        let (tx, _) = watch::channel(0);
        let f = Faults {
            state: Arc::new(s),
            drop_tx: Arc::new(tx),
        };
        let none = http::HeaderMap::new();
        f.fail_next(2, 500, RequestFilter::path("/widgets").with_method("patch"));
        assert_eq!(
            f.state.take_failure("GET", "/apis/x/v1/widgets", &none),
            None
        );
        assert_eq!(
            f.state.take_failure("PATCH", "/apis/x/v1/widgets/a", &none),
            Some(500)
        );
        assert_eq!(
            f.state.take_failure("PATCH", "/apis/x/v1/widgets/a", &none),
            Some(500)
        );
        assert_eq!(
            f.state.take_failure("PATCH", "/apis/x/v1/widgets/a", &none),
            None
        );
    }

    /// A stall applies to the requests its filter matches (here by header) until cleared.
    #[test]
    fn stalls_match_by_header() {
        let (tx, _) = watch::channel(0);
        let f = Faults {
            state: Arc::new(FaultState::default()),
            drop_tx: Arc::new(tx),
        };
        let mut a = http::HeaderMap::new();
        a.insert("x-client", http::HeaderValue::from_static("a"));
        let mut b = http::HeaderMap::new();
        b.insert("x-client", http::HeaderValue::from_static("b"));
        f.stall(RequestFilter::header("X-Client", "a"));
        assert!(f.state.stalls("GET", "/api/v1/namespaces", &a));
        assert!(!f.state.stalls("GET", "/api/v1/namespaces", &b));
        f.clear_stalls();
        assert!(!f.state.stalls("GET", "/api/v1/namespaces", &a));
    }
}
