//! The operator's HTTP endpoints: `/metrics` (Prometheus/OpenMetrics text), `/healthz`
//! (the process is alive) and `/readyz` (200 `ok` when ready as [`super::readiness`] rules,
//! else 503 with the reason as one line of text, e.g. `CustomResourceDefinitions not
//! established: apikeys.mailtarget.co`).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use super::metrics::Metrics;
use super::readiness::Readiness;

/// Shared state of the endpoints.
#[derive(Clone, Debug)]
pub struct Health {
    /// Metrics to serve.
    pub metrics: Arc<Metrics>,
    /// Whether the replica is ready, and why not.
    pub readiness: Arc<Readiness>,
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

async fn readyz(State(h): State<Health>) -> (StatusCode, String) {
    match h.readiness.check() {
        Ok(()) => (StatusCode::OK, "ok".into()),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
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
/// Errors: the address cannot be bound (the message names it).
pub async fn serve(
    addr: SocketAddr,
    health: Health,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot serve on {addr}: {e}")))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An address that cannot be bound (`--metrics-addr` taken) is named in the error.
    #[tokio::test]
    async fn an_address_in_use_is_named() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let health = Health {
            metrics: Default::default(),
            readiness: std::sync::Arc::new(crate::controller::readiness::Readiness::new(
                crate::controller::readiness::Role::Leader,
            )),
        };
        let error = serve(addr, health, async {}).await.unwrap_err();
        assert!(error.to_string().contains(&addr.to_string()), "{error}");
    }
}
