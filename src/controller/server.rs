//! The operator's HTTP endpoints: `/metrics` (Prometheus/OpenMetrics text), `/healthz`
//! (the process is alive) and `/readyz` (the controllers are running, or this replica is a
//! standby waiting for the leader lease).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use super::metrics::Metrics;

/// Shared state of the endpoints.
#[derive(Clone, Debug)]
pub struct Health {
    /// Metrics to serve.
    pub metrics: Arc<Metrics>,
    /// Set once the controllers run (or the replica waits as a standby).
    pub ready: Arc<AtomicBool>,
}

async fn metrics(State(h): State<Health>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        h.metrics.encode(),
    )
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(h): State<Health>) -> (StatusCode, &'static str) {
    if h.ready.load(Ordering::Relaxed) {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "starting")
    }
}

/// The router of the endpoints.
pub fn router(health: Health) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(health)
}

/// Binds `addr` and serves the endpoints until `shutdown` resolves.
///
/// Errors: the address cannot be bound.
pub async fn serve(
    addr: SocketAddr,
    health: Health,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router(health))
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::error!(error = %e, "metrics server failed");
        }
    });
    Ok(bound)
}
