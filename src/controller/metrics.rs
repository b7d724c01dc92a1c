//! Prometheus metrics of the operator (prometheus-client, OpenMetrics text on `/metrics`):
//!
//! - `mailtarget_reconciles_total{kind, result}`: reconciles by kind and result
//!   (`success`, an error category, or `conflict`: the cached copy was older than the object,
//!   nothing was written and the reconcile runs again shortly, not a failure);
//! - `mailtarget_reconcile_duration_seconds{kind}`: reconcile duration histogram;
//! - `mailtarget_api_requests_total{endpoint, code}`: requests to the service by endpoint template
//!   (`POST /api-key`) and HTTP status code (`none` when no answer came);
//! - `mailtarget_objects{kind, ready}`: objects by Ready state (`true`, `false`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::api::RequestObserver;

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
}

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
            "Requests to the Mailtarget API by endpoint and status code",
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

    /// The registry in OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// Counts API requests into [`Metrics`]; install with [`crate::api::ClientConfig::with_observer`].
#[derive(Clone, Debug)]
pub struct ApiRequestMetrics(pub Arc<Metrics>);

impl RequestObserver for ApiRequestMetrics {
    fn on_response(&self, endpoint: &'static str, status: Option<u16>, _elapsed: Duration) {
        let code = status.map_or_else(|| "none".to_string(), |s| s.to_string());
        self.0
            .requests
            .get_or_create(&RequestLabels { endpoint, code })
            .inc();
    }
}
