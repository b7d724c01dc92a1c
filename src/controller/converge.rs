//! The controller's front end of the managed-resource engine: one generic converge and one
//! generic cleanup for every kind. The kind's behaviour (lookup, plan, steps, status
//! projection, exported secrets) is its [`ManagedKind`] implementation; what is added here is
//! what only a cluster has: the account's cached lists, identity in metadata (the pending
//! marker before a create), Events, Secrets, the detail-read schedule and the pacing of
//! `verify-txt`.

use std::time::Duration;

use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

use super::accounts::{Needs, Refusal, Usage};
use super::cache::CachedList;
use super::common::spec_changed;
use super::context::{Context, object_uid};
use super::error::{Error, Result};
use super::find::{Query, deletion_began, find_managed};
use super::identity;
use super::managed::{ConvergeResult, Converged, Failure, Managed};
use super::placement::{Placement, REASON_CREDENTIAL_RESERVED, place, refuse_credential};
use super::revision::Revision;
use super::secrets::{self, Integrity, SecretError, SecretWrite};
use super::status::Outcome;
use crate::api::ApiObject;
use crate::crd::Ownership;
use crate::crd::conditions::now_rfc3339;
use crate::engine::driver::{self, ResourcePlan};
use crate::engine::recovery::may_have_committed;
use crate::engine::{FieldChange, MatchedBy, StatusOf, shown};
use crate::engine::{
    ManagedKind, ManagedStatus, Seen, StepAction, StepOutcome, StepReport, Summary,
};

/// Brings `obj`'s API object in line with its spec through the engine, or reports why not.
/// `old` is the status as last written; `revision`, the version of `obj` the reconcile writes
/// over (see [`super::revision`]): no step is sent to the service before a write or check over
/// it succeeded.
pub async fn converge<K: Managed>(
    obj: &K,
    ctx: &Context,
    old: &K::Status,
    revision: &Revision,
) -> ConvergeResult<K::Status> {
    let mut desired = K::desired(obj).map_err(|problems| Failure::invalid_spec(&problems, old))?;
    let usage = match account_of(obj, ctx, old).await {
        Ok(usage) => usage,
        Err(early) => return early,
    };
    let service = usage.service.as_ref();
    // The operator's default adoption policy applies where the account lets the namespace adopt.
    let adoption = identity::adoption_policy(ctx, obj).filter(|_| usage.may_adopt);
    let placement = place(obj, ctx, old, &usage).await?;
    let (by_name_is_own, api, reserved) = match &placement {
        Placement::Account => {
            let listed = own_sub_account(&usage).await;
            // A 401 here is the account key's, told as for the resource's own calls.
            let failed =
                |e| refused_key(Failure::api(e, "listing API keys", old), &placement, &usage);
            if let Some(id) = listed.map_err(failed)? {
                K::in_sub_account(&mut desired, id);
            }
            (false, service.client(), None)
        }
        Placement::SubAccount {
            id,
            managed,
            client,
            reserved,
            ..
        } => {
            K::in_sub_account(&mut desired, *id);
            (*managed, client, reserved.as_ref())
        }
        Placement::Waiting(reason, message) => {
            let outcome = Outcome::progressing(reason, message.clone());
            return Ok(Converged {
                requeue: Some(Action::requeue(ctx.resync_delay())),
                ..Converged::new(outcome, old.clone())
            });
        }
    };
    let target = Target {
        service,
        api,
        by_name_is_own,
        reserved,
        adoption,
    };
    converge_placed(obj, ctx, old, revision, desired, target)
        .await
        .map_err(|failure| refused_key(failure, &placement, &usage))
}

/// The sub account of `usage`'s key, unless it is known to be a company key: from its own entry
/// in the account's cached key list ([`crate::engine::placement::own_sub_account`]). A resource
/// reconciled through it lives there, and is looked up there, as one placed inside it.
///
/// Errors: the key list's.
async fn own_sub_account(usage: &Usage) -> Result<Option<i64>, crate::api::ApiError> {
    if usage.scope == Some(crate::crd::KeyScope::Company) {
        return Ok(None);
    }
    let keys = usage.service.fresh::<crate::crd::ApiKey>().await?;
    let client = usage.service.client();
    Ok(keys.read(|keys| crate::engine::placement::own_sub_account(keys, client)))
}

/// Where a placed resource's calls go (see [`converge_placed`]).
struct Target<'a> {
    /// The account's cached lists.
    service: &'a super::cache::AccountCache,
    /// The client every call of the resource is made with.
    api: &'a crate::api::Client,
    /// Objects found by natural key are the resource's own (see [`Placement::SubAccount`]).
    by_name_is_own: bool,
    /// The credential the resource may not manage.
    reserved: Option<&'a (Option<i64>, String)>,
    /// The resource's adoption policy, where its account lets it adopt.
    adoption: Option<crate::crd::AdoptionPolicy>,
}

/// Reason of a resource placed inside a sub account whose credential the service refused
/// (401), and of that SubAccount (see [`super::managed`]).
pub const REASON_CREDENTIAL_REFUSED: &str = "CredentialRefused";

/// Reason of a resource whose Secret it may not write ([`secrets::refusal`]).
pub const REASON_SECRET_CONFLICT: &str = "SecretConflict";

/// A 401 told as the refusal of the key that was used (product design: a 401 with a sub
/// account's credential is a condition on that SubAccount and the objects inside it, never on
/// the company account). A sub account's credential is marked refused in the account's cache,
/// so that its SubAccount checks it at its next reconcile; otherwise the account's own key was
/// refused. Other failures are returned unchanged.
fn refused_key<S: Clone>(
    failure: Box<Failure<S>>,
    placement: &Placement,
    usage: &Usage,
) -> Box<Failure<S>> {
    if !failure.is_unauthorized() {
        return failure;
    }
    match placement {
        Placement::SubAccount {
            credential: (id, name),
            shown,
            ..
        } if !failure.is_by_account_key() => {
            usage.service.refuse_credential(*id);
            let advice = format!(
                "{}; {shown} shows what to do. Nothing outside this sub account is affected; checked again at the next resync",
                crate::engine::placement::credential_refused(Some(*id), name, shown, "the operator")
            );
            failure.unauthorized_as(REASON_CREDENTIAL_REFUSED, &advice)
        }
        _ if usage.from_flags => failure.unauthorized_as(
            "Unauthorized",
            "the service refused the operator's key: check --api-key (MAILTARGET_API_KEY or MAILTARGET_API_KEY_FILE)",
        ),
        _ => {
            let advice = format!(
                "the service refused the key of {}: put a valid key in its credentials Secret (its status shows the check)",
                usage.name
            );
            failure.unauthorized_as("Unauthorized", &advice)
        }
    }
}

/// [`converge`] once the resource is placed: finds, plans and executes through `target`.
async fn converge_placed<K: Managed>(
    obj: &K,
    ctx: &Context,
    old: &K::Status,
    revision: &Revision,
    desired: K::Desired,
    target: Target<'_>,
) -> ConvergeResult<K::Status> {
    let Target {
        service,
        api,
        by_name_is_own,
        reserved,
        adoption,
    } = target;
    let query = Query {
        key: K::natural_key(&desired),
        by_name_is_own,
        adoption,
        pending_is_ours: identity::pending_is_ours(ctx, obj),
    };
    let refused = |found| refuse_credential::<K>(reserved, K::natural_key(&desired), found);
    let refuse = |message| Failure::blocked(REASON_CREDENTIAL_RESERVED, message, old);
    if let Some(message) = refused(obj.external_id()) {
        return Err(refuse(message));
    }
    let found = find_managed(ctx, service, api, obj, old, &desired, query).await?;
    if let Some(message) = refused(found.as_ref().map(|(_, how)| how.id)) {
        return Err(refuse(message));
    }
    let item = found.as_ref().map(|(item, _)| item);
    let key = object_uid(obj);
    // Fields only a read returns, when the plan compares them: read when the status does not
    // hold them and the spec changed or the status describes another object (or none: one
    // matched for the first time, adopted, say, which must be compared whole before Ready
    // says it is in sync), and once per detail resync interval.
    let has_detail = item.is_some_and(|i| K::status_has_detail(&desired, old, i));
    let mut detail = None;
    if let Some((_, how)) = &found
        && K::needs_detail(&desired)
        && (ctx.details.due(&key, has_detail)
            || (!has_detail
                && (old.id() != Some(how.id) || spec_changed(obj, old.observed_generation()))))
    {
        let read = K::Detail::read(api, how.id).await;
        detail = Some(read.map_err(|e| Failure::api(e, &format!("reading the {}", K::NOUN), old))?);
        ctx.details.read(&key);
    }
    let observed = match (&found, &detail) {
        (Some((_, how)), Some(d)) => Some((*how, K::Observed::from(d))),
        (Some((i, how)), None) if K::needs_detail(&desired) => {
            Some((*how, K::observe_known(i, old)))
        }
        (Some((i, how)), None) => Some((*how, K::Observed::from(i))),
        (None, _) => None,
    };
    let mut plan = driver::plan_observed::<K>(desired, obj.external_id(), observed)
        .map_err(|e| Failure::stalled("CannotCreate", e.to_string(), old))?;
    let may_write = obj.writes();
    if !may_write {
        plan.planned.steps.clear();
    }
    if !may_write && found.is_none() {
        let message = format!(
            "managementPolicy is ObserveOnly and no {} matches; nothing is created",
            K::NOUN
        );
        let outcome = Outcome::progressing("ExternalObjectMissing", message);
        return Ok(Converged::new(outcome, old.clone()));
    }

    let mut status = old.clone();
    let creates = plan
        .planned
        .steps
        .iter()
        .any(|s| s.step.action == StepAction::Create);
    let mut requeue = pace(&mut plan, &mut status, ctx, creates);
    // Observing is not owning: values of an object the resource did not create are exported
    // only under an adoption policy (else any namespace could copy any key by naming it).
    let exports = may_write || adoption.is_some();
    // A Secret of the user's (or another owner's) is refused before any write to the service:
    // no object is made whose value would have nowhere to go.
    let takes_over = adoption.is_some();
    let mut broken = Vec::new();
    if exports {
        for r in K::secret_refs(&plan.desired) {
            let integrity = secrets::check(ctx, obj, &r.secret_name, r.key).await;
            let integrity = integrity.map_err(|e| Failure::kube("SecretWriteFailed", e, old))?;
            if let Integrity::Broken { current: Some(s) } = &integrity
                && let Some(refused) = secrets::refusal(
                    &obj.uid().unwrap_or_default(),
                    &r.secret_name,
                    s,
                    takes_over,
                )
            {
                return Err(Failure::blocked(
                    REASON_SECRET_CONFLICT,
                    refused.to_string(),
                    old,
                ));
            }
            broken.push(integrity);
        }
    }
    let needs_value = broken.iter().any(|i| !matches!(i, Integrity::Intact))
        && item.is_none_or(|i| K::item_exports(&plan.desired, i).is_none());
    let want_detail = needs_value || (item.is_some() && !has_detail);
    if creates {
        identity::mark_pending(ctx, obj, revision)
            .await
            .map_err(|e| Failure::kube("IdentityWriteFailed", e, old))?;
    } else if !plan.planned.steps.is_empty() {
        let resources =
            Api::<K>::namespaced(ctx.kube.clone(), &obj.namespace().unwrap_or_default());
        revision
            .confirm(&resources, &obj.name_any())
            .await
            .map_err(|e| Failure::kube("VersionCheckFailed", e, old))?;
    }
    let executed = driver::execute::<K>(api, &plan, detail, want_detail).await;
    if let Some(d) = &executed.detail {
        K::absorb(service, d);
        ctx.details.read(&key);
    }
    status = match (&executed.detail, item) {
        (Some(d), _) => K::project(&status, Seen::Detail(d)),
        (None, Some(i)) => K::project(&status, Seen::Item(i)),
        (None, None) => status,
    };
    // Observing is not owning: an ObserveOnly reconcile keeps the ownership of an object the
    // resource owned before, and records any other as observed only.
    // Under Full, owned only on this reconcile's evidence: the object found (find_managed
    // enforced the adoption rules) or created; not an id carried over from `old`.
    if let Some(id) = status.id() {
        let created = executed.steps.iter().any(StepReport::created);
        let matched = plan.planned.found.is_some_and(|f| f.id == id);
        let kept = old.owned_id() == Some(id) && (may_write || old.ownership().is_some());
        let owned = kept || (may_write && (matched || created));
        status.set_ownership(Some(if owned {
            Ownership::Owned
        } else {
            Ownership::Observed
        }));
    }
    let id = status.id().unwrap_or_default();
    for report in executed
        .steps
        .iter()
        .filter(|r| r.outcome == StepOutcome::Done)
    {
        step_event::<K>(ctx, obj, report, (old.owned_id(), id), &plan, &status).await;
    }
    if let Some(e) = executed.error {
        // A failed step, else the read at the end.
        let doing = executed
            .steps
            .iter()
            .find_map(|r| failed_doing::<K>(&r.step.action, &r.outcome))
            .unwrap_or_else(|| format!("reading the {}", K::NOUN));
        let create_failed = executed.steps.iter().any(StepReport::create_failed);
        let refused = create_failed && !may_have_committed(&e);
        let failure = Failure::api(e, &doing, &status);
        return Err(if refused {
            failure.refused_create()
        } else {
            failure
        });
    }
    if let Some(found) = plan.planned.found
        && old.owned_id().is_none()
        && may_write
        && matches!(
            found.matched_by,
            MatchedBy::NaturalKey | MatchedBy::ExternalId
        )
    {
        let message = format!("adopted existing {} {}", K::NOUN, found.id);
        ctx.event(obj, EventType::Normal, "Adopted", "Adopt", message)
            .await;
    }
    let mut notes = plan.planned.notes.clone();
    if exports {
        let values = match (&executed.detail, item) {
            (Some(d), _) => K::exports(&plan.desired, d),
            (None, Some(i)) => Ok(K::item_exports(&plan.desired, i).unwrap_or_default()),
            (None, None) => Ok(Vec::new()),
        };
        match values {
            Ok(values) => {
                for (value, integrity) in values.iter().zip(broken) {
                    let current = match integrity {
                        Integrity::Intact if executed.detail.is_none() => continue,
                        Integrity::Intact => None,
                        Integrity::Broken { current } => Some(current),
                    };
                    // A restore: the object was the resource's before, and the Secret's name
                    // too (a missing Secret after a spec change may be under a new name).
                    let recorded = old.owned_id().is_some()
                        && (current.as_ref().is_some_and(Option::is_some)
                            || !spec_changed(obj, old.observed_generation()));
                    write_secret(ctx, obj, value, current, (recorded, takes_over), &status).await?;
                }
            }
            Err(note) => notes.push(note),
        }
    }
    // The kind's projection ends the pacing once the object is ready.
    let mut summary = K::summary(&plan.desired, &status);
    let mut routine = !summary.ready;
    // What an ObserveOnly resource offers is recorded, but not its to keep.
    let offers = match summary.ready {
        true => obj.check_offers(service, &mut status).await,
        false => Ok(Ok(())),
    };
    let offers = offers.map_err(|e| Failure::api(e, "checking the credential", &status))?;
    if let (Err(lack), true) = (offers, may_write) {
        summary = Summary {
            ready: false,
            reason: lack.reason,
            message: lack.message,
        };
        routine = false;
    }
    if !summary.ready && may_write {
        K::complete_status(api, &mut status).await;
        if requeue.is_none()
            && let Some(p) = status.pacing()
        {
            requeue = p.attempts.map(|a| backoff(ctx, a));
        }
    }
    let outcome = outcome(summary, &plan, may_write, &notes);
    Ok(Converged {
        outcome,
        status,
        requeue: requeue.map(Action::requeue),
        routine,
    })
}

/// The Ready condition of a converged resource: the kind's summary, or for `ObserveOnly` what
/// differs from the spec (never corrected).
fn outcome<K: ManagedKind>(
    summary: Summary,
    plan: &ResourcePlan<K>,
    may_write: bool,
    notes: &[String],
) -> Outcome {
    let notes = if notes.is_empty() {
        String::new()
    } else {
        format!(" Note: {}", notes.join("; "))
    };
    let changes = &plan.planned.changes;
    if !may_write && !changes.is_empty() {
        let diff: Vec<String> = changes.iter().map(FieldChange::drift).collect();
        let message = format!(
            "the service differs from the spec, not corrected (ObserveOnly): {}",
            diff.join("; ")
        );
        return Outcome::progressing(crate::crd::conditions::REASON_DRIFT_DETECTED, message);
    }
    match (summary.ready, may_write) {
        (true, true) => Outcome::ready(summary.reason, format!("{}{notes}", summary.message)),
        (true, false) => Outcome::ready(
            crate::crd::conditions::REASON_OBSERVED,
            format!("{} (ObserveOnly){notes}", summary.message),
        ),
        (false, _) => {
            let mode = if may_write {
                ""
            } else {
                " (ObserveOnly: nothing is called to change it)"
            };
            Outcome::progressing(summary.reason, format!("{}{mode}{notes}", summary.message))
        }
    }
}

/// The pacing of the repeated step (`verify-txt`): not in the reconcile that creates the
/// object (the first call comes `verify_first_interval` later), then once the backoff since the
/// last call has passed. Returns the wait before the step is due, when it is left out.
fn pace<K: ManagedKind>(
    plan: &mut ResourcePlan<K>,
    status: &mut StatusOf<K>,
    ctx: &Context,
    creates: bool,
) -> Option<Duration> {
    let repeated =
        |s: &crate::engine::PlannedStep<K::Request>| s.step.action == StepAction::VerifyTxt;
    if !plan.planned.steps.iter().any(repeated) {
        return None;
    }
    let pacing = status.pacing()?;
    let wait = if creates {
        *pacing.attempts = Some(0);
        *pacing.last = Some(now_rfc3339());
        backoff(ctx, 0)
    } else {
        let attempts = pacing.attempts.unwrap_or(0);
        let last = pacing
            .last
            .as_deref()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
        let wait = last.map_or(Duration::ZERO, |last| {
            let due = last.with_timezone(&chrono::Utc)
                + chrono::Duration::from_std(backoff(ctx, attempts)).unwrap_or_default();
            (due - chrono::Utc::now())
                .to_std()
                .unwrap_or(Duration::ZERO)
        });
        if wait.is_zero() {
            *pacing.attempts = Some(attempts.saturating_add(1));
            *pacing.last = Some(now_rfc3339());
            return None;
        }
        wait
    };
    plan.planned.steps.retain(|s| !repeated(s));
    Some(wait)
}

/// The wait after `attempts` calls of the repeated step: `--verify-first-interval`, doubled per
/// call, capped at `--verify-max-interval`.
fn backoff(ctx: &Context, attempts: u32) -> Duration {
    let settings = &ctx.settings;
    crate::engine::Pacing::backoff(
        attempts,
        settings.verify_first_interval,
        settings.verify_max_interval,
    )
}

/// What a failed step was doing, for its condition message (`None`: the step did not fail).
fn failed_doing<K: ManagedKind>(action: &StepAction, outcome: &StepOutcome) -> Option<String> {
    if !matches!(outcome, StepOutcome::Failed { .. }) {
        return None;
    }
    let verb = match action {
        StepAction::Create => "creating",
        StepAction::Update => "updating",
        StepAction::Share => "sharing",
        StepAction::VerifyTxt => return Some("verify-txt".into()),
        StepAction::Delete => "deleting",
    };
    Some(format!("{verb} the {}", K::NOUN))
}

/// The Event of a step that was made on object `id` (`before`: the object the resource owned
/// before this reconcile). A create that replaces an owned object no longer found is a
/// `Recreated` Warning naming both (its value, if it has one, is new), a series of its own:
/// the events library (as client-go's) folds Events of one reason and action into the first
/// one's series, note and all.
async fn step_event<K: Managed>(
    ctx: &Context,
    obj: &K,
    report: &crate::engine::StepReport,
    (before, id): (Option<i64>, i64),
    plan: &ResourcePlan<K>,
    status: &K::Status,
) {
    let noun = K::NOUN;
    let fields: Vec<&str> = report.step.sends.iter().map(|s| s.field).collect();
    let name = K::natural_key(&plan.desired);
    if let (StepAction::Create, Some(gone)) = (&report.step.action, before) {
        let note = format!(
            "{noun} {gone} is no longer found where it was: created {noun} {id} \"{name}\""
        );
        ctx.event(obj, EventType::Warning, "Recreated", "Create", note)
            .await;
        return;
    }
    let (reason, action, note) = match report.step.action {
        StepAction::Create => (
            "Created",
            "Create",
            format!("created {noun} {id} \"{name}\""),
        ),
        StepAction::Update => (
            "Updated",
            "Update",
            format!("updated {noun} {id} ({})", fields.join(", ")),
        ),
        StepAction::Share => ("Shared", "Update", format!("shared {noun} {id}")),
        StepAction::VerifyTxt if K::summary(&plan.desired, status).ready => (
            "Verified",
            "Verify",
            format!("the DNS records of {noun} {id} are verified"),
        ),
        StepAction::VerifyTxt => return,
        StepAction::Delete => ("Deleted", "Delete", format!("deleted {noun} {id}")),
    };
    ctx.event(obj, EventType::Normal, reason, action, note)
        .await;
}

/// Writes one exported value into its Secret (`current`: the Secret as just read when it was
/// found broken); an Event when a Secret of an object already recorded had to be written again.
async fn write_secret<K: Managed>(
    ctx: &Context,
    obj: &K,
    value: &crate::engine::Export,
    current: Option<Option<Box<k8s_openapi::api::core::v1::Secret>>>,
    (recorded, takes_over): (bool, bool),
    status: &K::Status,
) -> std::result::Result<(), Box<Failure<K::Status>>> {
    let name = &value.secret_name;
    let (key, v) = (value.key, &value.value);
    let written = match &current {
        Some(current) => {
            secrets::ensure_over(ctx, obj, name, key, v, current.as_deref(), takes_over).await
        }
        None => secrets::ensure(ctx, obj, name, key, v, takes_over).await,
    };
    match written {
        Ok(SecretWrite::Written) if recorded && current.is_some() => {
            let note = format!("wrote {} to Secret \"{name}\" again", value.key);
            ctx.event(
                obj,
                EventType::Normal,
                "SecretRestored",
                "WriteSecret",
                note,
            )
            .await;
            Ok(())
        }
        Ok(_) => Ok(()),
        Err(SecretError::Kube(e)) => Err(Failure::kube("SecretWriteFailed", e, status)),
        Err(e) => Err(Failure::blocked(
            REASON_SECRET_CONFLICT,
            e.to_string(),
            status,
        )),
    }
}

/// The account `obj` is reconciled through ([`super::accounts::AccountRegistry::usage`]), or
/// the converge's end when it may not be: `Stalled` for a refusal (checked again at each resync
/// and at any change of the resource), `Reconciling` while the account is not ready (reconciled
/// again when its check changes, else at the next resync). No API call either way.
async fn account_of<K: Managed>(
    obj: &K,
    ctx: &Context,
    old: &K::Status,
) -> std::result::Result<Usage, ConvergeResult<K::Status>> {
    let adoption = super::accounts::usage::asks_to_adopt(obj, old.owned_id());
    match usage_of(ctx, obj, adoption).await {
        Ok(usage) => Ok(usage),
        Err(refusal) if refusal.stalled => {
            Err(Err(Failure::blocked(refusal.reason, refusal.message, old)))
        }
        Err(refusal) => {
            let outcome = Outcome::progressing(refusal.reason, refusal.message);
            Err(Ok(Converged {
                requeue: Some(Action::requeue(ctx.resync_delay())),
                ..Converged::new(outcome, old.clone())
            }))
        }
    }
}

/// [`super::accounts::AccountRegistry::usage`] for `obj`, asking to adopt when `adoption`.
///
/// Hosted by a SubAccount of another namespace ([`super::accounts::AccountRegistry::hosted_by`],
/// the SubAccount read through the cache, else from the API server: one GET when the cache
/// does not hold it yet, as placement reads it); in a deletion of an object the operator
/// recorded as this resource's own, by the namespace its reference names even if that
/// SubAccount no longer lets it in (or is gone): what the resource made is deleted with it, as
/// garbage collection removes what an owner made.
async fn usage_of<K: Managed>(
    ctx: &Context,
    obj: &K,
    adoption: bool,
) -> std::result::Result<Usage, Refusal> {
    let cleanup = obj.meta().deletion_timestamp.is_some();
    let needs = Needs {
        adoption,
        company_key: K::NEEDS_COMPANY_KEY,
        cleanup,
    };
    let namespace = obj.namespace().unwrap_or_default();
    let elsewhere = (obj.sub_account_ref()).filter(|r| r.namespace_or(&namespace) != namespace);
    let host = match elsewhere {
        None => None,
        Some(r) if cleanup && obj.recorded_id().is_some() => r.namespace.clone(),
        // Read through the cache, else from the API server (a reconcile at start-up may come
        // before the SubAccount cache's first list): unreadable, it hosts nothing.
        Some(r) => {
            let sub = super::placement::referenced(ctx, r, &namespace).await;
            ctx.accounts.hosted_by(obj, sub.ok().flatten().as_deref())
        }
    };
    ctx.accounts
        .usage((&namespace, host.as_deref()), obj.account_ref(), needs)
        .await
}

/// Carries out `obj`'s deletion policy on the object it records, when it may write: one step
/// through the engine (a delete, or a sub account's deactivation); an object already gone, or
/// already as the step would leave it ([`crate::engine::ManagedKind::already_deleted`]), counts as done. A resource deleted while a create was in flight and unrecorded (the pending
/// marker is set, no id) finds the object by natural key first, so none is left behind.
///
/// Errors: the API's (the finalizer stays).
pub async fn cleanup<K: Managed>(obj: &K, ctx: &Context) -> Result<Action> {
    let (Some(step), true) = (K::deletion(obj), obj.writes()) else {
        return Ok(Action::await_change());
    };
    if obj.recorded_id().is_none() && !identity::pending_is_ours(ctx, obj) {
        return Ok(Action::await_change());
    }
    if let Some(problem) = crate::engine::validate::paused(obj.annotations()) {
        // Paused or not cannot be told: nothing is deleted until it can (the finalizer waits).
        return Err(Error::InvalidSpec(problem.to_string()));
    }
    let usage = usage_of(ctx, obj, false).await.map_err(Error::Account)?;
    let service = usage.service.as_ref();
    let (client, sub_account) = super::placement::for_cleanup(obj, ctx, &usage).await;
    let id = match (obj.recorded_id(), K::desired(obj)) {
        (Some(id), _) => Some(id),
        // The pending marker is ours (checked above).
        (None, Ok(mut desired)) => {
            // Placed inside a sub account whose id is unknown now: nothing can be told apart
            // from another sub account's object of the same name, so nothing is looked for.
            let own = match (obj.sub_account_ref(), sub_account) {
                (Some(_), None) => return Ok(Action::await_change()),
                (_, Some(sub)) => Some(sub),
                // Through a sub account's key: in its sub account, as `converge` placed it.
                (None, None) => own_sub_account(&usage).await.map_err(Error::Api)?,
            };
            if let Some(sub) = own {
                K::in_sub_account(&mut desired, sub);
            }
            let found = driver::find_created::<K>(&client, &desired)
                .await
                .map_err(Error::Api)?;
            match found {
                Some(id) if ctx.claims.owner(&ctx.accounts, obj, Some(id)).is_none() => Some(id),
                _ => None,
            }
        }
        _ => None,
    };
    let Some(id) = id else {
        return Ok(Action::await_change());
    };
    // An object the account's list shows as the step would leave it (a sub account with the
    // status its policy sets) is not written again, as `destroy` skips it. Only a list read
    // after the deletion began is trusted (the object may have changed at the service since an
    // older one), and only the account's own lists are cached: an object inside a sub account
    // is not looked up here.
    let already = |list: &CachedList<K::Item>| {
        (list.get(id)).is_some_and(|item| K::already_deleted(obj, &item).is_some())
    };
    let list = K::list(service);
    let done = sub_account.is_none()
        && already(list)
        && (!list.doubt(deletion_began(obj), |_| true)
            || already(service.fresh::<K>().await.map_err(Error::Api)?));
    if done {
        return Ok(Action::await_change());
    }
    let answer = driver::delete::<K>(&client, &step, id)
        .await
        .map_err(Error::Api)?;
    let fields: Vec<String> = step
        .step
        .sends
        .iter()
        .map(|s| format!("{} {}", s.field, shown(&s.value)))
        .collect();
    let (reason, note) = match &answer {
        Some(d) => {
            K::absorb(service, d);
            (
                "Deactivated",
                format!("deactivated {} {id} ({})", K::NOUN, fields.join(", ")),
            )
        }
        None => {
            K::list(service).remove(id);
            ("Deleted", format!("deleted {} {id}", K::NOUN))
        }
    };
    ctx.event(obj, EventType::Normal, reason, "Delete", note)
        .await;
    Ok(Action::await_change())
}
