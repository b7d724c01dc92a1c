//! Running a create without ever leaving a duplicate behind.
//!
//! The client never retries a POST (a lost answer may mean the object exists). When a create
//! fails without a definite answer (timeout, dropped connection, 5xx, 429), the object is looked
//! up by its natural key before anything else is tried: found, it is adopted; not found, the
//! error is returned and the next reconcile creates it.

use std::future::Future;

use crate::api::ApiError;

/// True when a failed write may nevertheless have been committed by the service: no definite
/// answer (timeout, dropped connection, 5xx, 429), or a success answer whose body could not be
/// read (malformed, mistyped, over the size cap): the object was created all the same.
pub fn may_have_committed(error: &ApiError) -> bool {
    error.is_retryable() || error.is_unreadable_answer()
}

/// Runs `create`; when it fails in a way that may have committed, runs `recover` (a lookup by
/// natural key) and returns what it found.
///
/// Errors: the create's error when nothing was recovered, also when the lookup failed (its error
/// is logged): whatever the lookup's answer, the create may have happened, and the caller must
/// look again before creating (see [`may_have_committed`]).
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
            match recover().await {
                Ok(Some(v)) => Ok(v),
                Ok(None) => Err(e),
                Err(lookup) => {
                    tracing::warn!(error = %lookup, "the lookup after a create without a definite answer failed; the create may have happened");
                    Err(e)
                }
            }
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only answers that prove nothing was created rule out a lookup before the next create.
    #[test]
    fn what_may_have_committed() {
        let decode = ApiError::Decode {
            endpoint: "POST /api-key",
            message: "missing field `id`".into(),
        };
        let too_large = ApiError::TooLarge {
            endpoint: "POST /api-key",
            limit: 10,
        };
        for e in [
            ApiError::from_status("POST /api-key", 500, None, b""),
            ApiError::from_status("POST /api-key", 429, None, b""),
            decode,
            too_large,
        ] {
            assert!(may_have_committed(&e), "{e}");
        }
        for e in [
            ApiError::from_status("POST /api-key", 400, None, b""),
            ApiError::from_status("POST /api-key", 401, None, b""),
        ] {
            assert!(!may_have_committed(&e), "{e}");
        }
    }

    /// A create without a definite answer whose lookup then fails with a definite error (a 401
    /// after a key rotation, say) may still have happened: the error returned says so, so that
    /// the caller keeps its pending-create marker and looks again, instead of taking the
    /// lookup's error for the create's refusal (which would leave the object unowned).
    #[tokio::test]
    async fn a_failed_lookup_leaves_the_create_undecided() {
        let lost = ApiError::from_status("POST /api-key", 500, None, b"");
        let refused = ApiError::from_status("GET /api-key", 401, None, b"");
        let create = async { Err::<(), _>(lost) };
        let e = create_or_recover(create, || async { Err(refused) })
            .await
            .unwrap_err();
        assert!(may_have_committed(&e), "{e}");
    }
}
