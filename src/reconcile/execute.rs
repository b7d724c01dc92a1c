//! Running a create without ever leaving a duplicate behind.
//!
//! The client never retries a POST (a lost answer may mean the object exists). When a create
//! fails without a definite answer (timeout, dropped connection, 5xx, 429), the object is looked
//! up by its natural key before anything else is tried: found, it is adopted; not found, the
//! error is returned and the next reconcile creates it.

use std::future::Future;

use crate::api::ApiError;

/// True when a failed write may nevertheless have been committed by the service.
pub fn may_have_committed(error: &ApiError) -> bool {
    error.is_retryable()
}

/// Runs `create`; when it fails in a way that may have committed, runs `recover` (a lookup by
/// natural key) and returns what it found.
///
/// Errors: the create's error when nothing was recovered, or the lookup's error.
pub async fn create_or_recover<T, C, R, RF>(create: C, recover: R) -> Result<T, ApiError>
where
    C: Future<Output = Result<T, ApiError>>,
    R: FnOnce() -> RF,
    RF: Future<Output = Result<Option<T>, ApiError>>,
{
    match create.await {
        Ok(v) => Ok(v),
        Err(e) if may_have_committed(&e) => {
            tracing::warn!(error = %e, "create failed without a definite answer; looking the object up by its natural key");
            match recover().await? {
                Some(v) => Ok(v),
                None => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}
