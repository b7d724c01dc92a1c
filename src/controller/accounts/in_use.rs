//! In-use protection of `Account` objects (as Kubernetes protects a PersistentVolumeClaim a Pod
//! uses with `kubernetes.io/pvc-protection`, and Crossplane a ProviderConfig with its usages):
//! while managed resources that still hold the operator's finalizer name an Account in
//! `spec.accountRef`, the Account carries the finalizer [`IN_USE_FINALIZER`], so deleting it (or
//! its whole namespace) leaves it in place until those resources are gone. Their cleanups go
//! through it meanwhile: a terminating Account is not checked again, and the registry gives
//! cleanups (only) its last client that passed a check, even once its credentials Secret is gone
//! (deleted with the namespace). New work is refused (`AccountNotReady`, reason `Deleting`).
//!
//! The finalizer is added when the caches show a first user, and removed once there is none,
//! confirmed by a list of the three managed kinds in the Account's namespace at the API server
//! (other instances, with other `--label-selector`s, may manage resources this one does not
//! cache). An Account nothing uses carries no finalizer, so one is left behind only when the
//! operator goes while resources still use the Account (docs/helm.md says how to remove it).
//! A first user can have its object created at the service just before the finalizer lands: an
//! Account deleted in that moment goes at once, and that user's deletion waits for it. ClusterAccounts are not protected: their Secrets live in the operator's
//! namespace, which deleting a tenant's namespace does not touch; a resource whose
//! ClusterAccount is deleted waits for it (`AccountNotReady`) with its finalizer in place.

use std::sync::Mutex;

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, RemoveOperation, TestOperation};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};

use super::registry::AccountName;
use super::usage::account_name;
use crate::controller::claims::{Claimant, Claims};
use crate::controller::common::Locked;
use crate::controller::context::Context;
use crate::controller::error::Result;
use crate::controller::namespaces::Watchable;
use crate::crd::{Account, ApiKey, FINALIZER, SendingDomain, SubAccount};

/// The finalizer an `Account` carries while managed resources use it (see the module
/// documentation).
pub const IN_USE_FINALIZER: &str = "mailtarget.co/in-use";

/// How many users a message names before it says "and N more".
const NAMED: usize = 5;

/// The managed resources that use `account`, as `Kind namespace/name`, sorted: those that name
/// it and still hold [`FINALIZER`] (their cleanup may call through it).
pub(super) fn cached_users(claims: &Claims, account: &AccountName) -> Vec<String> {
    let mut users = Vec::new();
    users_in(SubAccount::store(claims), account, &mut users);
    users_in(ApiKey::store(claims), account, &mut users);
    users_in(SendingDomain::store(claims), account, &mut users);
    users.sort();
    users
}

fn users_in<K: Claimant>(
    store: Option<&kube::runtime::reflector::Store<K>>,
    account: &AccountName,
    users: &mut Vec<String>,
) {
    let Some(store) = store else { return };
    for r in store.state() {
        if uses(r.as_ref(), account) {
            users.push(shown(r.as_ref()));
        }
    }
}

/// True when `r` names `account` and holds the operator's finalizer.
fn uses<K: Claimant>(r: &K, account: &AccountName) -> bool {
    r.finalizers().iter().any(|f| f == FINALIZER)
        && account_name(&r.namespace().unwrap_or_default(), r.account_ref()) == *account
}

fn shown<K: Claimant>(r: &K) -> String {
    format!(
        "{} {}/{}",
        K::kind(&()),
        r.namespace().unwrap_or_default(),
        r.name_any()
    )
}

/// The users of Account `account` (in `namespace`) the API server lists: every instance's, not
/// only this one's caches.
///
/// Errors: the Kubernetes API's.
async fn listed_users(
    ctx: &Context,
    namespace: &str,
    account: &AccountName,
) -> Result<Vec<String>> {
    let mut users = Vec::new();
    list_users::<SubAccount>(ctx, namespace, account, &mut users).await?;
    list_users::<ApiKey>(ctx, namespace, account, &mut users).await?;
    list_users::<SendingDomain>(ctx, namespace, account, &mut users).await?;
    users.sort();
    Ok(users)
}

async fn list_users<K>(
    ctx: &Context,
    namespace: &str,
    account: &AccountName,
    users: &mut Vec<String>,
) -> Result<()>
where
    K: Claimant + Watchable,
{
    let api: Api<K> = Api::namespaced(ctx.kube.clone(), namespace);
    let list = api.list(&ListParams::default()).await?;
    users.extend(list.items.iter().filter(|r| uses(*r, account)).map(shown));
    Ok(())
}

/// `users` for people: the first [`NAMED`], then how many more.
pub(super) fn describe(users: &[String]) -> String {
    let mut text = users
        .iter()
        .take(NAMED)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if users.len() > NAMED {
        text.push_str(&format!(" and {} more", users.len() - NAMED));
    }
    text
}

/// Puts [`IN_USE_FINALIZER`] on `account` while it has users and takes it off once it has none
/// (see the module documentation). Returns the users found. A JSON patch whose `test` fails
/// (the finalizers changed since this copy) is refused (422) and tried again soon (the caller
/// requeues the account).
///
/// Errors: the Kubernetes API's.
pub(super) async fn protect(ctx: &Context, account: &Account) -> Result<Vec<String>> {
    let name = super::AccountObject::account_name(account);
    let namespace = account.namespace().unwrap_or_default();
    let held = account.finalizers().iter().any(|f| f == IN_USE_FINALIZER);
    let deleting = account.meta().deletion_timestamp.is_some();
    // The API server's list where it decides: before the finalizer goes, and for the status
    // of a deleting Account (the same for every instance, whatever its label selector).
    let mut users = cached_users(&ctx.claims, &name);
    if (users.is_empty() && held) || deleting {
        users = listed_users(ctx, &namespace, &name).await?;
    }
    // JSON patches with a `test` of the finalizers they change (as kube-runtime's finalizer
    // helper writes its own): the decision rests on the users listed, not on this copy's
    // version, so a status written meanwhile does not refuse it.
    let current = account.finalizers();
    let at = |tokens: &[&str]| PointerBuf::from_tokens(tokens.iter().copied());
    let test = |tokens: &[&str], value: serde_json::Value| {
        PatchOperation::Test(TestOperation {
            path: at(tokens),
            value,
        })
    };
    let operations = match (users.is_empty(), held) {
        // A finalizer cannot be added to an object being deleted (nor is one needed: it would
        // have been added when its first user came).
        (false, false) if !deleting => {
            // Absent (as kube-apiserver stores an empty list) or a list, tested as it is.
            let (tested, added, value) = match account.meta().finalizers.is_none() {
                true => (
                    serde_json::Value::Null,
                    at(&["metadata", "finalizers"]),
                    serde_json::json!([IN_USE_FINALIZER]),
                ),
                false => (
                    serde_json::json!(current),
                    at(&["metadata", "finalizers", "-"]),
                    serde_json::json!(IN_USE_FINALIZER),
                ),
            };
            Some(vec![
                test(&["metadata", "finalizers"], tested),
                PatchOperation::Add(AddOperation { path: added, value }),
            ])
        }
        (true, true) => (current.iter().position(|f| f == IN_USE_FINALIZER)).map(|i| {
            let index = i.to_string();
            let path = ["metadata", "finalizers", index.as_str()];
            vec![
                test(&path, serde_json::json!(IN_USE_FINALIZER)),
                PatchOperation::Remove(RemoveOperation { path: at(&path) }),
            ]
        }),
        _ => None,
    };
    if let Some(operations) = operations {
        let api: Api<Account> = Api::namespaced(ctx.kube.clone(), &namespace);
        api.patch(
            &account.name_any(),
            &PatchParams::default(),
            &Patch::Json::<()>(json_patch::Patch(operations)),
        )
        .await?;
        tracing::debug!(account = %name, users = users.len(), "in-use protection changed");
    }
    Ok(users)
}

/// Starts reconciles of Accounts whose in-use protection may have to change, from the events
/// of the managed kinds' watches: a resource holding the operator's finalizer that names an
/// Account without [`IN_USE_FINALIZER`] (a first user); a resource gone, or being deleted
/// without the operator's finalizer, that names one with it (perhaps the last user); and the
/// end of each (re)list of a kind (a list replaces the cache without per-object events), which
/// starts every cached Account. Other events start nothing, so a busy namespace costs its
/// Account no reconcile.
#[derive(Clone)]
pub struct InUseTrigger {
    tx: UnboundedSender<ObjectRef<Account>>,
    accounts: std::sync::Arc<Mutex<Option<kube::runtime::reflector::Store<Account>>>>,
}

impl InUseTrigger {
    /// A trigger and the stream of Accounts it starts (for the Account controller's
    /// `reconcile_on`).
    pub fn channel() -> (Self, UnboundedReceiver<ObjectRef<Account>>) {
        let (tx, rx) = unbounded();
        let trigger = InUseTrigger {
            tx,
            accounts: Default::default(),
        };
        (trigger, rx)
    }

    /// Gives the trigger the Account cache it reads (set once the accounts controller runs;
    /// events before that start nothing, and the end of each kind's first list starts every
    /// Account then cached).
    pub(super) fn read_from(&self, store: kube::runtime::reflector::Store<Account>) {
        *self.accounts.locked() = Some(store);
    }

    /// Looks at one event of a managed kind's watch (see the type's documentation); the
    /// event has reached the kind's cache already.
    pub fn note<K: Claimant>(&self, event: &watcher::Result<watcher::Event<K>>) {
        let (r, gone) = match event {
            Ok(watcher::Event::Apply(r)) => (r, false),
            Ok(watcher::Event::Delete(r)) => (r, true),
            Ok(watcher::Event::InitDone) => {
                let accounts = self.accounts.locked();
                for account in accounts.as_ref().map(|s| s.state()).unwrap_or_default() {
                    let _ = self
                        .tx
                        .unbounded_send(ObjectRef::from_obj(account.as_ref()));
                }
                return;
            }
            _ => return,
        };
        // Most resources name a ClusterAccount: they cost no lock.
        let namespace = r.namespace().unwrap_or_default();
        let AccountName::Namespaced { namespace, name } = account_name(&namespace, r.account_ref())
        else {
            return;
        };
        let reference = ObjectRef::new(&name).within(&namespace);
        let accounts = self.accounts.locked();
        let Some(account) = accounts.as_ref().and_then(|s| s.get(&reference)) else {
            return;
        };
        let protected = account.finalizers().iter().any(|f| f == IN_USE_FINALIZER);
        let held = !gone && r.finalizers().iter().any(|f| f == FINALIZER);
        let leaving = gone || r.meta().deletion_timestamp.is_some();
        if (held && !protected) || (!held && leaving && protected) {
            let _ = self.tx.unbounded_send(reference);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Messages name a few users and count the rest.
    #[test]
    fn users_are_named_then_counted() {
        let users: Vec<String> = (1..=7).map(|i| format!("ApiKey team/k{i}")).collect();
        assert_eq!(describe(&users[..2]), "ApiKey team/k1, ApiKey team/k2");
        let text = describe(&users);
        assert!(text.ends_with("ApiKey team/k5 and 2 more"), "{text}");
    }
}
