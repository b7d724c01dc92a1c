//! Steps every reconciler shares: pause, first status, API error handling, timing and metrics.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::Stream;
use futures::task::AtomicWaker;

use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::context::Context;
use super::error::{Error, Result};
use super::status::Outcome;
use crate::api::ApiError;

/// A mutex's guard, also when a thread panicked while holding it (the state it guards stays
/// usable: each holder leaves it consistent between statements).
pub trait Locked<T> {
    /// The guard, poisoned or not.
    fn locked(&self) -> std::sync::MutexGuard<'_, T>;
}

impl<T> Locked<T> for Mutex<T> {
    fn locked(&self) -> std::sync::MutexGuard<'_, T> {
        self.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A function answering, at each call, a future that resolves once `stop` has resolved (at
/// once when it has already): one shutdown signal for any number of listeners.
pub fn stop_signal(
    stop: impl Future<Output = ()> + Send + 'static,
) -> impl Fn() -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + Sync>> + Clone + Send + Sync + 'static
{
    let (tx, rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        stop.await;
        let _ = tx.send(true);
    });
    move || {
        let mut rx = rx.clone();
        Box::pin(async move {
            let _ = rx.wait_for(|v| *v).await;
        })
    }
}

/// `stream` until `stop` resolves: the stream, with the reflector writer it owns, is then
/// dropped at once, polled or not, and ends. kube-runtime holds a controller's runner until its
/// store holds a first list (`Store::wait_until_ready`), which gives up only once the writer is
/// dropped; a controller's graceful shutdown stops polling its input without dropping it, so a
/// stop before the first list arrived would leave the controller waiting for ever.
pub fn until_stopped<S>(
    stream: S,
    stop: impl Future<Output = ()> + Send + 'static,
) -> impl Stream<Item = S::Item> + Send + 'static
where
    S: Stream + Send + 'static,
{
    let slot = Arc::new((Mutex::new(Some(Box::pin(stream))), AtomicWaker::new()));
    let dropper = Arc::downgrade(&slot);
    tokio::spawn(async move {
        stop.await;
        if let Some(slot) = dropper.upgrade() {
            let stream = slot.0.locked().take();
            drop(stream);
            // Whoever polls the stream now learns that it ended (the dropped stream can no
            // longer wake it).
            slot.1.wake();
        }
    });
    futures::stream::poll_fn(move |cx| {
        slot.1.register(cx.waker());
        match slot.0.locked().as_mut() {
            Some(stream) => stream.as_mut().poll_next(cx),
            None => std::task::Poll::Ready(None),
        }
    })
}

/// True when the spec changed since the last reconcile (or it never ran): the controller then
/// reads details the list items lack, once.
pub fn spec_changed<K: ResourceExt>(obj: &K, observed_generation: Option<i64>) -> bool {
    obj.meta().generation.is_none() || obj.meta().generation != observed_generation
}

/// The end of the message of a 401, before the caller knows whose key it was (see
/// [`super::managed::Failure::unauthorized_as`]).
pub const UNAUTHORIZED_ADVICE: &str = "; check the key of the account the resource names";

/// How a failed API call shows in conditions, and what the controller does next.
///
/// Retryable failures (timeouts, 5xx, 429) keep `Reconciling=True` and return the error so the
/// controller backs off per object; 400 and 401 set `Stalled=True` with the API's message and
/// wait for a change of the object. Two failures are the service's, not the spec's, and keep
/// `Reconciling=True` until the next resync: an object deleted at the service between the list
/// and the call (`ExternalObjectGone`; the next resync lists again and recreates or reports
/// it), and a success answer that could not be read (`InvalidApiResponse`: malformed,
/// mistyped or over the size cap).
pub fn api_failure(e: &ApiError, doing: &str) -> Outcome {
    let message = format!("{doing} failed: {e}");
    if e.is_retryable() {
        Outcome::progressing(
            "ApiUnavailable",
            format!("{message}; retrying with backoff"),
        )
    } else if e.is_not_found() {
        Outcome::progressing(
            "ExternalObjectGone",
            format!(
                "{message}; the object was deleted at the service, looking for it again at the next resync"
            ),
        )
    } else if e.is_unreadable_answer() {
        Outcome::progressing(
            "InvalidApiResponse",
            format!(
                "{message}; the service's answer was not understood, retrying at the next resync"
            ),
        )
    } else if e.status() == Some(401) {
        Outcome::stalled("Unauthorized", format!("{message}{UNAUTHORIZED_ADVICE}"))
    } else {
        Outcome::stalled("ApiRejected", format!("{message}; fix the spec"))
    }
}

/// Runs one reconcile `body` of `kind`, measuring it and recording the outcome in metrics.
pub async fn measured<F>(kind: &'static str, ctx: &Arc<Context>, body: F) -> Result<Action>
where
    F: std::future::Future<Output = Result<Action>>,
{
    let started = Instant::now();
    let result = body.await;
    let label = match &result {
        Ok(_) => "success",
        Err(e) => e.category(),
    };
    ctx.metrics.reconciled(kind, label, started.elapsed());
    result
}

/// The error policy of every controller: a conflict (the cached copy was stale, see
/// [`super::revision`]) is tried again shortly, without a warning; retryable errors back off per
/// object (exponential, capped, jittered); errors that only a change of the resource can fix (a
/// 400 from the service, a malformed object) wait for that change; the others (a 401, an object
/// gone at the service, an unreadable answer) are checked again at the next resync.
pub fn error_policy<K: ResourceExt>(obj: Arc<K>, error: &Error, ctx: Arc<Context>) -> Action {
    let key = super::context::object_key(obj.as_ref());
    let uid = super::context::object_uid(obj.as_ref());
    if error.is_conflict() {
        tracing::debug!(object = %key, "the cached copy is stale; reconciling again from a newer one");
        return Action::requeue(ctx.conflict_backoff(&uid));
    }
    tracing::warn!(object = %key, category = error.category(), error = %error, "reconcile failed");
    if error.is_retryable() {
        Action::requeue(ctx.failure_backoff(&uid))
    } else if error.needs_change() {
        Action::await_change()
    } else {
        Action::requeue(ctx.resync_delay())
    }
}
