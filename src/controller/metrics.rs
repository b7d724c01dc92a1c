//! Prometheus metrics of the operator (prometheus-client, OpenMetrics text on `/metrics`):
//!
//! - `mailtarget_reconciles_total{kind, result}`: reconciles by kind and result
//!   (`success`, an error category, or `conflict`: the cached copy was older than the object,
//!   nothing was written and the reconcile runs again shortly, not a failure);
//! - `mailtarget_reconcile_duration_seconds{kind}`: reconcile duration histogram;
//! - `mailtarget_api_requests_total{endpoint, code, account}`: requests to the service by endpoint
//!   template (`POST /api-key`), HTTP status code (`none` when no answer came; `401` refused
//!   credentials, `429` rate limited) and account (`ClusterAccount/<name>` or
//!   `Account/<namespace>/<name>`; the `default` account built from the operator's flags counts
//!   as `ClusterAccount/default`). Series are bounded by endpoints × codes × accounts: an
//!   account's series are removed when the operator sees it deleted (one deleted while the
//!   operator's watch was down stays until the process restarts);
//! - `mailtarget_objects{kind, ready}`: objects by Ready state (`true`, `false`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::api::RequestObserver;
use crate::controller::common::Locked;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileLabels {
    kind: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    endpoint: &'static str,
    code: String,
    account: String,
}

/// The `account` label of the `default` account (a ClusterAccount `default`, or the operator's
/// flags while there is none).
pub const DEFAULT_ACCOUNT_LABEL: &str = "ClusterAccount/default";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReadyLabels {
    kind: &'static str,
    ready: &'static str,
}

/// The operator's metrics and their registry.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ReconcileLabels, Counter>,
    duration: Family<KindLabels, Histogram>,
    requests: Family<RequestLabels, Counter>,
    objects: Family<ReadyLabels, Gauge>,
    ready_state: Mutex<HashMap<(&'static str, String), bool>>,
    /// The request series of each account, to remove them with the account.
    account_series: Mutex<HashMap<String, HashSet<RequestLabels>>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("mailtarget");
        let reconciles = Family::<ReconcileLabels, Counter>::default();
        let duration = Family::<KindLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.005, 2.0, 14))
        });
        let requests = Family::<RequestLabels, Counter>::default();
        let objects = Family::<ReadyLabels, Gauge>::default();
        registry.register(
            "reconciles",
            "Reconciles by kind and result",
            reconciles.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Reconcile duration in seconds",
            duration.clone(),
        );
        registry.register(
            "api_requests",
            "Requests to the Mailtarget API by endpoint, status code and account",
            requests.clone(),
        );
        registry.register("objects", "Managed objects by Ready state", objects.clone());
        Metrics {
            registry,
            reconciles,
            duration,
            requests,
            objects,
            ready_state: Mutex::default(),
            account_series: Mutex::default(),
        }
    }
}

impl Metrics {
    /// Records one reconcile of `kind` that took `elapsed` and ended with `result`
    /// (`success` or an error category).
    pub fn reconciled(&self, kind: &'static str, result: &'static str, elapsed: Duration) {
        self.reconciles
            .get_or_create(&ReconcileLabels { kind, result })
            .inc();
        self.duration
            .get_or_create(&KindLabels { kind })
            .observe(elapsed.as_secs_f64());
    }

    /// Records the Ready state of one object (`key` is namespace/name); `None` forgets it
    /// (the object was deleted).
    pub fn set_ready(&self, kind: &'static str, key: String, ready: Option<bool>) {
        let Ok(mut state) = self.ready_state.lock() else {
            return;
        };
        let old = match ready {
            Some(r) => state.insert((kind, key), r),
            None => state.remove(&(kind, key)),
        };
        let label = |r: bool| ReadyLabels {
            kind,
            ready: if r { "true" } else { "false" },
        };
        if let Some(o) = old {
            self.objects.get_or_create(&label(o)).dec();
        }
        if let Some(r) = ready {
            self.objects.get_or_create(&label(r)).inc();
        }
    }

    /// Counts one request of `account` to `endpoint` that ended with `status`.
    fn requested(&self, account: &str, endpoint: &'static str, status: Option<u16>) {
        let labels = RequestLabels {
            endpoint,
            code: status.map_or_else(|| "none".to_string(), |s| s.to_string()),
            account: account.to_owned(),
        };
        // A series seen before is only counted; the first request of one records it for
        // `forget_account` too.
        if let Some(counter) = self.requests.get(&labels) {
            counter.inc();
            return;
        }
        self.requests.get_or_create(&labels).inc();
        let mut series = self.account_series.locked();
        series
            .entry(labels.account.clone())
            .or_default()
            .insert(labels);
    }

    /// Stops reporting the requests of `account` (its object was deleted). A request of it
    /// still in flight reports it again.
    pub fn forget_account(&self, account: &str) {
        let mut series = self.account_series.locked();
        for labels in series.remove(account).unwrap_or_default() {
            self.requests.remove(&labels);
        }
    }

    /// The registry in OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// Counts API requests into [`Metrics`] under an account's name; install with
/// [`crate::api::ClientConfig::with_observer`]. The clients built for each account take the
/// observer [`RequestObserver::for_account`] returns, reporting under that account.
#[derive(Clone, Debug)]
pub struct ApiRequestMetrics {
    metrics: Arc<Metrics>,
    account: Arc<str>,
}

impl ApiRequestMetrics {
    /// Counts into `metrics` under [`DEFAULT_ACCOUNT_LABEL`] (the client of the operator's
    /// flags is the `default` account).
    pub fn new(metrics: Arc<Metrics>) -> Self {
        ApiRequestMetrics {
            metrics,
            account: DEFAULT_ACCOUNT_LABEL.into(),
        }
    }
}

impl RequestObserver for ApiRequestMetrics {
    fn on_response(&self, endpoint: &'static str, status: Option<u16>, _elapsed: Duration) {
        self.metrics.requested(&self.account, endpoint, status);
    }

    fn for_account(&self, account: &str) -> Option<Arc<dyn RequestObserver>> {
        Some(Arc::new(ApiRequestMetrics {
            metrics: self.metrics.clone(),
            account: account.into(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requests(metrics: &Metrics) -> Vec<String> {
        metrics
            .encode()
            .lines()
            .filter(|l| l.starts_with("mailtarget_api_requests_total{"))
            .map(str::to_owned)
            .collect()
    }

    /// The flags' observer counts under `ClusterAccount/default`, an account's under its name;
    /// forgetting an account removes its series only.
    #[test]
    fn requests_are_counted_per_account() {
        let metrics = Arc::new(Metrics::default());
        let flags = ApiRequestMetrics::new(metrics.clone());
        let team = flags.for_account("Account/team-a/billing").unwrap();
        flags.on_response("GET /api-key", Some(200), Duration::ZERO);
        team.on_response("GET /api-key", Some(401), Duration::ZERO);
        team.on_response("POST /api-key", Some(429), Duration::ZERO);
        team.on_response("POST /api-key", None, Duration::ZERO);
        let lines = requests(&metrics);
        for want in [
            r#"endpoint="GET /api-key",code="200",account="ClusterAccount/default"} 1"#,
            r#"endpoint="GET /api-key",code="401",account="Account/team-a/billing"} 1"#,
            r#"endpoint="POST /api-key",code="429",account="Account/team-a/billing"} 1"#,
            r#"endpoint="POST /api-key",code="none",account="Account/team-a/billing"} 1"#,
        ] {
            assert!(
                lines.iter().any(|l| l.ends_with(want)),
                "{want} in {lines:?}"
            );
        }
        metrics.forget_account("Account/team-a/billing");
        let lines = requests(&metrics);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("ClusterAccount/default"));
    }
}
