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
            path_contains: None,
        }
    }

    /// Matches requests whose path and query contain `s`.
    pub fn path(s: &str) -> RequestFilter {
        RequestFilter {
            method: None,
            path_contains: Some(s.to_string()),
        }
    }

    /// Also requires this method.
    pub fn with_method(mut self, method: &str) -> RequestFilter {
        self.method = Some(method.to_string());
        self
    }

    /// Whether a request matches.
    pub fn matches(&self, method: &str, path_and_query: &str) -> bool {
        self.method
            .as_ref()
            .is_none_or(|m| m.eq_ignore_ascii_case(method))
            && self
                .path_contains
                .as_ref()
                .is_none_or(|p| path_and_query.contains(p.as_str()))
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
    latency: Mutex<Duration>,
    log: Mutex<Vec<LoggedRequest>>,
}

impl FaultState {
    /// Takes one injected failure for this request, if one matches.
    pub(crate) fn take_failure(&self, method: &str, path_and_query: &str) -> Option<u16> {
        let mut inj = self.injections.lock().ok()?;
        let idx = inj
            .iter()
            .position(|i| i.remaining > 0 && i.filter.matches(method, path_and_query))?;
        let status = inj[idx].status;
        inj[idx].remaining -= 1;
        if inj[idx].remaining == 0 {
            inj.remove(idx);
        }
        Some(status)
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
        f.fail_next(2, 500, RequestFilter::path("/widgets").with_method("patch"));
        assert_eq!(f.state.take_failure("GET", "/apis/x/v1/widgets"), None);
        assert_eq!(
            f.state.take_failure("PATCH", "/apis/x/v1/widgets/a"),
            Some(500)
        );
        assert_eq!(
            f.state.take_failure("PATCH", "/apis/x/v1/widgets/a"),
            Some(500)
        );
        assert_eq!(f.state.take_failure("PATCH", "/apis/x/v1/widgets/a"), None);
    }
}
