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
    /// The finalizer helper failed (adding or removing `mailtarget.co/finalizer`).
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
    /// The object lacks a namespace or name (never the case for objects from the API server).
    #[error("object has no {0}")]
    MissingMetadata(&'static str),
}

/// Result alias of the controller.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A fixed label for metrics and event reasons (never built from data).
    pub fn category(&self) -> &'static str {
        match self {
            Error::Api(e) => e.category(),
            Error::Kube(_) => "kubernetes",
            Error::Finalizer(_) => "finalizer",
            Error::MissingMetadata(_) => "metadata",
        }
    }

    /// True when retrying the same request may succeed (timeouts, 5xx, 429, Kubernetes
    /// conflicts). A service 400/401 is not: it needs a change of spec or credentials.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Api(e) => e.is_retryable(),
            Error::Kube(_) | Error::Finalizer(_) => true,
            Error::MissingMetadata(_) => false,
        }
    }
}
