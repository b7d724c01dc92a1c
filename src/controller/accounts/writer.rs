//! What an account check writes to `status`, and which operator instance writes it.
//!
//! Every instance checks every account it watches, to use it: a ClusterAccount is checked by
//! all of them, whatever their `--namespace` or `--label-selector`. Instances that read the
//! same Secret get the same answer, and a status equal to the one the object carries is not
//! written, so their checks agree without writes. Instances with different
//! `--cluster-resource-namespace` look for a ClusterAccount's Secret in different namespaces and
//! can disagree; the status then has one writer, the instance whose namespace holds the Secret:
//!
//! - the status records the namespace the Secret was looked for in (`status.secretNamespace`);
//! - an instance that looked in another namespace replaces that status only when it found the
//!   Secret and the recorded check did not (`Ready` reason `CredentialsNotFound`): an instance
//!   that does not find the Secret never overwrites the check of one that did, and one that
//!   finds it takes over from one that did not;
//! - between two instances that both find a Secret of that name, each in its own namespace,
//!   the first to write keeps the status (give instances one cluster resource namespace).
//!
//! An instance that leaves the status alone still uses its own check (the registry holds it) and
//! logs it. An `InvalidSpec` status records no namespace: every instance finds the same problem.

use kube::ResourceExt;

use super::AccountObject;
use super::check::Found;
use crate::controller::context::Context;
use crate::controller::error::Result;
use crate::controller::revision::Revision;
use crate::controller::status::{Outcome, set_conditions, write_status};
use crate::crd::AccountStatus;
use crate::crd::conditions::READY;

/// The status a check with `outcome` and `found` gives an object whose status is `old`, at
/// `generation`, having looked for the Secret in `secret_namespace` (`None`: not recorded).
pub(super) fn next_status(
    old: &AccountStatus,
    outcome: &Outcome,
    found: &Found,
    generation: Option<i64>,
    secret_namespace: Option<String>,
) -> AccountStatus {
    let mut conditions = old.conditions.clone();
    set_conditions(&mut conditions, outcome, generation);
    AccountStatus {
        observed_generation: generation,
        conditions,
        scope: found.scope,
        scope_source: found.source,
        key_id: found.key_id,
        sub_account_id: found.sub_account.as_ref().map(|(id, _)| *id),
        sub_account_name: found.sub_account.as_ref().map(|(_, name)| name.clone()),
        secret_namespace,
    }
}

/// True when this instance may replace status `old` with `new` (see the module documentation).
pub(super) fn may_replace(old: &AccountStatus, new: &AccountStatus) -> bool {
    match (&old.secret_namespace, &new.secret_namespace) {
        (Some(theirs), Some(ours)) if theirs != ours => found_secret(new) && !found_secret(old),
        _ => true,
    }
}

/// False when the status's check did not find the credentials Secret.
fn found_secret(status: &AccountStatus) -> bool {
    let ready = crate::crd::conditions::find(&status.conditions, READY);
    ready.is_none_or(|c| c.reason != "CredentialsNotFound")
}

/// Writes the status the check produced (see [`next_status`]) when it differs from the one the
/// object carries and this instance may replace it ([`may_replace`]). The write carries the
/// `resourceVersion` of the copy it was decided on, so a decision made on a stale copy (another
/// instance wrote meanwhile, or this instance's cache has not caught up with its own last write)
/// is refused; it is then made again once on a fresh read. `Ok(false)`: refused twice, the
/// check should be made again.
///
/// Errors: the Kubernetes API's error for the read or the write, but a 409 `Conflict`.
pub(super) async fn write<K: AccountObject>(
    ctx: &Context,
    obj: &K,
    outcome: &Outcome,
    found: &Found,
    secret_namespace: Option<String>,
) -> Result<bool> {
    let api = obj.api(&ctx.kube);
    let name = obj.name_any();
    let generation = obj.meta().generation;
    let mut fresh: Option<K> = None;
    for attempt in 0..2 {
        let copy = fresh.as_ref().unwrap_or(obj);
        if copy.meta().generation != generation {
            // The spec changed meanwhile: the check of the new generation writes.
            return Ok(true);
        }
        let old = copy.account_status().cloned().unwrap_or_default();
        let new = next_status(&old, outcome, found, generation, secret_namespace.clone());
        if new == old {
            return Ok(true);
        }
        if !may_replace(&old, &new) {
            tracing::debug!(
                account = %obj.account_name(),
                "status left to the operator that reads the credentials Secret in namespace {:?}",
                old.secret_namespace.as_deref().unwrap_or_default()
            );
            return Ok(true);
        }
        match write_status(&api, &name, &new, &Revision::of(copy)).await {
            Ok(_) => return Ok(true),
            Err(e) if crate::controller::revision::is_conflict(&e) && attempt == 0 => {
                let Some(current) = api.get_opt(&name).await? else {
                    return Ok(true);
                };
                fresh = Some(current);
            }
            Err(e) if crate::controller::revision::is_conflict(&e) => break,
            Err(e) => return Err(e.into()),
        }
    }
    tracing::debug!(account = %obj.account_name(), "status changed meanwhile; checking again");
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(outcome: Outcome, secret_namespace: Option<&str>) -> AccountStatus {
        next_status(
            &AccountStatus::default(),
            &outcome,
            &Found::default(),
            Some(1),
            secret_namespace.map(str::to_owned),
        )
    }

    fn ready() -> Outcome {
        Outcome::ready("Authenticated", "ok")
    }

    fn stalled(reason: &'static str) -> Outcome {
        Outcome::stalled(reason, "no")
    }

    /// An instance looking in another namespace replaces a status only when it found the
    /// Secret and that status's check did not; the same namespace, an unrecorded one, or a
    /// status without any, are always replaced.
    #[test]
    fn the_instance_that_finds_the_secret_writes() {
        let found_a = status(ready(), Some("ops-a"));
        let unauthorized_a = status(stalled("Unauthorized"), Some("ops-a"));
        let missing_a = status(stalled("CredentialsNotFound"), Some("ops-a"));
        let missing_b = status(stalled("CredentialsNotFound"), Some("ops-b"));
        let found_b = status(ready(), Some("ops-b"));
        let invalid = status(stalled("InvalidSpec"), None);

        assert!(!may_replace(&found_a, &missing_b));
        assert!(!may_replace(&unauthorized_a, &missing_b));
        assert!(!may_replace(&missing_a, &missing_b));
        assert!(may_replace(&missing_b, &found_a));
        assert!(
            !may_replace(&found_a, &found_b),
            "the first finder keeps it"
        );

        assert!(may_replace(&found_a, &missing_a), "its own Secret went");
        assert!(may_replace(&AccountStatus::default(), &missing_b));
        assert!(may_replace(&invalid, &missing_b));
        assert!(may_replace(&found_a, &invalid));
    }
}
