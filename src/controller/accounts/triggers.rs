//! Checks started by a change of a credentials Secret: a metadata-only watch of the Secrets in
//! the namespaces where account Secrets live (no Secret data is received or cached), each change
//! routed to the accounts whose `spec.credentials.secretRef` names that Secret.

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::crd::{Account, AccountKind, ClusterAccount};

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

/// Routes a Secret's change to the ClusterAccounts (Secret in the operator's namespace) and
/// Accounts (Secret in their namespace) that reference it.
pub(super) struct SecretReferences {
    clusters: Store<ClusterAccount>,
    accounts: Store<Account>,
    operator_namespace: String,
    to_clusters: UnboundedSender<ObjectRef<ClusterAccount>>,
    to_accounts: UnboundedSender<ObjectRef<Account>>,
}

impl SecretReferences {
    /// A router reading the accounts from the two caches, and the controllers' receiving ends.
    pub(super) fn channels(
        clusters: Store<ClusterAccount>,
        accounts: Store<Account>,
        operator_namespace: &str,
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
            operator_namespace: operator_namespace.to_owned(),
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
        let names = |a: &dyn AccountKind| a.connection().credentials.secret_ref.name == name;
        if namespace == self.operator_namespace {
            for account in self.clusters.state() {
                if names(account.as_ref()) {
                    let _ = self
                        .to_clusters
                        .unbounded_send(ObjectRef::from_obj(account.as_ref()));
                }
            }
        }
        for account in self.accounts.state() {
            if account.namespace().as_deref() == Some(namespace.as_str()) && names(account.as_ref())
            {
                let _ = self
                    .to_accounts
                    .unbounded_send(ObjectRef::from_obj(account.as_ref()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
