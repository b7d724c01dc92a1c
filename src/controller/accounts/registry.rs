//! The accounts the operator can call the service with, by name: each checked ClusterAccount and
//! Account with its API client (which carries the account's request budget), and the
//! ClusterAccount `default` built from the operator's flags while no such object exists.
//!
//! The accounts controller fills it after each check; later steps give every managed resource
//! the client of the account it names through [`AccountRegistry::resolve`]. Whether an object
//! still exists is read from the controllers' caches, so an account deleted (or never created)
//! resolves as such even before its entry is pruned.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::core::{PartialObjectMeta, Selector, SelectorExt};
use kube::runtime::reflector::ObjectRef;

use super::super::cache::AccountCache;
use crate::api::{Client as ApiClient, ClientConfig};
use crate::controller::common::Locked;
use crate::controller::reflected::Reflected;
use crate::crd::{Account, ClusterAccount, KeyScope};

/// `Ready`'s reason in [`Resolved::NotReady`] before an account's first check, or while its
/// kind's cache has not listed yet.
pub const PENDING: &str = "Pending";

/// `Ready`'s reason in [`Resolved::NotReady`], for new work, of an Account being deleted (see
/// [`super::in_use`]).
pub const DELETING: &str = "Deleting";

pub use crate::crd::account::DEFAULT_ACCOUNT;

/// Names one account.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AccountName {
    /// A ClusterAccount, by name.
    Cluster(String),
    /// An Account, by namespace and name.
    Namespaced {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

impl AccountName {
    /// The ClusterAccount `default`.
    pub fn default_account() -> Self {
        AccountName::Cluster(DEFAULT_ACCOUNT.into())
    }
}

impl std::fmt::Display for AccountName {
    /// `ClusterAccount "name"` or `Account "namespace/name"`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AccountName::Cluster(name) => write!(f, "ClusterAccount \"{name}\""),
            AccountName::Namespaced { namespace, name } => {
                write!(f, "Account \"{namespace}/{name}\"")
            }
        }
    }
}

/// An account ready to be called with.
#[derive(Clone)]
pub struct AccountHandle {
    /// The account's client (its key and addresses, and its request budget) with its cached
    /// lists, shared by every resource managed through it (kept while key, addresses and budget
    /// stay the same).
    pub service: Arc<AccountCache>,
    /// The key's scope, when known.
    pub scope: Option<KeyScope>,
    /// True for the `default` account built from the operator's flags (no object).
    pub from_flags: bool,
}

/// What [`AccountRegistry::resolve`] found.
#[derive(Clone)]
pub enum Resolved {
    /// The account exists and its last check succeeded.
    Ready(AccountHandle),
    /// The account exists but is not usable now: its `Ready` condition says why.
    NotReady {
        /// `Ready`'s reason, e.g. `Unauthorized` (`Pending` before the first check).
        reason: String,
    },
    /// No such account.
    NotFound,
}

/// The outcome of one check of an account object, as the registry keeps it.
#[derive(Clone)]
pub(super) struct Checked {
    /// UID of the object checked (an object deleted and created again is another account).
    pub uid: String,
    /// The digest of what built the client (key, addresses, budget): the client is kept, with
    /// its budget, while it stays the same.
    pub fingerprint: [u8; 32],
    /// The client built for it, when credentials could be read, with the account's cached
    /// lists.
    pub service: Option<Arc<AccountCache>>,
    /// `Ready`'s reason after the check.
    pub reason: String,
    /// Whether the check succeeded.
    pub ready: bool,
    /// The scope found or declared.
    pub scope: Option<KeyScope>,
    /// `metadata.generation` of the object checked (a changed selector or scope reconciles the
    /// resources using the account).
    pub generation: Option<i64>,
    /// Whether resources may call with the client: the check succeeded, or it failed for a
    /// passing cause (the service unreachable, 5xx, 429) after an earlier success with this
    /// same client (set by [`AccountRegistry::record`]), so one failed periodic check does
    /// not stop every resource of the account.
    pub usable: bool,
    /// The account cache and key scope of the last check of this object that made it usable,
    /// kept through later failed checks: what cleanups call with while the Account is being
    /// deleted (its credentials Secret may be gone with its namespace; see
    /// [`super::in_use`]). Set by [`AccountRegistry::record`].
    pub last_good: Option<(Arc<AccountCache>, Option<KeyScope>)>,
    /// The object was being deleted when checked (its resources are reconciled again when this
    /// changes, so that new work through it is refused).
    pub deleting: bool,
}

/// The accounts by name (see the module documentation).
pub struct AccountRegistry {
    /// The `default` account from the operator's flags, used while no ClusterAccount `default`
    /// exists.
    from_flags: Option<Arc<AccountCache>>,
    checked: RwLock<HashMap<AccountName, Checked>>,
    pub(super) cluster_accounts: OnceLock<Reflected<ClusterAccount>>,
    pub(super) accounts: OnceLock<Reflected<Account>>,
    pub(super) namespaces: OnceLock<Reflected<PartialObjectMeta<Namespace>>>,
    /// The operator's own namespace (ClusterAccount Secrets live there).
    pub(super) operator_namespace: OnceLock<String>,
    /// Settings of every account's client besides key, addresses and budget: timeout, CA
    /// bundle, retries, request observer (from the operator's flags, set when it runs).
    pub(super) template: OnceLock<ClientConfig>,
    /// How old an account's cached list may be (the resync interval).
    list_max_age: std::time::Duration,
    /// Set once a reconcile waited for the account caches' first lists (see
    /// [`AccountRegistry::usage`]).
    pub(super) first_lists_awaited: std::sync::atomic::AtomicBool,
    /// UIDs of objects already warned about.
    warned: Mutex<HashSet<String>>,
    /// The controllers told about account changes ([`AccountRegistry::dependents`]).
    pub(super) subscribers: super::dependents::Subscribers,
    /// Woken at each recorded check, and when an account kind is found not served (see
    /// [`AccountRegistry::usage`]).
    pub(super) checks: tokio::sync::Notify,
    /// What the accounts controller keeps of each account's last authenticated read.
    pub(super) memo: super::memo::CheckMemo,
}

impl AccountRegistry {
    /// A registry whose `default` account, while no ClusterAccount `default` exists, is
    /// `from_flags` (the operator's `--api-key` and addresses; a company key by the flag's
    /// definition); accounts' cached lists are read again when older than `list_max_age` (the
    /// resync interval).
    pub fn new(from_flags: Option<Arc<AccountCache>>, list_max_age: std::time::Duration) -> Self {
        AccountRegistry {
            from_flags,
            checked: RwLock::default(),
            cluster_accounts: OnceLock::new(),
            accounts: OnceLock::new(),
            namespaces: OnceLock::new(),
            operator_namespace: OnceLock::new(),
            template: OnceLock::new(),
            list_max_age,
            first_lists_awaited: std::sync::atomic::AtomicBool::new(false),
            warned: Mutex::default(),
            subscribers: Default::default(),
            checks: tokio::sync::Notify::new(),
            memo: super::memo::CheckMemo::default(),
        }
    }

    /// The settings account clients start from (key and addresses replaced per account): the
    /// operator's, once it runs; defaults before.
    pub(super) fn client_template(&self) -> ClientConfig {
        self.template
            .get()
            .cloned()
            .unwrap_or_else(|| ClientConfig::with_default_urls(String::new().into()))
    }

    /// The account's client with fresh (empty) cached lists.
    pub(super) fn service(&self, client: ApiClient) -> Arc<AccountCache> {
        Arc::new(AccountCache::new(client, self.list_max_age))
    }

    /// Logs, once per object, that ClusterAccount `default` (UID `uid`, client `client`) is used
    /// instead of the operator's flags: a warning when the two differ (key or addresses; the
    /// keys compared through [`ApiClient::derived_key`], never themselves), at `info` when they
    /// are the same (the chart creates the object from the values it gives the flags).
    pub(super) fn note_default_object(&self, uid: &str, client: &ApiClient) {
        let Some(flags) = self.from_flags.as_ref().map(|s| s.client()) else {
            return;
        };
        let mut warned = self.warned.locked();
        if !warned.insert(uid.to_owned()) {
            return;
        }
        const PURPOSE: &str = "mailtarget-operator/compare-default-account/v1";
        let same = flags.api_url() == client.api_url()
            && flags.transmission_url() == client.transmission_url()
            && flags.derived_key(PURPOSE) == client.derived_key(PURPOSE);
        if same {
            tracing::info!(
                "ClusterAccount \"default\" holds the same key and addresses as the operator's flags"
            );
        } else {
            tracing::warn!(
                "ClusterAccount \"default\" differs from the operator's flags (--api-key, --api-url, --transmission-url): resources without spec.accountRef use the object, not the flags"
            );
        }
    }

    /// The operator's own namespace, once the operator runs.
    pub fn operator_namespace(&self) -> Option<&str> {
        self.operator_namespace.get().map(String::as_str)
    }

    /// The account `name` names, as the caches and the last checks know it, for new work.
    pub fn resolve(&self, name: &AccountName) -> Resolved {
        self.resolve_for(name, false)
    }

    /// The account `name` names, for new work or (`cleanup`) for a resource's cleanup. An
    /// Account being deleted (held by its in-use finalizer, see [`super::in_use`]) is
    /// `NotReady` with reason [`DELETING`] for new work; cleanups get its last client that
    /// passed a check, even after a failed check (its Secret deleted with its namespace).
    pub fn resolve_for(&self, name: &AccountName, cleanup: bool) -> Resolved {
        let (uid, deleting) = match name {
            AccountName::Cluster(n) => (
                self.cluster_accounts
                    .get()
                    .and_then(|s| s.get(&ObjectRef::new(n)))
                    .map(|o| o.uid()),
                false,
            ),
            AccountName::Namespaced { namespace, name } => {
                let account = self
                    .accounts
                    .get()
                    .and_then(|s| s.get(&ObjectRef::new(name).within(namespace)));
                (
                    account.as_ref().map(|o| o.uid()),
                    account.is_some_and(|o| o.metadata.deletion_timestamp.is_some()),
                )
            }
        };
        let Some(uid) = uid else {
            // Absent from a cache that has not listed yet: not known to be absent. A kind not
            // served (its CRD not installed) has no objects: `default` is then the flags'.
            let listed = match name {
                AccountName::Cluster(_) => listed(self.cluster_accounts.get()),
                AccountName::Namespaced { .. } => listed(self.accounts.get()),
            };
            if !listed {
                return Resolved::NotReady {
                    reason: PENDING.into(),
                };
            }
            return match (&self.from_flags, name) {
                (Some(service), AccountName::Cluster(n)) if n == DEFAULT_ACCOUNT => {
                    Resolved::Ready(AccountHandle {
                        service: service.clone(),
                        scope: Some(KeyScope::Company),
                        from_flags: true,
                    })
                }
                _ => Resolved::NotFound,
            };
        };
        let checked = self.checked.read().unwrap_or_else(|p| p.into_inner());
        match checked.get(name) {
            Some(_) if deleting && !cleanup => Resolved::NotReady {
                reason: DELETING.into(),
            },
            Some(c) if Some(&c.uid) == uid.as_ref() => {
                let usable = match (&c.service, c.usable) {
                    (Some(service), true) => Some((service, c.scope)),
                    _ if deleting => c.last_good.as_ref().map(|(s, scope)| (s, *scope)),
                    _ => None,
                };
                match usable {
                    Some((service, scope)) => Resolved::Ready(AccountHandle {
                        service: service.clone(),
                        scope,
                        from_flags: false,
                    }),
                    None => Resolved::NotReady {
                        reason: c.reason.clone(),
                    },
                }
            }
            _ => Resolved::NotReady {
                reason: PENDING.into(),
            },
        }
    }

    /// True when resources of `namespace` may use ClusterAccount `account`: its
    /// `spec.namespaceSelector` matches the namespace's labels (unset: every namespace). False
    /// while the namespace is not in the cache, or the selector is invalid.
    pub fn namespace_may_use(&self, account: &ClusterAccount, namespace: &str) -> bool {
        match &account.spec.namespace_selector {
            None => true,
            Some(selector) => self.selector_matches(selector, namespace),
        }
    }

    /// True when resources of `namespace` may adopt existing objects through ClusterAccount
    /// `account`: its `spec.adoptionNamespaceSelector` matches (unset: the operator's own
    /// namespace only).
    pub fn namespace_may_adopt(&self, account: &ClusterAccount, namespace: &str) -> bool {
        match &account.spec.adoption_namespace_selector {
            None => self.operator_namespace() == Some(namespace),
            Some(selector) => self.selector_matches(selector, namespace),
        }
    }

    fn selector_matches(
        &self,
        selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
        namespace: &str,
    ) -> bool {
        let Ok(selector) = Selector::try_from(selector.clone()) else {
            return false;
        };
        let Some(ns) = self
            .namespaces
            .get()
            .and_then(|s| s.get(&ObjectRef::new(namespace)))
        else {
            return false;
        };
        selector.matches(ns.labels())
    }

    /// Whether `selector` matches the labels of `namespace` (a SubAccount's
    /// `spec.allowedNamespaces`); `None` while the namespace is not in the cache. An invalid
    /// selector matches nothing.
    pub fn namespace_selected(
        &self,
        selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
        namespace: &str,
    ) -> Option<bool> {
        self.namespace_cached(namespace)
            .then(|| self.selector_matches(selector, namespace))
    }

    /// True when `namespace` is in the Namespace cache (selectors can be evaluated for it).
    pub(super) fn namespace_cached(&self, namespace: &str) -> bool {
        self.namespaces
            .get()
            .is_some_and(|s| s.get(&ObjectRef::new(namespace)).is_some())
    }

    /// The last check of `name`, if it was of the object with `uid`.
    pub(super) fn checked(&self, name: &AccountName, uid: &str) -> Option<Checked> {
        let checked = self.checked.read().unwrap_or_else(|p| p.into_inner());
        checked.get(name).filter(|c| c.uid == uid).cloned()
    }

    /// Records the check of `name`; the resources using it are reconciled again when what it
    /// gives them changed (ready or not, or another client).
    pub(super) fn record(&self, name: AccountName, mut entry: Checked) {
        let mut checked = self.checked.write().unwrap_or_else(|p| p.into_inner());
        let previous = checked.get(&name);
        let same_client = |p: &Checked| match (&p.service, &entry.service) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        entry.usable = entry.ready
            || (entry.reason == "Unreachable"
                && previous.is_some_and(|p| p.uid == entry.uid && p.usable && same_client(p)));
        entry.last_good = match (&entry.service, entry.usable) {
            (Some(service), true) => Some((service.clone(), entry.scope)),
            _ => previous
                .filter(|p| p.uid == entry.uid)
                .and_then(|p| p.last_good.clone()),
        };
        let gives = |c: &Checked| {
            (
                c.uid.clone(),
                c.usable,
                c.service.as_ref().map(Arc::as_ptr),
                c.scope,
                c.generation,
                c.deleting,
            )
        };
        let changed = previous.map(gives) != Some(gives(&entry));
        checked.insert(name.clone(), entry);
        drop(checked);
        self.checks.notify_waiters();
        if changed {
            self.changed(&name);
        }
    }

    /// Forgets `name` (its object was deleted); the resources using it are reconciled again.
    pub(super) fn forget(&self, name: &AccountName) {
        let mut checked = self.checked.write().unwrap_or_else(|p| p.into_inner());
        checked.remove(name);
        drop(checked);
        self.memo.forget(name);
        self.changed(name);
    }

    /// True when the operator was given flags for the `default` account.
    pub(super) fn has_flags_default(&self) -> bool {
        self.from_flags.is_some()
    }
}

/// True when `cache` is unset (no account watch runs: every name is absent), has listed, or
/// found its kind not served (no object of it can exist).
fn listed<K: kube::Resource + Clone + 'static>(cache: Option<&Reflected<K>>) -> bool
where
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    cache.is_none_or(Reflected::is_settled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ClientConfig;

    fn client() -> ApiClient {
        ApiClient::new(ClientConfig::new(
            "http://127.0.0.1:9".parse().unwrap(),
            "http://127.0.0.1:9/v1".parse().unwrap(),
            "k".to_string().into(),
        ))
        .unwrap()
    }

    /// Without a ClusterAccount `default`, the flags' client answers for it (as a company key);
    /// no other name resolves; with no flags, `default` is not found either.
    #[test]
    fn flags_stand_in_for_a_missing_default() {
        let max_age = std::time::Duration::from_secs(300);
        let flags = Arc::new(AccountCache::new(client(), max_age));
        let registry = AccountRegistry::new(Some(flags), max_age);
        match registry.resolve(&AccountName::default_account()) {
            Resolved::Ready(h) => {
                assert!(h.from_flags);
                assert_eq!(h.scope, Some(KeyScope::Company));
            }
            _ => panic!("default from flags expected"),
        }
        assert!(matches!(
            registry.resolve(&AccountName::Cluster("other".into())),
            Resolved::NotFound
        ));
        assert!(matches!(
            AccountRegistry::new(None, std::time::Duration::from_secs(300))
                .resolve(&AccountName::default_account()),
            Resolved::NotFound
        ));
    }

    fn cluster_account(spec: serde_json::Value) -> ClusterAccount {
        let mut spec = spec;
        spec["credentials"] = serde_json::json!({"secretRef": {"name": "mt"}});
        serde_json::from_value(serde_json::json!({
            "apiVersion": "mailtarget.co/v1alpha1", "kind": "ClusterAccount",
            "metadata": {"name": "shared"}, "spec": spec
        }))
        .unwrap()
    }

    /// Selectors are evaluated on the cached Namespace labels: unset `namespaceSelector` lets
    /// every namespace use the account, unset `adoptionNamespaceSelector` only the operator's;
    /// a namespace the cache does not hold matches no selector.
    #[test]
    fn namespace_selectors() {
        use kube::runtime::watcher::Event;
        let registry = AccountRegistry::new(None, std::time::Duration::from_secs(300));
        let (store, mut writer) =
            crate::controller::reflected::reflected::<PartialObjectMeta<Namespace>>();
        for (name, tenant) in [
            ("ops", None),
            ("team-a", Some("true")),
            ("team-b", Some("false")),
        ] {
            let mut meta = PartialObjectMeta::<Namespace>::default();
            meta.metadata.name = Some(name.into());
            if let Some(t) = tenant {
                meta.metadata.labels = Some([("tenant".to_string(), t.to_string())].into());
            }
            writer.apply_watcher_event(&Event::Apply(meta));
        }
        let _ = registry.namespaces.set(store);
        let _ = registry.operator_namespace.set("ops".into());

        let open = cluster_account(serde_json::json!({}));
        assert!(registry.namespace_may_use(&open, "team-b"));
        assert!(registry.namespace_may_use(&open, "not-cached"));
        assert!(registry.namespace_may_adopt(&open, "ops"));
        assert!(!registry.namespace_may_adopt(&open, "team-a"));

        let tenants = cluster_account(serde_json::json!({
            "namespaceSelector": {"matchLabels": {"tenant": "true"}},
            "adoptionNamespaceSelector": {"matchExpressions": [
                {"key": "tenant", "operator": "Exists"}
            ]}
        }));
        assert!(registry.namespace_may_use(&tenants, "team-a"));
        assert!(!registry.namespace_may_use(&tenants, "team-b"));
        assert!(!registry.namespace_may_use(&tenants, "ops"));
        assert!(!registry.namespace_may_use(&tenants, "not-cached"));
        assert!(registry.namespace_may_adopt(&tenants, "team-b"));
        assert!(!registry.namespace_may_adopt(&tenants, "ops"));
    }

    /// Names print as users write them.
    #[test]
    fn names_display_kind_and_name() {
        assert_eq!(
            AccountName::default_account().to_string(),
            "ClusterAccount \"default\""
        );
        let n = AccountName::Namespaced {
            namespace: "team-a".into(),
            name: "billing".into(),
        };
        assert_eq!(n.to_string(), "Account \"team-a/billing\"");
    }
}
