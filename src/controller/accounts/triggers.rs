//! Checks started by a change of a credentials Secret: a metadata-only watch of the Secrets in
//! the namespaces where account Secrets live (no Secret data is received or cached), each change
//! routed to the accounts whose `spec.credentials.secretRef` names that Secret, found in an
//! index by (namespace, Secret name) that the account watches keep (a Secret event costs one
//! lookup, whatever the number of accounts).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use super::AccountObject;
use crate::crd::{Account, ClusterAccount};

/// The namespaces whose Secrets are watched: `None` for all (when every namespace is watched),
/// else each watched namespace and the operator's own.
pub(super) fn secret_namespaces(
    watched: &[String],
    operator_namespace: &str,
) -> Vec<Option<String>> {
    if watched.is_empty() {
        return vec![None];
    }
    let mut namespaces: Vec<String> = watched.to_vec();
    namespaces.push(operator_namespace.to_owned());
    namespaces.sort();
    namespaces.dedup();
    namespaces.into_iter().map(Some).collect()
}

/// A Secret, by namespace and name.
type SecretKey = (String, String);

/// The accounts of kind `K` by the Secret they reference, kept from the events of the watch
/// that fills their cache, with the reflector's contract: a list (`Init`, `InitApply`*,
/// `InitDone`) replaces the whole index once complete, `Apply` moves an account to the Secret
/// it now names, `Delete` removes it.
pub(super) struct SecretIndex<K: AccountObject> {
    /// Where ClusterAccount Secrets live.
    operator_namespace: String,
    by_secret: HashMap<SecretKey, HashSet<ObjectRef<K>>>,
    by_account: HashMap<ObjectRef<K>, SecretKey>,
    /// The list in progress, applied at its `InitDone`.
    listing: Option<Vec<(ObjectRef<K>, SecretKey)>>,
}

impl<K: AccountObject> SecretIndex<K> {
    /// An empty index; ClusterAccount Secrets are in `operator_namespace`.
    pub(super) fn new(operator_namespace: &str) -> Self {
        SecretIndex {
            operator_namespace: operator_namespace.to_owned(),
            by_secret: HashMap::new(),
            by_account: HashMap::new(),
            listing: None,
        }
    }

    fn entry(&self, obj: &K) -> (ObjectRef<K>, SecretKey) {
        let secret = (
            obj.secret_namespace(&self.operator_namespace),
            obj.connection().credentials.secret_ref.name.clone(),
        );
        (ObjectRef::from_obj(obj), secret)
    }

    fn remove(&mut self, account: &ObjectRef<K>) {
        if let Some(secret) = self.by_account.remove(account)
            && let Some(accounts) = self.by_secret.get_mut(&secret)
        {
            accounts.remove(account);
            if accounts.is_empty() {
                self.by_secret.remove(&secret);
            }
        }
    }

    fn insert(&mut self, account: ObjectRef<K>, secret: SecretKey) {
        self.remove(&account);
        self.by_secret
            .entry(secret.clone())
            .or_default()
            .insert(account.clone());
        self.by_account.insert(account, secret);
    }

    /// Follows one event of the accounts' watch.
    pub(super) fn apply(&mut self, event: &watcher::Event<K>) {
        match event {
            watcher::Event::Init => self.listing = Some(Vec::new()),
            watcher::Event::InitApply(obj) => {
                let entry = self.entry(obj);
                self.listing.get_or_insert_with(Vec::new).push(entry);
            }
            watcher::Event::InitDone => {
                self.by_secret.clear();
                self.by_account.clear();
                for (account, secret) in self.listing.take().unwrap_or_default() {
                    self.insert(account, secret);
                }
            }
            watcher::Event::Apply(obj) => {
                let (account, secret) = self.entry(obj);
                self.insert(account, secret);
            }
            watcher::Event::Delete(obj) => self.remove(&ObjectRef::from_obj(obj)),
        }
    }

    /// The accounts that reference Secret `namespace/name`, by namespace and name.
    pub(super) fn accounts(&self, namespace: &str, name: &str) -> Vec<ObjectRef<K>> {
        self.by_secret
            .get(&(namespace.to_owned(), name.to_owned()))
            .map(|accounts| accounts.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// An index shared by the watch that keeps it and the router that reads it.
pub(super) type SharedIndex<K> = Arc<Mutex<SecretIndex<K>>>;

/// A new shared index (see [`SecretIndex::new`]).
pub(super) fn shared_index<K: AccountObject>(operator_namespace: &str) -> SharedIndex<K> {
    Arc::new(Mutex::new(SecretIndex::new(operator_namespace)))
}

/// Routes a Secret's change to the ClusterAccounts (Secret in the operator's namespace) and
/// Accounts (Secret in their namespace) that reference it.
pub(super) struct SecretReferences {
    clusters: SharedIndex<ClusterAccount>,
    accounts: SharedIndex<Account>,
    to_clusters: UnboundedSender<ObjectRef<ClusterAccount>>,
    to_accounts: UnboundedSender<ObjectRef<Account>>,
}

impl SecretReferences {
    /// A router reading the two indexes, and the controllers' receiving ends.
    pub(super) fn channels(
        clusters: SharedIndex<ClusterAccount>,
        accounts: SharedIndex<Account>,
    ) -> (
        SecretReferences,
        UnboundedReceiver<ObjectRef<ClusterAccount>>,
        UnboundedReceiver<ObjectRef<Account>>,
    ) {
        let (to_clusters, cluster_rx) = unbounded();
        let (to_accounts, account_rx) = unbounded();
        let router = SecretReferences {
            clusters,
            accounts,
            to_clusters,
            to_accounts,
        };
        (router, cluster_rx, account_rx)
    }

    /// Triggers the accounts that reference `secret`. A closed channel means that controller
    /// has stopped (shutdown): nothing to do.
    pub(super) fn trigger(&self, secret: &PartialObjectMeta<Secret>) {
        let namespace = secret.namespace().unwrap_or_default();
        let name = secret.name_any();
        let clusters = lookup(&self.clusters, &namespace, &name);
        for account in clusters {
            let _ = self.to_clusters.unbounded_send(account);
        }
        for account in lookup(&self.accounts, &namespace, &name) {
            let _ = self.to_accounts.unbounded_send(account);
        }
    }
}

fn lookup<K: AccountObject>(
    index: &SharedIndex<K>,
    namespace: &str,
    name: &str,
) -> Vec<ObjectRef<K>> {
    index
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .accounts(namespace, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(namespace: &str, name: &str, secret: &str) -> Account {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "mailtarget.co/v1alpha1", "kind": "Account",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"credentials": {"secretRef": {"name": secret}}}
        }))
        .unwrap()
    }

    fn cluster_account(name: &str, secret: &str) -> ClusterAccount {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "mailtarget.co/v1alpha1", "kind": "ClusterAccount",
            "metadata": {"name": name},
            "spec": {"credentials": {"secretRef": {"name": secret}}}
        }))
        .unwrap()
    }

    fn names<K: AccountObject>(
        index: &SecretIndex<K>,
        namespace: &str,
        secret: &str,
    ) -> Vec<String> {
        let mut names: Vec<String> = index
            .accounts(namespace, secret)
            .into_iter()
            .map(|r| format!("{}/{}", r.namespace.unwrap_or_default(), r.name))
            .collect();
        names.sort();
        names
    }

    /// An Account is found by its own namespace and Secret name; a spec naming another Secret
    /// moves it; a deletion removes it; a relist replaces the whole index once complete (an
    /// account gone meanwhile is dropped, the old index serves until then).
    #[test]
    fn accounts_are_found_by_their_secret() {
        use watcher::Event;
        let mut index = SecretIndex::<Account>::new("ops");
        index.apply(&Event::Init);
        index.apply(&Event::InitApply(account("team-a", "one", "mt")));
        index.apply(&Event::InitApply(account("team-a", "two", "mt")));
        index.apply(&Event::InitApply(account("team-b", "three", "mt")));
        assert!(
            names(&index, "team-a", "mt").is_empty(),
            "a list counts once complete"
        );
        index.apply(&Event::InitDone);
        assert_eq!(names(&index, "team-a", "mt"), ["team-a/one", "team-a/two"]);
        assert_eq!(names(&index, "team-b", "mt"), ["team-b/three"]);
        assert!(names(&index, "ops", "mt").is_empty());

        index.apply(&Event::Apply(account("team-a", "two", "other")));
        assert_eq!(names(&index, "team-a", "mt"), ["team-a/one"]);
        assert_eq!(names(&index, "team-a", "other"), ["team-a/two"]);
        index.apply(&Event::Delete(account("team-a", "one", "mt")));
        assert!(names(&index, "team-a", "mt").is_empty());

        index.apply(&Event::Init);
        index.apply(&Event::InitApply(account("team-b", "three", "mt")));
        assert_eq!(names(&index, "team-a", "other"), ["team-a/two"]);
        index.apply(&Event::InitDone);
        assert!(
            names(&index, "team-a", "other").is_empty(),
            "gone from the relist"
        );
        assert_eq!(names(&index, "team-b", "mt"), ["team-b/three"]);
    }

    /// A ClusterAccount's Secret is in the operator's namespace, whatever namespace another
    /// Secret of that name is in.
    #[test]
    fn cluster_accounts_are_found_in_the_operator_namespace() {
        use watcher::Event;
        let mut index = SecretIndex::<ClusterAccount>::new("ops");
        index.apply(&Event::Apply(cluster_account("default", "mt")));
        assert_eq!(names(&index, "ops", "mt"), ["/default"]);
        assert!(names(&index, "team-a", "mt").is_empty());
    }

    /// All namespaces: one cluster-wide watch; a list: each once, the operator's own added.
    #[test]
    fn watched_secret_namespaces() {
        assert_eq!(secret_namespaces(&[], "ops"), vec![None]);
        let listed = secret_namespaces(&["b".into(), "ops".into(), "a".into()], "ops");
        assert_eq!(
            listed,
            vec![Some("a".into()), Some("b".into()), Some("ops".into())]
        );
        assert_eq!(
            secret_namespaces(&["a".into()], "ops"),
            vec![Some("a".into()), Some("ops".into())]
        );
    }
}
