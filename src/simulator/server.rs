//! The HTTP server: shared state, the router and the layer that applies latency, faults and
//! the request log to every interface request.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header::RETRY_AFTER};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use tokio::time::Instant;

use super::body::{
    MAX_CONTROL_BODY_BYTES, MAX_MANAGEMENT_BODY_BYTES, MAX_TRANSMISSION_BODY_BYTES, limited,
};
use super::config::SimulatorConfig;
use super::errors::{self, ApiError};
use super::faults::{DropMode, FaultAction, FaultHandle};
use super::request_log::{RequestLog, RequestRecord};
use super::state::{Store, now_ms};
use super::{admin, analytics, api_keys, sending_domains, sub_accounts, transmission};

/// Everything the handlers share.
pub(crate) struct Shared {
    store: Mutex<Store>,
    /// The company key.
    pub api_key: String,
    /// The key protecting `/_simulator/*`.
    pub admin_key: String,
    /// Base latency added to every interface request.
    pub latency: Duration,
    pub faults: FaultHandle,
    pub log: RequestLog,
}

impl Shared {
    pub fn new(config: &SimulatorConfig) -> Self {
        Self {
            store: Mutex::new(Store::new(&config.suppress, config.verify_after_calls)),
            api_key: config.api_key.clone(),
            admin_key: config.effective_admin_key().to_string(),
            latency: config.latency,
            faults: FaultHandle::new(config.faults.clone()),
            log: RequestLog::default(),
        }
    }

    /// The store; never held across an `.await`.
    pub fn store(&self) -> MutexGuard<'_, Store> {
        // A poisoned lock only means a handler panicked mid-update; keep serving.
        self.store
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The complete router: the interface's endpoints, the control endpoints (each family with its
/// request body limit) and fallbacks that answer in the interface's error shape.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    let management = Router::new()
        .merge(api_keys::routes())
        .merge(sub_accounts::routes())
        .merge(sending_domains::routes())
        .merge(analytics::routes());
    Router::new()
        .merge(limited(management, MAX_MANAGEMENT_BODY_BYTES))
        .merge(limited(transmission::routes(), MAX_TRANSMISSION_BODY_BYTES))
        .merge(limited(admin::routes(), MAX_CONTROL_BODY_BYTES))
        .fallback(errors::route_not_found)
        .method_not_allowed_fallback(errors::method_not_allowed)
        .layer(middleware::from_fn_with_state(
            shared.clone(),
            interface_layer,
        ))
        .with_state(shared)
}

/// Applies base latency, faults and the request log to interface requests; control requests
/// pass untouched.
async fn interface_layer(
    State(shared): State<Arc<Shared>>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_string();
    if path.starts_with("/_simulator") {
        return next.run(request).await;
    }
    let _in_flight = shared.log.enter();
    let started = Instant::now();
    let unix_ms = now_ms();
    let method = request.method().as_str().to_string();
    let query = request.uri().query().map(str::to_string);
    let user_agent = request
        .headers()
        .get(axum::http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);

    // Which key the request came with (its id, never the key), for the record. The configured
    // company key is no API key: no scan of the key list for it.
    let key_id = super::auth::bearer_token(request.headers())
        .ok()
        .filter(|token| *token != shared.api_key)
        .and_then(|token| {
            let store = shared.store();
            let key = store.state.api_keys.iter().find(|k| k.key == token);
            key.map(|k| k.id)
        });
    let decision = shared.faults.decide();
    let delay = shared.latency + decision.latency;
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let (response, status) = match decision.action {
        FaultAction::Fail(status) => {
            let response = injected_failure(status);
            let status = response.status();
            (response, status)
        }
        FaultAction::RateLimited(seconds) => {
            let response = rate_limited(seconds);
            let status = response.status();
            (response, status)
        }
        FaultAction::Pass(drop) => {
            let response = next.run(request).await;
            let handled = response.status();
            match drop {
                None => (response, handled),
                Some(DropMode::ServerError) => {
                    let response = injected_failure(500);
                    let status = response.status();
                    (response, status)
                }
                Some(DropMode::Reset) => (reset_connection(handled), handled),
            }
        }
    };
    shared.log.push(RequestRecord {
        method,
        path,
        query,
        status: status.as_u16(),
        unix_ms,
        duration: started.elapsed(),
        user_agent,
        key_id,
    });
    response
}

fn injected_failure(status: u16) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if status == StatusCode::TOO_MANY_REQUESTS {
        return rate_limited(1);
    }
    let code = if status.is_server_error() {
        errors::INTERNAL_ERROR
    } else {
        errors::INJECTED_FAULT
    };
    ApiError::new(status, code, "injected fault").into_response()
}

fn rate_limited(seconds: u64) -> Response {
    let mut response = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        errors::RATE_LIMITED,
        "rate limit exceeded",
    )
    .into_response();
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from(seconds));
    response
}

/// A response whose body fails at once, so the server closes the connection before a
/// complete response reaches the client.
fn reset_connection(status: StatusCode) -> Response {
    let body = Body::from_stream(futures::stream::once(async {
        Err::<axum::body::Bytes, std::io::Error>(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "injected connection reset",
        ))
    }));
    (status, body).into_response()
}
