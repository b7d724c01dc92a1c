//! The control endpoints under `/_simulator` (not part of the service's interface). All need
//! `Authorization: Bearer <admin key>`.
//!
//! - `GET /_simulator/faults`: the current [`FaultConfig`] as JSON.
//! - `PUT /_simulator/faults`: replace it (body: `FaultConfig` JSON; restarts the seeded
//!   generator); answers the new configuration.
//! - `POST /_simulator/fail-next`: body `{"count": n, "status": s}`; the next n interface
//!   requests get status s.
//! - `GET /_simulator/requests`: the request log as a JSON array.
//! - `DELETE /_simulator/requests`: empty the log (204).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use super::auth::check_admin;
use super::body::read_json;
use super::errors::{ApiError, ApiResult};
use super::faults::FaultConfig;
use super::server::Shared;

pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/_simulator/faults", get(get_faults).put(put_faults))
        .route("/_simulator/fail-next", post(post_fail_next))
        .route(
            "/_simulator/requests",
            get(get_requests).delete(delete_requests),
        )
}

async fn get_faults(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
) -> ApiResult<Json<FaultConfig>> {
    check_admin(&shared, &headers)?;
    Ok(Json(shared.faults.get()))
}

async fn put_faults(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<FaultConfig>> {
    check_admin(&shared, &headers)?;
    let config: FaultConfig = read_json(&headers, body).await?;
    config.validate().map_err(ApiError::bad_request)?;
    shared.faults.set(config);
    Ok(Json(shared.faults.get()))
}

/// Body of `POST /_simulator/fail-next`.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct FailNext {
    count: u32,
    #[serde(default = "default_fail_status")]
    status: u16,
}

fn default_fail_status() -> u16 {
    500
}

async fn post_fail_next(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<FailNext>> {
    check_admin(&shared, &headers)?;
    let request: FailNext = read_json(&headers, body).await?;
    if !(100..=999).contains(&request.status) {
        return Err(ApiError::bad_request("status must be an HTTP status code"));
    }
    shared.faults.fail_next(request.count, request.status);
    Ok(Json(request))
}

async fn get_requests(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    check_admin(&shared, &headers)?;
    Ok(Json(shared.log.records()).into_response())
}

async fn delete_requests(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
) -> ApiResult<StatusCode> {
    check_admin(&shared, &headers)?;
    shared.log.clear();
    Ok(StatusCode::NO_CONTENT)
}
