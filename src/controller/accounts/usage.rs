//! Which account a managed resource (SubAccount, ApiKey, SendingDomain) is reconciled through,
//! and what its namespace may do with it, decided from the caches with zero API calls (product
//! design, "Accounts and tenancy"):
//!
//! - `spec.accountRef` names a ClusterAccount (default kind) or an Account of the resource's
//!   namespace; unset, ClusterAccount `default`, which the operator's flags stand in for while
//!   no such object exists.
//! - A ClusterAccount whose `namespaceSelector` matches neither the resource's namespace nor
//!   that of a SubAccount hosting it ([`placement::host_namespace`]: one of another namespace
//!   that lets the resource's namespace in) refuses it: `Stalled`, reason `AccountNotAllowed`,
//!   naming the resource's namespace only, before any call (and whatever the account's
//!   readiness, so a refused namespace learns nothing about the account or the host).
//! - An account that does not exist or whose last check failed: `Reconciling`, reason
//!   `AccountNotReady`, naming the account and its `Ready` reason; the resource is reconciled
//!   again when the account's check changes.
//! - A resource that asks to adopt (annotation `mailtarget.co/adoption-policy`, or an
//!   `external-id` it does not own) through a ClusterAccount whose `adoptionNamespaceSelector`
//!   does not match its namespace: `Stalled`, reason `AdoptionNotAllowed`, before any call.
//!   Resources of an Account's own namespace may adopt through it (whoever made the Account
//!   holds its key); so may every namespace through the `default` built from the operator's
//!   flags (it has no selectors: the behaviour before accounts existed).
//! - A SubAccount needs a company key: on an account whose key is a sub account key, `Stalled`,
//!   reason `AccountScopeInsufficient`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use kube::runtime::reflector::ObjectRef;

use super::registry::{AccountName, AccountRegistry, PENDING, Resolved};
use crate::controller::cache::AccountCache;
use crate::crd::{AccountRefKind, AccountReference, ClusterAccount, KeyScope};
use crate::engine::placement;

/// Longest wait, at start-up, for the ClusterAccount, Account and Namespace caches' first lists
/// before `default` falls back to the operator's flags (the object wins over the flags when it
/// exists), and, in a reconcile, for the first check of an account just created.
const FIRST_LIST_WAIT: Duration = Duration::from_secs(5);

/// Reason of a resource that uses an existing object through an account that does not let its
/// namespace adopt (a ClusterAccount's `spec.adoptionNamespaceSelector`).
pub const ADOPTION_NOT_ALLOWED: &str = "AdoptionNotAllowed";

/// The account a resource is reconciled through, as [`AccountRegistry::usage`] found it.
#[derive(Clone)]
pub struct Usage {
    /// Its name.
    pub name: AccountName,
    /// Its client and cached lists.
    pub service: Arc<AccountCache>,
    /// Whether resources of the namespace may adopt existing objects through it.
    pub may_adopt: bool,
    /// Built from the operator's flags (`--api-key`), not from a ClusterAccount object.
    pub from_flags: bool,
    /// The scope of its key, when declared or found (see [`KeyScope`]).
    pub scope: Option<KeyScope>,
}

/// Why a resource may not be reconciled through the account it names: the `Ready` condition's
/// reason and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// `AccountNotReady`, `AccountNotAllowed`, `AccountScopeInsufficient` or
    /// `AdoptionNotAllowed`.
    pub reason: &'static str,
    /// For people: the account, the namespace, and what to do.
    pub message: String,
    /// True when only a change to the resource, the account or the namespace helps
    /// (`Stalled`); false for a wait (`Reconciling`: the account is not ready yet).
    pub stalled: bool,
}

impl Refusal {
    /// A wait: `AccountNotReady`, reconciled again once the account is ready.
    fn waiting(message: String) -> Self {
        let (reason, stalled) = ("AccountNotReady", false);
        Refusal {
            reason,
            message,
            stalled,
        }
    }

    /// A refusal only a change helps (`Stalled`).
    fn stalled(reason: &'static str, message: String) -> Self {
        Refusal {
            reason,
            message,
            stalled: true,
        }
    }
}

/// What a resource asks of its account besides calling with it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Needs {
    /// The resource asks to adopt an existing object (adoption-policy annotation, or an
    /// external-id it does not own).
    pub adoption: bool,
    /// The resource's kind needs a company key (a SubAccount: sub accounts are created and
    /// changed with the company's key).
    pub company_key: bool,
    /// The resource is being deleted: an Account being deleted still serves its cleanup (see
    /// [`super::in_use`]).
    pub cleanup: bool,
}

impl AccountRegistry {
    /// The namespace of the SubAccount that hosts `obj` in its account
    /// ([`placement::host_namespace`]), as the caches show it: the SubAccount `subs` holds is
    /// in another namespace, and its `spec.allowedNamespaces` selects `obj`'s (in the Namespace
    /// cache). `None` otherwise, or before the caches are listed.
    pub fn host_of<K: crate::engine::ManagedResource>(
        &self,
        obj: &K,
        subs: Option<&kube::runtime::reflector::Store<crate::crd::SubAccount>>,
    ) -> Option<String> {
        let reference = obj.sub_account_ref()?;
        let own = obj.meta().namespace.as_deref().unwrap_or_default();
        let namespace = reference.namespace_or(own);
        let sub = subs.and_then(|s| s.get(&ObjectRef::new(&reference.name).within(namespace)));
        self.hosted_by(obj, sub.as_deref())
    }

    /// [`Self::host_of`] with the SubAccount `obj` references at hand (`sub`: `None` when it
    /// does not exist).
    pub fn hosted_by<K: crate::engine::ManagedResource>(
        &self,
        obj: &K,
        sub: Option<&crate::crd::SubAccount>,
    ) -> Option<String> {
        let own = obj.meta().namespace.as_deref().unwrap_or_default();
        let lets_in = |_: &str, _: &str| {
            let selector = sub.and_then(|s| s.spec.allowed_namespaces.as_ref());
            selector.is_some_and(|s| self.namespace_selected(s, own) == Some(true))
        };
        placement::host_namespace(own, obj.sub_account_ref(), lets_in).map(str::to_owned)
    }
}

/// True when `obj` asks to take over an object it does not own (`owned`: the id it owns): an
/// adoption-policy annotation while it owns nothing, or an `external-id` annotation naming
/// another object than its own. A resource that owns its object is not adopting, whatever
/// annotations it still carries (a resource that adopted before its account restricted
/// adoption keeps its object). Where the account refuses adoption, the policy is ignored
/// for lookups, so an owned object that is gone is never replaced by adopting another.
pub fn asks_to_adopt<K: crate::engine::ManagedResource>(obj: &K, owned: Option<i64>) -> bool {
    let policy = crate::crd::AdoptionPolicy::annotated(obj.meta()).is_some();
    let external = obj.external_id();
    (policy && owned.is_none()) || external.is_some_and(|e| owned != Some(e))
}

/// The name `account_ref` gives, for a resource of `namespace` (unset: ClusterAccount
/// `default`; an Account is always the resource's namespace's own).
pub fn account_name(namespace: &str, account_ref: Option<&AccountReference>) -> AccountName {
    match account_ref {
        None => AccountName::default_account(),
        Some(r) => match r.kind {
            AccountRefKind::ClusterAccount => AccountName::Cluster(r.name.clone()),
            AccountRefKind::Account => AccountName::Namespaced {
                namespace: namespace.to_owned(),
                name: r.name.clone(),
            },
        },
    }
}

impl AccountRegistry {
    /// The account a resource of `namespace` with `account_ref` is reconciled through, and
    /// whether it may be, given what the resource `needs` (see the module documentation);
    /// `host`: the namespace of the SubAccount hosting it ([`Self::host_of`]), which the
    /// account's `namespaceSelector` may select instead of `namespace`. Adoption is asked of
    /// `namespace`.
    /// Makes no API call; waits at most `FIRST_LIST_WAIT` once, for the first lists of the
    /// ClusterAccount, Account and Namespace caches, and at most as long for the first check
    /// of an account just created.
    ///
    /// Errors: a [`Refusal`] saying why not.
    pub async fn usage(
        &self,
        (namespace, host): (&str, Option<&str>),
        account_ref: Option<&AccountReference>,
        needs: Needs,
    ) -> Result<Usage, Refusal> {
        let name = account_name(namespace, account_ref);
        self.await_first_lists().await;
        let cluster_object = match &name {
            AccountName::Cluster(n) => self
                .cluster_accounts
                .get()
                .and_then(|s| s.get(&ObjectRef::new(n))),
            AccountName::Namespaced { .. } => None,
        };
        if let Some(account) = &cluster_object
            && let Some(refusal) = self.selector_refusal(&name, account, (namespace, host))
        {
            return Err(refusal);
        }
        let handle = match self.resolve_checked(&name, needs.cleanup).await {
            Resolved::Ready(handle) => handle,
            Resolved::NotReady { reason } if reason == super::registry::DELETING => {
                return Err(Refusal::waiting(format!(
                    "{name} is being deleted (it waits for the resources that use it): nothing new is done through it. Delete this resource, or make it again naming another account"
                )));
            }
            Resolved::NotReady { reason } => {
                return Err(Refusal::waiting(format!(
                    "{name} is not ready ({reason}): see its status; reconciled again once it is"
                )));
            }
            Resolved::NotFound => {
                return Err(Refusal::waiting(format!(
                    "{name} does not exist: create it, or name another account in spec.accountRef"
                )));
            }
        };
        if needs.company_key && handle.scope != Some(KeyScope::Company) {
            let what = match handle.scope {
                Some(_) => "holds a sub account key",
                None => {
                    "holds a key whose scope is unknown (declare spec.scope: Company on the account if it is a company key)"
                }
            };
            return Err(Refusal::stalled(
                "AccountScopeInsufficient",
                format!(
                    "{name} {what}; a SubAccount needs a company account's key. Name a company account in spec.accountRef"
                ),
            ));
        }
        let may_adopt = self.may_adopt_with(cluster_object.as_deref(), namespace);
        if needs.adoption && !may_adopt {
            return Err(Refusal::stalled(
                ADOPTION_NOT_ALLOWED,
                format!(
                    "{name} does not let resources of namespace \"{namespace}\" adopt existing objects (its spec.adoptionNamespaceSelector); nothing is called. Remove the mailtarget.co/adoption-policy and mailtarget.co/external-id annotations to create a new object, or ask the platform team"
                ),
            ));
        }
        Ok(Usage {
            name,
            service: handle.service,
            may_adopt,
            from_flags: handle.from_flags,
            scope: handle.scope,
        })
    }

    /// True when resources of `namespace` may adopt existing objects through account `name`: a
    /// ClusterAccount's `spec.adoptionNamespaceSelector` decides
    /// ([`Self::namespace_may_adopt`]); an Account (its namespace's own key) and the flags'
    /// `default` (no selectors) let them.
    pub fn may_adopt_through(&self, name: &AccountName, namespace: &str) -> bool {
        let AccountName::Cluster(n) = name else {
            return true;
        };
        let account = (self.cluster_accounts.get()).and_then(|s| s.get(&ObjectRef::new(n)));
        self.may_adopt_with(account.as_deref(), namespace)
    }

    /// [`Self::may_adopt_through`] for the ClusterAccount object already at hand (`None`: an
    /// Account, or the flags' `default`).
    fn may_adopt_with(&self, account: Option<&ClusterAccount>, namespace: &str) -> bool {
        account.is_none_or(|account| self.namespace_may_adopt(account, namespace))
    }

    /// False when the account `obj` names refuses it outright, so that it can hold no claim
    /// against other resources (see [`crate::controller::claims`]): neither its namespace nor
    /// that of a SubAccount hosting it (`subs`: the SubAccounts, [`Self::host_of`]) may use the
    /// ClusterAccount, or it asks to adopt (annotation, or an external-id it does not own)
    /// where its namespace may not. A resource refused so never writes, and must not keep
    /// another namespace's resource from the object it claims.
    pub fn may_claim<K>(
        &self,
        obj: &K,
        subs: Option<&kube::runtime::reflector::Store<crate::crd::SubAccount>>,
    ) -> bool
    where
        K: crate::engine::ManagedResource,
    {
        use kube::ResourceExt;
        let namespace = obj.namespace().unwrap_or_default();
        let AccountName::Cluster(name) = account_name(&namespace, obj.account_ref()) else {
            return true;
        };
        let Some(account) = self
            .cluster_accounts
            .get()
            .and_then(|s| s.get(&ObjectRef::new(&name)))
        else {
            return true;
        };
        // Not known yet: no verdict, so no claim is dropped.
        if !self.namespace_cached(&namespace) {
            return true;
        }
        let host = self.host_of(obj, subs);
        if !self.may_use(&account, &namespace, host.as_deref()) {
            return false;
        }
        let owned = obj.recorded_id();
        !asks_to_adopt(obj, owned) || self.namespace_may_adopt(&account, &namespace)
    }

    /// True when ClusterAccount `account` lets a resource of `namespace`, hosted by a
    /// SubAccount of namespace `host` if any ([`Self::host_of`]), use it: its
    /// `namespaceSelector` selects either.
    fn may_use(&self, account: &ClusterAccount, namespace: &str, host: Option<&str>) -> bool {
        self.namespace_may_use(account, namespace)
            || host.is_some_and(|h| self.namespace_may_use(account, h))
    }

    /// Why ClusterAccount `account` (named `name`) refuses a resource of `namespace` (hosted by
    /// a SubAccount of namespace `host`, if any) by its selectors, before anything else is
    /// looked at: a wait while `namespace` is not in the cache (a selector cannot be evaluated
    /// on it yet), else `AccountNotAllowed` when its `namespaceSelector` matches neither
    /// namespace. The refusal names `namespace` only: the resource learns nothing of the host.
    fn selector_refusal(
        &self,
        name: &AccountName,
        account: &crate::crd::ClusterAccount,
        (namespace, host): (&str, Option<&str>),
    ) -> Option<Refusal> {
        let has_selector = account.spec.namespace_selector.is_some()
            || account.spec.adoption_namespace_selector.is_some();
        if has_selector && !self.namespace_cached(namespace) {
            return Some(Refusal::waiting(format!(
                "namespace \"{namespace}\" is not in the operator's cache yet, so {name}'s namespace selectors cannot be evaluated; nothing is called"
            )));
        }
        (!self.may_use(account, namespace, host)).then(|| Refusal::stalled("AccountNotAllowed", format!(
                "{name} does not allow resources of namespace \"{namespace}\" (its spec.namespaceSelector); nothing is called. Ask the platform team to allow the namespace, or name another account in spec.accountRef"
            )))
    }

    /// [`AccountRegistry::resolve`], waiting (at most [`FIRST_LIST_WAIT`]) while the account
    /// exists but its first check has not been recorded yet (`Pending`: at start-up, or just
    /// created), so that resources do not flip to `AccountNotReady` for the moment a check takes.
    async fn resolve_checked(&self, name: &AccountName, cleanup: bool) -> Resolved {
        let deadline = tokio::time::Instant::now() + FIRST_LIST_WAIT;
        loop {
            let notified = self.checks.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            match self.resolve_for(name, cleanup) {
                Resolved::NotReady { reason }
                    if reason == PENDING && tokio::time::Instant::now() < deadline =>
                {
                    let _ = tokio::time::timeout_at(deadline, notified).await;
                }
                other => return other,
            }
        }
    }

    /// Waits, once, for the account caches' first lists, or for their kinds to be found not
    /// served (the account CRDs not installed), and for the Namespace cache's first list (at
    /// most [`FIRST_LIST_WAIT`]), so that a resource reconciled at start-up neither finds its
    /// account missing nor uses the flags' `default` in place of the object.
    async fn await_first_lists(&self) {
        if self.first_lists_awaited.load(Ordering::Relaxed) {
            return;
        }
        let both = async {
            if let Some(cache) = self.cluster_accounts.get() {
                cache.settled().await;
            }
            if let Some(cache) = self.accounts.get() {
                cache.settled().await;
            }
            if let Some(cache) = self.namespaces.get() {
                cache.listed().await;
            }
        };
        let _ = tokio::time::timeout(FIRST_LIST_WAIT, both).await;
        self.first_lists_awaited.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unset is ClusterAccount `default`; an Account is the resource's namespace's.
    #[test]
    fn names_from_references() {
        assert_eq!(account_name("team-a", None), AccountName::default_account());
        let r = |kind, name: &str| AccountReference {
            kind,
            name: name.into(),
        };
        assert_eq!(
            account_name("team-a", Some(&r(AccountRefKind::ClusterAccount, "shared"))),
            AccountName::Cluster("shared".into())
        );
        assert_eq!(
            account_name("team-a", Some(&r(AccountRefKind::Account, "own"))),
            AccountName::Namespaced {
                namespace: "team-a".into(),
                name: "own".into()
            }
        );
    }

    /// A namespace the cache does not hold yet is a wait, not a refusal: its labels are not
    /// known. A cached namespace outside the selector is refused; one inside it is not.
    #[test]
    fn an_uncached_namespace_waits_before_any_refusal() {
        use k8s_openapi::api::core::v1::Namespace;
        use kube::core::PartialObjectMeta;
        use kube::runtime::watcher::Event;
        let registry = AccountRegistry::new(None, std::time::Duration::from_secs(300));
        let (store, mut writer) =
            crate::controller::reflected::reflected::<PartialObjectMeta<Namespace>>();
        for (name, tenant) in [("team-a", "true"), ("team-b", "false")] {
            let mut meta = PartialObjectMeta::<Namespace>::default();
            meta.metadata.name = Some(name.into());
            meta.metadata.labels = Some([("tenant".to_string(), tenant.to_string())].into());
            writer.apply_watcher_event(&Event::Apply(meta));
        }
        let _ = registry.namespaces.set(store);
        let account: crate::crd::ClusterAccount = serde_json::from_value(serde_json::json!({
            "apiVersion": "mailtarget.co/v1alpha1", "kind": "ClusterAccount",
            "metadata": {"name": "shared"},
            "spec": {"credentials": {"secretRef": {"name": "mt"}},
                     "namespaceSelector": {"matchLabels": {"tenant": "true"}}}
        }))
        .unwrap();
        let name = AccountName::Cluster("shared".into());
        let reason_for = |ns: &str, host: Option<&str>| {
            registry
                .selector_refusal(&name, &account, (ns, host))
                .map(|r| (r.reason, r.stalled))
        };
        let reason = |ns: &str| reason_for(ns, None);
        assert_eq!(reason("team-a"), None);
        assert_eq!(reason("team-b"), Some(("AccountNotAllowed", true)));
        assert_eq!(reason("new-team"), Some(("AccountNotReady", false)));
        // Hosted by a SubAccount of a selected namespace (`host`), a resource may use the
        // account; a host the selector does not select (or does not know) helps nothing, and
        // the refusal names the resource's own namespace only.
        assert_eq!(reason_for("team-b", Some("team-a")), None);
        for host in ["team-b", "not-cached"] {
            let refused = reason_for("team-b", Some(host));
            assert_eq!(refused, Some(("AccountNotAllowed", true)), "{host}");
        }
        assert_eq!(
            reason_for("new-team", Some("team-a")),
            Some(("AccountNotReady", false))
        );
        let hosted = registry.selector_refusal(&name, &account, ("team-b", Some("hidden")));
        let message = hosted.unwrap().message;
        assert!(
            message.contains("\"team-b\"") && !message.contains("hidden"),
            "{message}"
        );
    }

    /// Without the account CRDs (their kinds not served: the first lists fail with 404, as in a
    /// cluster upgraded with `helm upgrade`), a reconcile at start-up does not wait out
    /// `FIRST_LIST_WAIT`: it goes on once both watches have found their kind missing. An
    /// Account is then not found (none can exist), not pending (each reconcile naming one would
    /// wait for a check that cannot come).
    #[tokio::test]
    async fn unserved_account_kinds_hold_no_reconcile() {
        use crate::controller::reflected::reflected;
        use futures::StreamExt;
        use kube::runtime::watcher;
        fn not_served<K>() -> impl futures::Stream<Item = watcher::Result<watcher::Event<K>>> {
            let failed = crate::controller::reflected::tests::not_served_error();
            futures::stream::iter([Err(failed)]).chain(futures::stream::pending())
        }
        let registry = AccountRegistry::new(None, std::time::Duration::from_secs(300));
        let (clusters, clusters_writer) = reflected::<crate::crd::ClusterAccount>();
        let (accounts, accounts_writer) = reflected::<crate::crd::Account>();
        let _ = registry.cluster_accounts.set(clusters);
        let _ = registry.accounts.set(accounts);
        let mut clusters_watch = Box::pin(clusters_writer.reflect(not_served()));
        let mut accounts_watch = Box::pin(accounts_writer.reflect(not_served()));
        assert!(clusters_watch.next().await.is_some_and(|e| e.is_err()));
        assert!(accounts_watch.next().await.is_some_and(|e| e.is_err()));
        let waker = futures::task::noop_waker();
        let mut first_lists = std::pin::pin!(registry.await_first_lists());
        let waited = first_lists
            .as_mut()
            .poll(&mut std::task::Context::from_waker(&waker));
        assert!(waited.is_ready(), "no wait for kinds that are not served");
        let account = AccountName::Namespaced {
            namespace: "team-a".into(),
            name: "own".into(),
        };
        assert!(matches!(registry.resolve(&account), Resolved::NotFound));
    }

    /// A reconcile waiting for the account caches' first lists is woken when they arrive, while
    /// others wait for them too: kube-runtime's controller holds its runner on the same store,
    /// and every `resolve` reads it in passing. (kube's `Store::wait_until_ready` wakes only
    /// the last of its waiters: the reconcile then waited for its whole `FIRST_LIST_WAIT`.)
    #[tokio::test]
    async fn each_waiter_learns_of_the_first_lists() {
        use crate::controller::reflected::tests::Woken;
        use futures::StreamExt;
        use kube::runtime::watcher::Event;
        use std::task::{Context, Poll};
        let registry = AccountRegistry::new(None, std::time::Duration::from_secs(300));
        let (clusters, writer) =
            crate::controller::reflected::reflected::<crate::crd::ClusterAccount>();
        let _ = registry.cluster_accounts.set(clusters.clone());
        let (to_reflector, events) = futures::channel::mpsc::unbounded();
        let mut watch = Box::pin(writer.reflect(events));

        let (waker, reconcile) = Woken::waker();
        let mut first_lists = std::pin::pin!(registry.await_first_lists());
        let mut cx = Context::from_waker(&waker);
        assert!(first_lists.as_mut().poll(&mut cx).is_pending());
        let (controller_waker, controller) = Woken::waker();
        let mut held = std::pin::pin!(clusters.wait_until_ready());
        let _ = held
            .as_mut()
            .poll(&mut Context::from_waker(&controller_waker));
        let _ = registry.resolve(&AccountName::default_account());

        for event in [Event::Init, Event::InitDone] {
            to_reflector.unbounded_send(Ok(event)).unwrap();
            watch.next().await;
        }
        assert!(
            reconcile.woken(),
            "the waiting reconcile is woken by the first list"
        );
        assert!(controller.woken(), "kube's controller is woken too");
        assert_eq!(first_lists.as_mut().poll(&mut cx), Poll::Ready(()));
    }
}
