//! Finding the API object a resource manages, the first step of each kind's reconcile: a
//! lookup in the account's cached list ([`super::cache`]), a verdict that would stall the
//! resource confirmed against a newer list, and the ownership check of [`super::claims`].

use std::future::Future;
use std::time::Instant;

use super::cache::CachedList;
use super::claims::Claimant;
use super::context::Context;
use super::managed::{Failure, ManagedStatus};
use crate::api::ApiError;
use crate::reconcile::{Found, Lookup};

/// True when `lookup` would stop the resource (`Stalled`): several matches, an unknown
/// external id, or, when `missing_stalls` (an object that cannot be created, such as a key
/// inside a sub account), no match. Such a verdict on a list fetched before the reconcile
/// began is confirmed against a newer one ([`CachedList::doubt`]): the cached one may predate
/// the object (created moments ago), and a stalled resource is not looked at again until its
/// spec changes or the operator restarts.
pub fn lookup_stalls<T>(lookup: &Lookup<'_, T>, missing_stalls: bool) -> bool {
    match lookup {
        Lookup::Found(..) => false,
        Lookup::Missing => missing_stalls,
        Lookup::Ambiguous(_) | Lookup::ExternalIdNotFound(_) => true,
    }
}

/// The API object `obj` manages: `lookup` run on the list `fresh` returns (a cached list no
/// older than its maximum age), with a stalling verdict on a list fetched before this call
/// confirmed against a newer one (see [`lookup_stalls`]; `missing_stalls` as there). `key` is the natural key looked for,
/// for messages.
///
/// Returns the matching list item and how it matched, or `None` when nothing matches (the
/// object may be created).
///
/// Errors (as a [`Failure`] keeping `old`): the list call's error; `Stalled` with
/// `AmbiguousMatch` (several objects carry the natural key) or `ExternalObjectNotFound` (the
/// external-id annotation names no object); `Stalled` with `ConflictingOwner` when another
/// resource of the kind already manages the object found.
pub async fn find_managed<'c, K, S, T, Fut>(
    ctx: &Context,
    obj: &K,
    old: &S,
    key: &str,
    missing_stalls: bool,
    fresh: impl Fn() -> Fut,
    lookup: impl for<'a> Fn(&'a [T]) -> Lookup<'a, T>,
) -> Result<Option<(T, Found)>, Box<Failure<S>>>
where
    K: Claimant,
    S: ManagedStatus,
    T: Clone + 'c,
    Fut: Future<Output = Result<&'c CachedList<T>, ApiError>>,
{
    let doing = format!("listing {}s", K::NOUN);
    let began = Instant::now();
    let list = fresh().await.map_err(|e| Failure::api(e, &doing, old))?;
    let list = if list.doubt(began, |items| lookup_stalls(&lookup(items), missing_stalls)) {
        fresh().await.map_err(|e| Failure::api(e, &doing, old))?
    } else {
        list
    };
    let found = list.read(|items| {
        let found = lookup(items);
        if let Some((reason, message)) = found.blocked(K::NOUN, key) {
            return Err(Failure::stalled(reason, message, old));
        }
        Ok(match found {
            Lookup::Found(item, how) => Some((item.clone(), how)),
            _ => None,
        })
    })?;
    if let Some((_, how)) = &found
        && let Some(owner) = ctx.claims.owner(obj, Some(how.id)).await
    {
        return Err(Failure::conflict(obj, owner.as_ref(), old));
    }
    Ok(found)
}
