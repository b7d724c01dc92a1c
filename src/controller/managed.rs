//! The part of reconciling that is the same for every kind: pause, finalizer, first status,
//! conditions, status write, metrics and requeue. The kind's own work is the engine's, run by
//! [`super::converge`].

use std::fmt::Debug;
use std::sync::Arc;

use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use serde::Serialize;

use super::cache::CachedKind;
use super::claims::{CONFLICTING_OWNER, Claimant, conflict_message};
use super::common::{api_failure, measured};
use super::context::{Context, object_key, object_uid};
use super::converge;
use super::error::{Error, Result};
use super::identity;
use super::namespaces::Watchable;
use super::revision::Revision;
use super::revision::is_conflict;
use super::status::{Outcome, set_conditions, write_status};
use crate::api::ApiError;
use crate::crd::FINALIZER;
use crate::engine::{ManagedKind, ManagedStatus};
use kube::runtime::events::EventType;

/// What one converge step decided: the outcome for the conditions, the status to write, and
/// when to look again (`None`: the default for the outcome).
#[derive(Debug)]
pub struct Converged<S> {
    /// Outcome, turned into `Ready`/`Reconciling`/`Stalled`.
    pub outcome: Outcome,
    /// Status fields to write (conditions and observedGeneration are filled in afterwards).
    pub status: S,
    /// Requeue override.
    pub requeue: Option<Action>,
    /// The outcome is an expected wait (a domain waiting for its DNS records): no Warning
    /// Event.
    pub routine: bool,
}

impl<S> Converged<S> {
    /// A converge step that ends with `outcome` and the default requeue.
    pub fn new(outcome: Outcome, status: S) -> Self {
        Converged {
            outcome,
            status,
            requeue: None,
            routine: false,
        }
    }
}

/// A failed converge step: its outcome and status, and the error to hand to the controller's
/// error policy when the failure is retryable.
#[derive(Debug)]
pub struct Failure<S> {
    outcome: Outcome,
    status: S,
    error: Option<Error>,
    /// A `Stalled` failure that can clear without a change to the resource (the owner of a
    /// contested object may go): checked again at each resync instead of waiting for a change.
    recheck_at_resync: bool,
    /// The service refused a create for certain: nothing was created, so the pending marker
    /// written before it goes.
    create_refused: bool,
    /// The failed call was made with the account's own key (a list read), whatever the
    /// resource's placement: a 401 is the account's.
    by_account_key: bool,
}

impl<S: Clone> Failure<S> {
    fn new(outcome: Outcome, status: S, error: Option<Error>, recheck: bool) -> Box<Self> {
        Box::new(Failure {
            outcome,
            status,
            error,
            recheck_at_resync: recheck,
            create_refused: false,
            by_account_key: false,
        })
    }

    /// A failed API call while `doing` something. The error goes to the controller's error
    /// policy ([`super::common::error_policy`]), which backs off retryable ones, waits for a
    /// change after a 400 and checks a 401 again at the next resync (credentials are fixed
    /// outside the resource; a short outage must not freeze it). The metric counts its category.
    pub fn api(e: ApiError, doing: &str, status: &S) -> Box<Self> {
        let (outcome, recheck_at_resync) = (api_failure(&e, doing), e.status() == Some(401));
        Self::new(
            outcome,
            status.clone(),
            Some(Error::Api(e)),
            recheck_at_resync,
        )
    }

    /// The same failure, with a 401 of the service told as the refusal of the key that was
    /// refused: `reason` (e.g. `CredentialRefused` for a sub account's credential) and
    /// `advice` replace the generic advice of [`super::common::api_failure`]. Other failures are
    /// returned unchanged.
    pub fn unauthorized_as(mut self: Box<Self>, reason: &'static str, advice: &str) -> Box<Self> {
        if let (true, Outcome::Stalled { message, .. }) = (self.is_unauthorized(), &self.outcome) {
            let cause = message
                .strip_suffix(super::common::UNAUTHORIZED_ADVICE)
                .unwrap_or(message);
            self.outcome = Outcome::stalled(reason, format!("{cause}; {advice}"));
        }
        self
    }

    /// The same failure, marked as a call made with the account's own key (see
    /// [`super::converge`]'s attribution of a 401).
    pub fn by_account_key(mut self: Box<Self>) -> Box<Self> {
        self.by_account_key = true;
        self
    }

    /// Whether the failed call was made with the account's own key.
    pub fn is_by_account_key(&self) -> bool {
        self.by_account_key
    }

    /// Whether the failure is the service's 401.
    pub fn is_unauthorized(&self) -> bool {
        matches!(&self.error, Some(Error::Api(e)) if e.status() == Some(401))
    }

    /// The same failure, marked as a create the service refused for certain (see
    /// [`crate::engine::recovery::may_have_committed`]).
    pub fn refused_create(mut self: Box<Self>) -> Box<Self> {
        self.create_refused = true;
        self
    }

    /// A failed Kubernetes call: retried with backoff.
    pub fn kube(reason: &'static str, e: kube::Error, status: &S) -> Box<Self> {
        let outcome = Outcome::progressing(reason, e.to_string());
        Self::new(outcome, status.clone(), Some(Error::Kube(e)), false)
    }

    /// Another resource of the kind owns the API object `obj` claims (see [`super::claims`]):
    /// `Stalled` with reason `ConflictingOwner`, and `status.id` cleared so that deleting `obj`
    /// never touches the owner's object. Checked again at each resync (from the cache, no API
    /// call): `obj` takes over once the owner is gone.
    pub fn conflict<K: Claimant>(obj: &K, owner: &K, status: &S) -> Box<Self>
    where
        S: ManagedStatus,
    {
        let mut status = status.clone();
        status.clear_id();
        let message = conflict_message(obj, owner);
        let outcome = Outcome::stalled(CONFLICTING_OWNER, message);
        Self::new(outcome, status, None, true)
    }

    /// The spec has problems the schema could not catch: `Stalled` with reason `InvalidSpec`
    /// listing each field and what to fix. Some live in annotations (`external-id`,
    /// `adoption-policy`, `paused`), which do not change the generation, so the resource is checked again
    /// at resync and on any change (validation costs no API call).
    pub fn invalid_spec(problems: &[crate::engine::Problem], status: &S) -> Box<Self> {
        Self::blocked(
            "InvalidSpec",
            crate::engine::validate::describe(problems),
            status,
        )
    }

    /// Progress needs the user or a change outside the resource (an object or Secret removed,
    /// a policy annotation added): `Stalled=True` with `message` saying what to do, checked again
    /// at each resync and at any change of the resource (annotations included).
    pub fn blocked(reason: &'static str, message: String, status: &S) -> Box<Self> {
        Self::new(
            Outcome::stalled(reason, message),
            status.clone(),
            None,
            true,
        )
    }

    /// Progress needs the user: `Stalled=True` with `message` saying what to fix.
    pub fn stalled(reason: &'static str, message: String, status: &S) -> Box<Self> {
        Self::new(
            Outcome::stalled(reason, message),
            status.clone(),
            None,
            false,
        )
    }
}

/// The result of [`super::converge::converge`].
pub type ConvergeResult<S> = std::result::Result<Converged<S>, Box<Failure<S>>>;

/// What a reconcile writes and returns, whether its converge ended well or failed: the fields
/// of [`Converged`] and [`Failure`] together, each at its neutral value where the other has none.
struct Settled<S> {
    outcome: Outcome,
    status: S,
    error: Option<Error>,
    requeue: Option<Action>,
    recheck_at_resync: bool,
    routine: bool,
    create_refused: bool,
}

impl<S> From<ConvergeResult<S>> for Settled<S> {
    fn from(result: ConvergeResult<S>) -> Self {
        match result {
            Ok(c) => Settled {
                outcome: c.outcome,
                status: c.status,
                error: None,
                requeue: c.requeue,
                recheck_at_resync: false,
                routine: c.routine,
                create_refused: false,
            },
            Err(f) => Settled {
                outcome: f.outcome,
                status: f.status,
                error: f.error,
                requeue: None,
                recheck_at_resync: f.recheck_at_resync,
                routine: false,
                create_refused: f.create_refused,
            },
        }
    }
}

/// A custom resource the operator manages: a kind of the engine, listed in the account cache,
/// claiming API objects, and a namespaced Kubernetes resource.
pub trait Managed:
    ManagedKind<Resource = Self> + CachedKind + Claimant + Watchable + Serialize
{
    /// What the resource's object offers other resources, checked once it is in sync against
    /// the account's cached lists (`service`) and recorded in `status`: `Ok(Err(lack))` when
    /// it lacks what it promises, which keeps a resource that writes from `Ready`. Nothing for
    /// most kinds.
    ///
    /// Errors: an API call's.
    fn check_offers(
        &self,
        _service: &super::cache::AccountCache,
        _status: &mut Self::Status,
    ) -> impl std::future::Future<
        Output = std::result::Result<std::result::Result<(), Lack>, ApiError>,
    > + Send {
        async { Ok(Ok(())) }
    }
}

/// What an object lacks of what it offers (see [`Managed::check_offers`]): the reason and
/// message of its `Ready=False`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lack {
    /// [`REASON_CREDENTIAL_MISSING`] or [`REASON_CREDENTIAL_REFUSED`].
    pub reason: &'static str,
    /// For people: what is missing and what to do.
    pub message: String,
}

pub use crate::engine::placement::REASON_CREDENTIAL_MISSING;

pub use super::converge::REASON_CREDENTIAL_REFUSED;

/// A SubAccount offers the operator's credential inside its sub account (product design,
/// "Accounts and tenancy"): a key of [`crate::engine::placement::credential_key_name`]
/// among the sub account's keys, which the service accepts. Checked at every resync, so a
/// credential deleted at the service shows here, not only on the objects inside.
impl Managed for crate::crd::SubAccount {
    /// Missing is a lack when the SubAccount promises a credential: it names one
    /// (`spec.credentialKeyName`, `spec.apiKey`) or one was found before (deleted since). A
    /// SubAccount of release 0.1 made without a key has none to promise: it stays `Ready`, and
    /// only a resource placed inside it says what is missing. A credential the service refused
    /// to a resource inside (401, recorded in `service`) is tried once more with one read
    /// (`GET /api-key?page=1&size=1` calling as it): refused again, it is a lack
    /// ([`REASON_CREDENTIAL_REFUSED`]); accepted, the mark goes.
    async fn check_offers(
        &self,
        service: &super::cache::AccountCache,
        status: &mut crate::crd::SubAccountStatus,
    ) -> std::result::Result<std::result::Result<(), Lack>, ApiError> {
        let Some(id) = status.id else {
            return Ok(Ok(()));
        };
        let promised = status.credential.is_some()
            || self.spec.credential_key_name.is_some()
            || self.spec.api_key.is_some();
        let found = super::placement::find_credential(service, self, id).await?;
        status.credential =
            (found.as_ref().ok()).map(|k| crate::crd::subaccount::NamedId::new(k.id, &k.name));
        let key = match found {
            Ok(key) => key,
            Err(message) if promised => {
                return Ok(Err(Lack {
                    reason: REASON_CREDENTIAL_MISSING,
                    message,
                }));
            }
            Err(_) => return Ok(Ok(())),
        };
        if !service.credential_refused(key.id) {
            return Ok(Ok(()));
        }
        let one = crate::api::ListApiKeysQuery {
            page: Some(1),
            size: Some(1),
            ..Default::default()
        };
        let probe = match service.client().calling_as(key.key) {
            Ok(client) => client.list_api_keys(&one).await.map(|_| ()),
            Err(e) => Err(e),
        };
        match probe {
            Ok(()) => {
                service.accept_credential(key.id);
                Ok(Ok(()))
            }
            Err(e) if e.status() == Some(401) => Ok(Err(Lack {
                reason: REASON_CREDENTIAL_REFUSED,
                message: format!(
                    "the service refuses API key {} \"{}\", the operator's credential in sub account {id} ({e}): its allowed IPs probably exclude the operator. Clear or widen them at the service, or set spec.credentialKeyName to another key of the sub account; checked again at the next resync",
                    key.id, key.name
                ),
            })),
            Err(e) => Err(e),
        }
    }
}
impl Managed for crate::crd::ApiKey {}
impl Managed for crate::crd::SendingDomain {}

/// Reconciles one object of kind `K` (the function each controller runs), inside one span
/// `reconcile` with the object's `kind`, `namespace`, `name` and `uid`: every log line of the
/// reconcile and the spans of its API calls (the service client's `mailtarget_api`, kube's
/// HTTP spans) carry them.
///
/// Errors: retryable API or Kubernetes failures (the controller backs off and retries).
pub async fn reconcile<K: Managed>(obj: Arc<K>, ctx: Arc<Context>) -> Result<Action> {
    let span = tracing::info_span!(
        "reconcile",
        kind = K::KIND,
        namespace = obj.namespace().unwrap_or_default(),
        name = obj.name_any(),
        uid = obj.meta().uid.as_deref().unwrap_or_default(),
    );
    tracing::Instrument::instrument(reconcile_in_span(obj, ctx), span).await
}

async fn reconcile_in_span<K: Managed>(obj: Arc<K>, ctx: Arc<Context>) -> Result<Action> {
    measured(K::KIND, &ctx, async {
        if crate::crd::is_paused(obj.annotations()) {
            return Ok(Action::await_change());
        }
        if obj.meta().deletion_timestamp.is_some()
            && ctx.is_stalled(&object_uid(obj.as_ref()), obj.meta().generation)
        {
            // Its deletion was refused for good at this generation (see `stall_deletion`).
            return Ok(Action::await_change());
        }
        let ns = obj.namespace().ok_or(Error::MissingMetadata("namespace"))?;
        let api: Api<K> = Api::namespaced(ctx.kube.clone(), &ns);
        finalizer(&api, FINALIZER, obj, |event| async {
            match event {
                Finalizer::Apply(o) => apply(o.as_ref(), &ctx, &api).await,
                Finalizer::Cleanup(o) => {
                    ctx.forget(o.as_ref());
                    ctx.metrics.set_ready(K::KIND, object_key(o.as_ref()), None);
                    if let Some(id) = o.recorded_id()
                        && ctx
                            .claims
                            .owner(&ctx.accounts, o.as_ref(), Some(id))
                            .is_some()
                    {
                        // Another resource owns this API object: leave it alone.
                        return Ok(Action::await_change());
                    }
                    match converge::cleanup(o.as_ref(), &ctx).await {
                        // An account refused or not ready is reported too, retried or not:
                        // the finalizer waits for it, and the user must see why.
                        Err(e) if !e.is_retryable() || matches!(e, Error::Account(_)) => {
                            Err(stall_deletion(o.as_ref(), &ctx, &api, e).await)
                        }
                        other => other,
                    }
                }
            }
        })
        .await
        .map_err(Error::from_finalizer)
    })
    .await
}

/// A cleanup that failed for good (the service refused the delete, or the key): the resource
/// shows `Stalled` with the root cause and what to do, and the error goes to the error policy,
/// which waits for a change (a 401 is checked again at the next resync) instead of looping. The
/// finalizer stays, so the object at the service is never forgotten while it exists.
async fn stall_deletion<K: Managed>(obj: &K, ctx: &Context, api: &Api<K>, e: Error) -> Error {
    let reason = match &e {
        Error::Api(a) if a.status() == Some(401) => "Unauthorized",
        Error::Api(_) => "ApiRejected",
        Error::Account(r) => r.reason,
        Error::InvalidSpec(_) => "InvalidSpec",
        _ => "CleanupFailed",
    };
    let message = match e {
        Error::InvalidSpec(_) => format!(
            "the object at the service is not deleted: {e}. The finalizer stays until this is fixed"
        ),
        _ => format!(
            "deleting the object at the service failed: {e}. The finalizer stays until the deletion succeeds: fix the cause, or set spec.deletionPolicy to Orphan to leave the object at the service"
        ),
    };
    let outcome = Outcome::stalled(reason, message);
    let mut status = obj.last_status();
    set_conditions(status.conditions_mut(), &outcome, obj.meta().generation);
    status.set_observed_generation(obj.meta().generation);
    match write_status(api, &obj.name_any(), &status, &Revision::of(obj)).await {
        // A newer copy is on its way: the deletion is decided again from it.
        Err(write) if is_conflict(&write) => return Error::Kube(write),
        Err(write) => tracing::warn!(error = %write, "cannot report the failed deletion in status"),
        Ok(_) => {}
    }
    if e.needs_change() {
        // Not tried again for this generation.
        ctx.mark_stalled(&object_uid(obj), obj.meta().generation);
    }
    e
}

async fn apply<K: Managed>(obj: &K, ctx: &Context, api: &Api<K>) -> Result<Action> {
    let name = obj.name_any();
    let key = object_key(obj);
    let generation = obj.meta().generation;
    let uid = object_uid(obj);
    if ctx.is_stalled(&uid, generation) {
        // Stalled at this generation: only a spec change (or new credentials, i.e. a restart)
        // can help, so status updates and Secret events do not trigger new API calls.
        return Ok(Action::await_change());
    }
    // `obj` is the controller's cached copy, which can predate this operator's last write: each
    // write below carries its version, and a stale copy gets 409 Conflict before it writes
    // anything, to Kubernetes or to the service (see `revision`).
    let revision = Revision::of(obj);
    let old = obj.last_status();
    if old.conditions().is_empty() {
        // Flux and Argo CD must never see a new object as done: Ready=False comes first.
        let mut first = old.clone();
        let outcome = Outcome::progressing("Reconciling", "first reconcile");
        set_conditions(first.conditions_mut(), &outcome, generation);
        write_status(api, &name, &first, &revision).await?;
    }
    // A resource its account refuses outright is told so (converge's first check), not
    // whether what it names is managed: it learns nothing through the account.
    let rival = (ctx.accounts.may_claim(obj, ctx.claims.sub_accounts.get()))
        .then(|| ctx.claims.owner(&ctx.accounts, obj, None))
        .flatten();
    let mut converged = match rival {
        Some(owner) => Err(Failure::conflict(obj, owner.as_ref(), &old)),
        None => converge::converge(obj, ctx, &old, &revision).await,
    };
    fail::fail_point!(crate::failpoints::AFTER_CONVERGE);
    if let Err(f) = &mut converged
        && let Some(stale) = f.error.take_if(|e| e.is_conflict())
    {
        // The copy is stale: nothing of this reconcile is written or reported.
        return Err(stale);
    }
    let converged_ok = converged.is_ok();
    let Settled {
        outcome,
        mut status,
        error,
        requeue,
        recheck_at_resync,
        routine,
        create_refused,
    } = converged.into();
    *status.conditions_mut() = old.conditions().clone();
    status.set_observed_generation(generation);
    set_conditions(status.conditions_mut(), &outcome, generation);
    // A resync that finds everything in order writes nothing (the status read at the start of
    // this reconcile is the one to keep).
    if serde_json::to_value(&status).ok() != serde_json::to_value(&old).ok() {
        write_status(api, &name, &status, &revision).await?;
    }
    // Reported once the status holds it (a stale copy's outcome never is).
    if !outcome.is_ready() && !routine && status.conditions() != old.conditions() {
        let (reason, message) = outcome.parts();
        let message = message.to_string();
        ctx.event(obj, EventType::Warning, reason, "Reconcile", message)
            .await;
    }
    // The identity of the managed object lives in metadata (see `identity`): recorded once,
    // and after each create, where the same patch clears the pending marker. Written after the
    // status holds the id, so that at any crash point the object is known as this resource's
    // own by `status.id` or by the pending marker, never by an external id alone (which would
    // read as an adoption).
    fail::fail_point!(crate::failpoints::AFTER_STATUS);
    // Only a converge that matched or created the object records it: a failed one carries the
    // previous status, which must not overwrite an external id the user just changed.
    if let Some(id) = status.id()
        && obj.writes()
        && converged_ok
    {
        identity::record(ctx, obj, id, &revision).await?;
    }
    // A create the service refused for certain created nothing: the pending marker it wrote
    // (after `obj` was read, so not visible in it) goes.
    if create_refused && status.id().is_none() {
        identity::clear_pending(ctx, obj, &revision).await?;
    }
    let waits_for_change = matches!(&outcome, Outcome::Stalled { .. }) && !recheck_at_resync;
    if waits_for_change {
        ctx.mark_stalled(&uid, generation);
    } else {
        ctx.clear_stalled(&uid);
    }
    ctx.metrics
        .set_ready(K::KIND, key, Some(outcome.is_ready()));
    if let Some(e) = error {
        return Err(e);
    }
    ctx.reset_failures(&uid);
    Ok(requeue.unwrap_or_else(|| {
        if waits_for_change {
            Action::await_change()
        } else {
            Action::requeue(ctx.resync_delay())
        }
    }))
}
