//! Fault injection and the request log, reached through [`Faults`] and
//! [`crate::TestApiServer::request_log`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, watch};

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

/// What a request that reaches the server meets before it is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cut {
    /// Handled as usual.
    None,
    /// Never handled nor answered (see [`Faults::stall`]).
    Stall,
    /// Its connection closed without an answer (see [`Faults::drop_connections`]).
    Drop,
}

/// The handle a request's handler uses to close its connection without answering: the
/// connection's task closes the socket once [`Self::cut`] is called. Put in each request's
/// extensions by the server.
#[derive(Clone, Debug, Default)]
pub(crate) struct ConnectionCut(Arc<Notify>);

impl ConnectionCut {
    /// Closes the connection (at once if its task waits in [`Self::cut_off`], else when it
    /// next does).
    pub(crate) fn cut(&self) {
        self.0.notify_one();
    }

    /// Resolves once [`Self::cut`] was called.
    pub(crate) async fn cut_off(&self) {
        self.0.notified().await;
    }
}

#[derive(Debug, Default)]
pub(crate) struct FaultState {
    injections: Mutex<Vec<Injection>>,
    stalls: Mutex<Vec<RequestFilter>>,
    drops: Mutex<Vec<RequestFilter>>,
    stalled: AtomicU64,
    dropped: AtomicU64,
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

    /// Whether this request is stalled or its connection dropped (a stall first, when both
    /// match), counted as such.
    pub(crate) fn cut(&self, method: &str, path_and_query: &str, headers: &http::HeaderMap) -> Cut {
        let matches = |filters: &Mutex<Vec<RequestFilter>>| {
            filters
                .lock()
                .map(|s| s.iter().any(|f| f.matches(method, path_and_query, headers)))
                .unwrap_or(false)
        };
        if matches(&self.stalls) {
            self.stalled.fetch_add(1, Ordering::Relaxed);
            Cut::Stall
        } else if matches(&self.drops) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            Cut::Drop
        } else {
            Cut::None
        }
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

    /// Drops every failure [`Self::fail_next`] injected that is not used up yet.
    pub fn clear_failures(&self) {
        if let Ok(mut inj) = self.state.injections.lock() {
            inj.clear();
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

    /// How many requests were stalled so far (each is stalled from its arrival on).
    pub fn stalled_requests(&self) -> u64 {
        self.state.stalled.load(Ordering::Relaxed)
    }

    /// Closes the connection of every request matching `filter` from now on, without handling
    /// or answering it, as when a network path or a load balancer resets it: the client sees
    /// the connection end before an answer (hyper: "connection closed before message
    /// completed") at once, where a stall ([`Self::stall`]) leaves it waiting. The request is
    /// not in the request log; watch streams already open are not affected (end those with
    /// [`Self::drop_watches`]). [`Self::clear_drops`] lets later requests through.
    pub fn drop_connections(&self, filter: RequestFilter) {
        if let Ok(mut d) = self.state.drops.lock() {
            d.push(filter);
        }
    }

    /// Ends every fault set by [`Self::drop_connections`] (for requests arriving from now on).
    pub fn clear_drops(&self) {
        if let Ok(mut d) = self.state.drops.lock() {
            d.clear();
        }
    }

    /// How many requests had their connection dropped so far.
    pub fn dropped_requests(&self) -> u64 {
        self.state.dropped.load(Ordering::Relaxed)
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

    fn faults() -> Faults {
        let (tx, _) = watch::channel(0);
        Faults {
            state: Arc::new(FaultState::default()),
            drop_tx: Arc::new(tx),
        }
    }

    #[test]
    fn injections_are_consumed() {
        let f = faults();
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
        let f = faults();
        let mut a = http::HeaderMap::new();
        a.insert("x-client", http::HeaderValue::from_static("a"));
        let mut b = http::HeaderMap::new();
        b.insert("x-client", http::HeaderValue::from_static("b"));
        f.stall(RequestFilter::header("X-Client", "a"));
        assert_eq!(f.state.cut("GET", "/api/v1/namespaces", &a), Cut::Stall);
        assert_eq!(f.state.cut("GET", "/api/v1/namespaces", &b), Cut::None);
        f.clear_stalls();
        assert_eq!(f.state.cut("GET", "/api/v1/namespaces", &a), Cut::None);
        assert_eq!(f.stalled_requests(), 1);
    }

    /// A connection drop applies to the requests its filter matches until cleared; a stall
    /// matching the same request wins.
    #[test]
    fn drops_match_and_are_counted() {
        let f = faults();
        let none = http::HeaderMap::new();
        f.drop_connections(RequestFilter::path("/leases/").with_method("PUT"));
        assert_eq!(f.state.cut("PUT", "/apis/x/leases/l", &none), Cut::Drop);
        assert_eq!(f.state.cut("GET", "/apis/x/leases/l", &none), Cut::None);
        f.stall(RequestFilter::method("PUT"));
        assert_eq!(f.state.cut("PUT", "/apis/x/leases/l", &none), Cut::Stall);
        f.clear_stalls();
        f.clear_drops();
        assert_eq!(f.state.cut("PUT", "/apis/x/leases/l", &none), Cut::None);
        assert_eq!((f.dropped_requests(), f.stalled_requests()), (1, 1));
    }
}
