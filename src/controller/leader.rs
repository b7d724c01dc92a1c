//! Leader election on a coordination.k8s.io Lease with a renew deadline, so that of several
//! replicas one at a time writes, to the service or to Kubernetes.
//!
//! The rules are client-go's `leaderelection` package (and kubert's `lease`, which does the same
//! for older kube versions; neither kube-runtime nor kube-lease-manager gives a renew deadline):
//!
//! - A replica takes the Lease when it has no holder, or when its record has not changed for a
//!   whole lease duration by the replica's own monotonic clock (client-go's "observed time": no
//!   comparison of clocks between machines). Writes to the Lease carry its `resourceVersion`, so
//!   of two replicas taking it at once one gets 409 Conflict and stays standby.
//! - The leader renews by writing over the version it last wrote, without reading the Lease
//!   first (client-go's optimistic renewal); when that write fails (409 Conflict: another client
//!   wrote the Lease), the same try reads the Lease and goes on as below.
//! - A write answered 409 Conflict after a read says only that the Lease changed since it was
//!   read (another replica, or any client updating it): the try failed, and the next one, a
//!   retry period later, reads the Lease again (client-go's `tryAcquireOrRenew` returns false
//!   and its `renew` loop polls until the renew deadline). Only a Lease read with another holder
//!   ends the lead.
//! - The holder renews every retry period (2/15 of the lease duration: 2 s of 15 s). A renewal
//!   sent at instant `t` that succeeds lets this replica write until `t + renew deadline` (2/3 of
//!   the lease duration: 10 s of 15 s), by its monotonic clock. Past that deadline every write is
//!   refused unsent ([`LeaderGate`], asked by the service client and by the Kubernetes client
//!   before each write, and cutting each write's time to the deadline) and the replica gives the
//!   lead up. A standby takes over at the earliest a lease duration after it saw the last
//!   renewal, which was sent before it arrived: the old leader's writes end at least
//!   `lease duration - renew deadline` (5 s of 15 s) before the new leader's begin, however the
//!   old leader is cut off (only a request delayed in the network longer than that could still
//!   arrive late).
//! - On shutdown the holder releases the Lease (holder cleared, as client-go's
//!   `ReleaseOnCancel`): a standby takes over at its next try, not a lease duration later.

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, Patch, PatchParams, PostParams};

use crate::api::WriteGate;
use crate::controller::common::Locked;

/// Whether, and until when, this replica may write: the deadline the last successful renewal
/// gave (closed before the Lease is held and after it is lost). Cheap to clone; clones share it.
#[derive(Clone, Debug, Default)]
pub struct LeaderGate(Arc<Mutex<Option<Instant>>>);

impl LeaderGate {
    /// A gate closed until an [`Elector`] opens it.
    pub fn closed() -> Self {
        Self::default()
    }

    /// True while writes may be sent.
    pub fn is_open(&self) -> bool {
        self.time_left().is_some()
    }

    fn set(&self, until: Option<Instant>) {
        *self.0.locked() = until;
    }
}

impl WriteGate for LeaderGate {
    fn writable_until(&self) -> Option<Instant> {
        *self.0.locked()
    }
}

/// A Kubernetes client for `config` whose writes (any method but GET, HEAD and OPTIONS; watches
/// are GETs) are sent only while `gate` is open and cut at its deadline; a refused or cut write
/// fails with `kube::Error::Service`. The controllers write through it; the [`Elector`] uses an
/// ungated client for the Lease itself.
///
/// Errors: the client cannot be built from `config` (TLS, proxy, authentication settings).
pub fn gated_client(config: kube::Config, gate: LeaderGate) -> Result<kube::Client, kube::Error> {
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&GateLayer(gate))
        .build())
}

/// The [`tower::Layer`] of [`gated_client`].
#[derive(Clone, Debug)]
struct GateLayer(LeaderGate);

impl<S> tower::Layer<S> for GateLayer {
    type Service = Gated<S>;
    fn layer(&self, inner: S) -> Gated<S> {
        Gated {
            inner,
            gate: self.0.clone(),
        }
    }
}

/// A service whose writes pass the gate.
#[derive(Clone, Debug)]
struct Gated<S> {
    inner: S,
    gate: LeaderGate,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<S, B> tower::Service<http::Request<B>> for Gated<S>
where
    S: tower::Service<http::Request<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<S::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let reads = matches!(
            *request.method(),
            http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
        );
        if reads {
            let response = self.inner.call(request);
            return Box::pin(async move { response.await.map_err(Into::into) });
        }
        let Some(left) = self.gate.time_left() else {
            let refused: BoxError = format!(
                "{} {} not sent: this replica does not hold the leader lease within its renew deadline",
                request.method(),
                request.uri().path()
            )
            .into();
            return Box::pin(async move { Err(refused) });
        };
        let response = self.inner.call(request);
        Box::pin(async move {
            match tokio::time::timeout(left, response).await {
                Ok(result) => result.map_err(Into::into),
                Err(_) => Err("write cut at the leader lease's renew deadline".into()),
            }
        })
    }
}

/// Where and how long the Lease is held.
#[derive(Clone, Debug)]
pub struct LeaseSettings {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This replica's `holderIdentity`.
    pub identity: String,
    /// `leaseDurationSeconds`: a standby takes over this long after it last saw the Lease
    /// renewed (whole seconds, at least 1).
    pub lease_duration: Duration,
    /// How long after sending its last successful renewal the leader may write.
    pub renew_deadline: Duration,
    /// Time between two tries to take or renew the Lease.
    pub retry_period: Duration,
}

impl LeaseSettings {
    /// Settings with client-go's proportions for `lease_duration` (rounded up to whole
    /// seconds, at least 1): renew deadline 2/3 of it, retry period 2/15 (15 s → 10 s and 2 s).
    pub fn new(namespace: &str, name: &str, identity: &str, lease_duration: Duration) -> Self {
        let seconds = lease_duration.as_secs_f64().ceil().max(1.0);
        let lease_duration = Duration::from_secs_f64(seconds);
        LeaseSettings {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration,
            renew_deadline: lease_duration.mul_f64(2.0 / 3.0),
            retry_period: lease_duration.mul_f64(2.0 / 15.0),
        }
    }

    fn lease_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }
}

/// Takes, renews and releases the Lease for this replica, and opens its [`LeaderGate`] until
/// each renewal's deadline.
pub struct Elector {
    api: Api<Lease>,
    settings: LeaseSettings,
    gate: LeaderGate,
    /// The Lease's spec as last seen, and when (monotonic) it was first seen so.
    observed: Option<(LeaseSpec, Instant)>,
    /// The Lease as this replica last wrote it (`resourceVersion` and spec) while it holds it:
    /// the next renewal writes over that version without reading first (client-go's
    /// optimistic renewal); cleared when a renewal fails or the lead ends.
    written: Option<(String, LeaseSpec)>,
}

/// How a try to take or renew the Lease ended.
enum Try {
    /// This replica holds it; the write was sent at this instant.
    Held(Instant),
    /// Another replica holds it.
    Other,
    /// The write was answered 409 Conflict: the Lease changed since it was read (or, for a
    /// create, someone created it first). Who holds it is known at the next try.
    Conflict,
}

impl Elector {
    /// An elector writing the Lease through `client` (not a [`gated_client`]: the Lease is how
    /// the gate opens) and opening `gate`.
    pub fn new(client: kube::Client, settings: LeaseSettings, gate: LeaderGate) -> Self {
        let api = Api::namespaced(client, &settings.namespace);
        Elector {
            api,
            settings,
            gate,
            observed: None,
            written: None,
        }
    }

    /// The settings.
    pub fn settings(&self) -> &LeaseSettings {
        &self.settings
    }

    /// Tries every retry period until this replica holds the Lease (then true, the gate open)
    /// or `stop` resolves (then false, at once). Failed tries (an unreachable API) are retried;
    /// each is bounded by half the renew deadline.
    pub async fn acquire(&mut self, stop: impl std::future::Future<Output = ()>) -> bool {
        let attempt_limit = self.settings.renew_deadline / 2;
        let wait_and_try = async {
            loop {
                match tokio::time::timeout(attempt_limit, self.try_acquire_or_renew()).await {
                    Ok(Ok(Try::Held(sent))) => {
                        self.gate.set(Some(sent + self.settings.renew_deadline));
                        return;
                    }
                    Ok(Ok(Try::Other | Try::Conflict)) => {}
                    Ok(Err(e)) => tracing::debug!(error = %e, "cannot take the leader Lease"),
                    Err(_) => tracing::debug!("taking the leader Lease timed out"),
                }
                tokio::time::sleep(self.settings.retry_period).await;
            }
        };
        tokio::select! {
            () = wait_and_try => true,
            () = stop => false,
        }
    }

    /// Renews the Lease every retry period while this replica holds it; returns when the lead
    /// is lost: the Lease read with another holder, or no renewal succeeded before the renew
    /// deadline (the gate is then closed: no write goes out any more). A failed try, a renewal
    /// answered 409 Conflict included, is tried again at the next retry period. Each try is
    /// bounded by the time left until the deadline.
    pub async fn keep(&mut self) -> Lost {
        loop {
            tokio::time::sleep(self.settings.retry_period).await;
            let Some(left) = self.gate.time_left() else {
                return self.lost(Lost::DeadlinePassed);
            };
            match tokio::time::timeout(left, self.try_acquire_or_renew()).await {
                Ok(Ok(Try::Held(sent))) => {
                    self.gate.set(Some(sent + self.settings.renew_deadline));
                }
                Ok(Ok(Try::Other)) => return self.lost(Lost::TakenOver),
                Ok(Ok(Try::Conflict)) => tracing::info!(
                    "the leader Lease changed since it was read (409 Conflict); renewing it again"
                ),
                Ok(Err(e)) => tracing::warn!(error = %e, "cannot renew the leader Lease"),
                Err(_) => return self.lost(Lost::DeadlinePassed),
            }
        }
    }

    fn lost(&mut self, why: Lost) -> Lost {
        self.gate.set(None);
        self.written = None;
        why
    }

    /// Gives the Lease up if this replica holds it: the gate closes first (no write after), then
    /// the holder is cleared (client-go's `ReleaseOnCancel`), bounded by `limit`. A failure is
    /// logged: the Lease then runs out on its own.
    pub async fn release(&mut self, limit: Duration) {
        self.gate.set(None);
        self.written = None;
        let release = async {
            let Some(lease) = self.api.get_opt(&self.settings.name).await? else {
                return Ok::<_, kube::Error>(false);
            };
            let spec = lease.spec.unwrap_or_default();
            if spec.holder_identity.as_deref() != Some(self.settings.identity.as_str()) {
                return Ok(false);
            }
            let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
            let released = LeaseSpec {
                holder_identity: None,
                lease_duration_seconds: Some(1),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                ..spec
            };
            self.write(lease.metadata.resource_version, &released)
                .await?;
            Ok(true)
        };
        match tokio::time::timeout(limit, release).await {
            Ok(Ok(true)) => {
                tracing::info!(lease = %self.settings.name, "released the leader Lease")
            }
            Ok(Ok(false)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot release the leader Lease"),
            Err(_) => tracing::warn!(
                "releasing the leader Lease timed out; another replica takes over when it runs out"
            ),
        }
    }

    /// One try of client-go's `tryAcquireOrRenew`. While this replica leads (the gate open), it
    /// first writes `renewTime` now over the Lease as it last wrote it, without reading it (the
    /// fast path: one request per renewal); the write carries that `resourceVersion`, so any
    /// other write since (another replica's) makes it fail with 409. Otherwise, or when that
    /// write fails, read the Lease (create it when missing); when this replica holds it, or
    /// nobody does, or its record has not changed for a lease duration, write this replica in
    /// with `renewTime` now.
    async fn try_acquire_or_renew(&mut self) -> Result<Try, kube::Error> {
        let sent = Instant::now();
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        // Kept (not taken) while the write is in flight: a try cancelled meanwhile leaves it,
        // and the next one's write over it fails with 409 if this one landed.
        if let Some((version, mut spec)) = self.written.clone()
            && self.gate.time_left().is_some()
        {
            spec.renew_time = Some(now.clone());
            match self.write(Some(version), &spec).await {
                Ok(written) => {
                    self.remember(&written);
                    return Ok(Try::Held(sent));
                }
                Err(e) => {
                    self.written = None;
                    tracing::debug!(
                        error = %e,
                        "renewing the leader Lease without reading it failed; reading it"
                    );
                }
            }
        }
        let me = self.settings.identity.clone();
        let Some(mut lease) = self.api.get_opt(&self.settings.name).await? else {
            let mut lease = Lease::default();
            lease.metadata.name = Some(self.settings.name.clone());
            lease.spec = Some(LeaseSpec {
                holder_identity: Some(me),
                lease_duration_seconds: Some(self.settings.lease_seconds()),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            });
            let created = self.api.create(&PostParams::default(), &lease).await;
            return self.held(created, sent);
        };
        let spec = lease.spec.clone().unwrap_or_default();
        self.observe(spec.clone());
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let mine = holder.as_deref() == Some(me.as_str());
        if let Some(holder) = &holder
            && !mine
        {
            let observed_at = self.observed.as_ref().map_or(sent, |(_, at)| *at);
            let lease_for = spec
                .lease_duration_seconds
                .map_or(self.settings.lease_duration, |s| {
                    Duration::from_secs(u64::try_from(s).unwrap_or(0))
                });
            if observed_at.elapsed() < lease_for {
                tracing::debug!(%holder, "the leader Lease is held by another replica");
                return Ok(Try::Other);
            }
        }
        let mut next = spec.clone();
        if !mine {
            next.acquire_time = Some(now.clone());
            next.lease_transitions =
                Some(spec.lease_transitions.unwrap_or(0) + i32::from(holder.is_some()));
        }
        next.holder_identity = Some(me);
        next.lease_duration_seconds = Some(self.settings.lease_seconds());
        next.renew_time = Some(now);
        let written = self.write(lease.metadata.resource_version.take(), &next);
        let written = written.await;
        self.held(written, sent)
    }

    /// The try's result from the answer to its write of the Lease, sent at `sent`: held (the
    /// Lease remembered), a conflict (409: another client wrote it first), or the error.
    fn held(
        &mut self,
        written: Result<Lease, kube::Error>,
        sent: Instant,
    ) -> Result<Try, kube::Error> {
        match written {
            Ok(lease) => {
                self.remember(&lease);
                Ok(Try::Held(sent))
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(Try::Conflict),
            Err(e) => Err(e),
        }
    }

    /// Records `lease`, just written by this replica as its holder: seen now, and the version
    /// the next renewal writes over.
    fn remember(&mut self, lease: &Lease) {
        let spec = lease.spec.clone().unwrap_or_default();
        self.written = (lease.metadata.resource_version.clone()).map(|v| (v, spec.clone()));
        self.observe(spec);
    }

    /// Writes `spec` over the Lease's with a JSON merge patch that carries `resource_version`:
    /// the API server refuses it with 409 Conflict when the Lease changed since it was read
    /// (optimistic concurrency, as client-go's update). A merge patch needs only the `patch`
    /// verb on the one Lease, which the chart's Role grants.
    async fn write(
        &self,
        resource_version: Option<String>,
        spec: &LeaseSpec,
    ) -> Result<Lease, kube::Error> {
        let patch = serde_json::json!({
            "metadata": { "resourceVersion": resource_version },
            "spec": {
                "holderIdentity": spec.holder_identity,
                "leaseDurationSeconds": spec.lease_duration_seconds,
                "acquireTime": spec.acquire_time,
                "renewTime": spec.renew_time,
                "leaseTransitions": spec.lease_transitions,
            },
        });
        self.api
            .patch(
                &self.settings.name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
    }

    /// Records `spec` as seen now, unless it is the record already seen.
    fn observe(&mut self, spec: LeaseSpec) {
        if self.observed.as_ref().is_none_or(|(seen, _)| *seen != spec) {
            self.observed = Some((spec, Instant::now()));
        }
    }
}

/// Why the lead was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Lost {
    /// Another replica holds the Lease.
    #[error("another replica took the leader Lease")]
    TakenOver,
    /// No renewal succeeded before the renew deadline (the Kubernetes API unreachable or too
    /// slow).
    #[error("the leader Lease could not be renewed before its renew deadline")]
    DeadlinePassed,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// client-go's proportions: 15 s → renew deadline 10 s, retry 2 s; durations round up to
    /// whole seconds.
    #[test]
    fn settings_follow_client_go() {
        let s = LeaseSettings::new("ns", "lease", "me", Duration::from_secs(15));
        assert_eq!(s.renew_deadline, Duration::from_secs(10));
        assert_eq!(s.retry_period, Duration::from_secs(2));
        let s = LeaseSettings::new("ns", "lease", "me", Duration::from_millis(1500));
        assert_eq!(s.lease_duration, Duration::from_secs(2));
        assert_eq!(s.lease_seconds(), 2);
    }

    /// The gate is open only until its deadline.
    #[test]
    fn the_gate_closes_at_its_deadline() {
        let gate = LeaderGate::closed();
        assert!(!gate.is_open());
        gate.set(Some(Instant::now() + Duration::from_secs(60)));
        assert!(gate.is_open());
        assert!(
            gate.time_left()
                .is_some_and(|left| left <= Duration::from_secs(60))
        );
        gate.set(Some(Instant::now()));
        assert!(!gate.is_open());
        assert_eq!(gate.time_left(), None);
    }
}
