//! Finding the API object a resource manages, the first step of each kind's reconcile: a
//! lookup in the account's cached list ([`super::cache`]), a verdict that would stall the
//! resource confirmed against a newer list, and the ownership check of [`super::claims`].

use std::time::{Duration, Instant};

use kube::Resource;

use super::cache::AccountCache;
use super::context::Context;
use super::identity;
use super::managed::Failure;
use super::managed::Managed;
use crate::api::{ApiObject, Client};
use crate::crd::{ANNOTATION_ADOPTION_POLICY, AdoptionPolicy};
use crate::engine::ManagedStatus;
use crate::engine::{Found, Lookup, MatchedBy, driver};

/// Margin over the creation time of a resource for the list that confirms a verdict: the
/// timestamp's one-second granularity plus clock skew between the API server and the operator.
const CREATION_MARGIN: Duration = Duration::from_secs(2);

/// How new a list must be to confirm a verdict other than a match. For a resource that records
/// no object yet and has no create in flight, a list read after the resource was created (plus
/// [`CREATION_MARGIN`]): any object created at the service before the resource was applied is
/// in it, and resources applied together share one read. Otherwise (a create may have
/// happened, or the recorded object is missing), a list read after this reconcile began.
pub(super) fn newer_than<K: Resource>(obj: &K, recorded: Option<i64>) -> Instant {
    let now = Instant::now();
    let created = obj.meta().creation_timestamp.as_ref();
    match (recorded, created) {
        // A create may have happened after any list read so far.
        _ if identity::is_pending(obj) => now,
        (None, Some(created)) => instant_of(created, CREATION_MARGIN),
        _ => now,
    }
}

/// The moment `margin` after the Kubernetes timestamp `at`, as an [`Instant`] (now at the
/// latest).
fn instant_of(
    at: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
    margin: Duration,
) -> Instant {
    let now = Instant::now();
    let age = (std::time::SystemTime::now().duration_since(std::time::SystemTime::from(at.0)))
        .unwrap_or_default();
    now.checked_sub(age.saturating_sub(margin))
        .unwrap_or(now)
        .min(now)
}

/// The moment `obj`'s deletion began (its `deletionTimestamp`), as an [`Instant`]: a list read
/// after it shows what the service held once the deletion was asked for. The timestamp has
/// whole seconds, so the moment is taken one second later (a list of that second is not
/// trusted). Now when unknown.
pub(super) fn deletion_began<K: Resource>(obj: &K) -> Instant {
    let began = obj.meta().deletion_timestamp.as_ref();
    began.map_or_else(Instant::now, |t| instant_of(t, Duration::from_secs(1)))
}

/// What a lookup in a list concluded: the match, if any, or why it stops the resource (reason
/// and message).
type Verdict<T> = Result<Option<(T, Found)>, (&'static str, String)>;

fn verdict_of<T: Clone>(lookup: Lookup<'_, T>, noun: &str, key: &str) -> Verdict<T> {
    match lookup {
        Lookup::Found(item, how) => Ok(Some((item.clone(), how))),
        Lookup::Missing => Ok(None),
        other => Err(other.blocked(noun, key).unwrap_or_default()),
    }
}

/// What [`find_managed`] looks for.
#[derive(Clone, Copy, Debug)]
pub struct Query<'a> {
    /// The natural key looked for, for messages.
    pub key: &'a str,
    /// An object found by natural key is this resource's by construction (a key inside a sub
    /// account the resource's namespace manages), not an adoption.
    pub by_name_is_own: bool,
    /// The adoption policy in force (annotation, else the operator's default), `None` where the
    /// account does not let the namespace adopt.
    pub adoption: Option<AdoptionPolicy>,
    /// The resource carries a pending-create marker the operator wrote
    /// ([`identity::pending_is_ours`]): an object found by natural key may be its own create.
    pub pending_is_ours: bool,
}

/// The API object `obj` manages: the kind's lookup of `desired` in `service`'s cached list
/// (`client` reads: the account's, or the credential of the sub account `obj` is placed in)
/// (no older than its maximum age), with any verdict other than a match confirmed against a list
/// new enough (`newer_than`), and the id the resource records (`status.id`: owned, or only
/// observed when this reconcile may write), when absent from the list, confirmed with one read
/// of that object, so that an object missing from a list page (offset paging while something is
/// deleted) is never created again.
///
/// Returns the matching list item and how it matched, or `None` when nothing matches (the
/// object may be created).
///
/// Errors (as a [`Failure`] keeping `old`): the list call's error; `Stalled` with
/// `AmbiguousMatch` (several objects carry the natural key), `ExternalObjectNotFound` (the
/// external-id annotation names no object), `AlreadyExists` (an existing object this resource
/// may not adopt, see [`identity::refuse_adoption`]) or `ConflictingOwner` (another resource of
/// the kind already manages the object found); `ExternalObjectMissing` when the adoption policy
/// is `Adopt` and there is nothing to adopt.
pub async fn find_managed<K: Managed>(
    ctx: &Context,
    service: &AccountCache,
    client: &Client,
    obj: &K,
    old: &K::Status,
    desired: &K::Desired,
    query: Query<'_>,
) -> Result<Option<(K::Item, Found)>, Box<Failure<K::Status>>> {
    let doing = format!("listing {}s", K::NOUN);
    let external_id = obj.external_id();
    let since = newer_than(obj, old.id());
    // The lists are read with the account's own key, wherever the resource is placed.
    let failed = |e| Failure::api(e, &doing, old).by_account_key();
    // A verdict other than a match on a list read before the reconcile began is confirmed
    // against a newer one: no match (a create follows, and the object may have been created
    // moments ago, after the cached list was read), several matches, or an unknown external id
    // (verdicts that stop the resource).
    let unmatched = |items: &[K::Item]| {
        let lookup = K::lookup(desired, external_id, old.id(), items);
        !matches!(lookup, Lookup::Found(..))
    };
    let list = service
        .confirmed::<K>(since, unmatched)
        .await
        .map_err(failed)?;
    // The id status records is the resource's own unless an ObserveOnly reconcile recorded it
    // (observing is not owning: switching to Full then needs an adoption policy).
    let owned = old.owned_id();
    let verdict = |external_id| {
        list.read(|items| {
            let lookup = K::lookup(desired, external_id, old.id(), items);
            verdict_of(lookup, K::NOUN, query.key)
        })
    };
    let first = verdict(external_id);
    // The object the resource records (owned, or observed when this reconcile may write: a
    // create may follow; the lookup follows both) is absent from the list, or another one
    // matched in its place: read it before anything else. Not when the external-id annotation
    // names another object: the user chose that one.
    let recorded = owned.or(old.id().filter(|_| obj.writes()));
    let verdict = match (recorded, &first) {
        (Some(id), Ok(Some((_, how)))) if how.id == id => first,
        (Some(id), _) if external_id.is_none_or(|e| e == id) => {
            let read = match K::Detail::read(client, id).await {
                Err(e) if e.is_not_found() => None,
                read => Some(read),
            };
            match read.transpose() {
                Err(e) => return Err(Failure::api(e, &format!("reading {} {id}", K::NOUN), old)),
                Ok(Some(detail)) => {
                    let matched_by = MatchedBy::StatusId;
                    Ok(Some((K::Item::from(&detail), Found { id, matched_by })))
                }
                // Gone at the service: found again by natural key, or created again.
                Ok(None) => verdict(None),
            }
        }
        _ => first,
    };
    // Fixed by an annotation (external-id) or at the service: checked again at resync and on
    // any change of the resource, not only a spec change.
    let found = verdict.map_err(|(reason, message)| Failure::blocked(reason, message, old))?;
    if !obj.writes() {
        return Ok(found);
    }
    match &found {
        Some((_, how)) => {
            // A rename into a name another object holds: confirmed on a list as new as
            // `newer_than` asks (the holder may have been renamed meanwhile), then refused.
            let taken = |items: &[K::Item]| driver::rename_taken::<K>(desired, how.id, items);
            // Doubted on the list already read (no read when it stands).
            let list = match list.doubt(since, |items| taken(items).is_some()) {
                true => service.fresh::<K>().await.map_err(failed)?,
                false => list,
            };
            if let Some(message) = list.read(taken) {
                return Err(Failure::blocked("AlreadyExists", message, old));
            }
            if let Some(owner) = ctx.claims.owner(&ctx.accounts, obj, Some(how.id)) {
                return Err(Failure::conflict(obj, owner.as_ref(), old));
            }
            if let Some(message) = identity::refuse_adoption(owned, *how, query, K::NOUN) {
                // Not this resource's: status must not name it (deleting the resource would
                // then delete it, and a later reconcile would take it for its own).
                let mut status = old.clone();
                status.clear_id();
                return Err(Failure::blocked("AlreadyExists", message, &status));
            }
        }
        None if query.adoption == Some(AdoptionPolicy::Adopt) => {
            return Err(Failure::blocked(
                "ExternalObjectMissing",
                format!(
                    "{ANNOTATION_ADOPTION_POLICY} is Adopt and no {} \"{}\" exists to adopt; create it at the service or use AdoptOrCreate",
                    K::NOUN,
                    query.key
                ),
                old,
            ));
        }
        None => {}
    }
    Ok(found)
}
