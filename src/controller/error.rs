//! Errors of one reconcile, each with a fixed category used as a metric label and event reason.

use crate::api::ApiError;

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the service failed (after the client's own retries for idempotent calls).
    #[error("{0}")]
    Api(#[from] ApiError),
    /// A call to the Kubernetes API failed.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// kube's finalizer helper refused the object itself (no name, an invalid finalizer path).
    /// Its other failures are unwrapped to their root cause by [`Error::from_finalizer`].
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
    /// The object lacks a namespace or name (never the case for objects from the API server).
    #[error("object has no {0}")]
    MissingMetadata(&'static str),
    /// The resource may not be reconciled through the account it names (no call was made);
    /// see [`super::accounts::usage`].
    #[error("{}", .0.message)]
    Account(super::accounts::Refusal),
    /// The resource's metadata has a problem the schema cannot catch (an annotation's value,
    /// see [`crate::engine::validate`]); no call was made. Annotations do not change the
    /// generation, so it is checked again at their change and at each resync.
    #[error("{0}")]
    InvalidSpec(String),
}

/// Result alias of the controller.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The root cause of a failure of kube's finalizer helper, so that metrics and the error
    /// policy see `unauthorized` or `timeout` rather than the wrapper: the reconcile's own
    /// error for a failed apply or cleanup, the Kubernetes error for a failed finalizer patch.
    pub fn from_finalizer(e: kube::runtime::finalizer::Error<Error>) -> Error {
        use kube::runtime::finalizer::Error as F;
        match e {
            F::ApplyFailed(e) | F::CleanupFailed(e) => e,
            F::AddFinalizer(e) | F::RemoveFinalizer(e) => Error::Kube(e),
            other => Error::Finalizer(Box::new(other)),
        }
    }

    /// True for a Kubernetes 409 Conflict: a write carried the version of a cached copy that is
    /// no longer the stored one (see [`super::revision`]). Not a failure: the reconcile runs
    /// again shortly, from the newer copy.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Kube(e) if super::revision::is_conflict(e))
    }

    /// A fixed label for metrics and event reasons (never built from data): `conflict` for
    /// [`Self::is_conflict`].
    pub fn category(&self) -> &'static str {
        match self {
            Error::Kube(_) if self.is_conflict() => "conflict",
            Error::Api(e) => e.category(),
            Error::Kube(_) => "kubernetes",
            Error::Finalizer(_) => "finalizer",
            Error::MissingMetadata(_) => "metadata",
            Error::Account(_) => "account",
            Error::InvalidSpec(_) => "invalid_spec",
        }
    }

    /// True when only a change of the resource can fix it: a 400 from the service (the spec is
    /// rejected), or an object the finalizer helper cannot handle. A 401, an object gone at the
    /// service and an unreadable answer are not: they may clear at the next resync.
    pub fn needs_change(&self) -> bool {
        match self {
            Error::Api(e) => {
                !e.is_retryable()
                    && !e.is_not_found()
                    && !e.is_unreadable_answer()
                    && e.status() != Some(401)
            }
            // The account, its Secret or the namespace's labels may change.
            Error::Kube(_) | Error::Account(_) | Error::InvalidSpec(_) => false,
            Error::Finalizer(_) | Error::MissingMetadata(_) => true,
        }
    }

    /// True when retrying the same request may succeed (timeouts, 5xx, 429, Kubernetes
    /// conflicts). A service 400/401 is not: it needs a change of spec or credentials.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Api(e) => e.is_retryable(),
            Error::Kube(_) => true,
            // An account not ready yet (not a refusal) is waited for.
            Error::Account(r) => !r.stalled,
            Error::Finalizer(_) | Error::MissingMetadata(_) | Error::InvalidSpec(_) => false,
        }
    }
}
