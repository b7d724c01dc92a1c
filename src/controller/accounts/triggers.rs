//! Checks started by a change of a credentials Secret: a metadata-only watch of the Secrets in
//! the namespaces where account Secrets live (no Secret data is received or cached), each change
//! routed to the accounts whose `spec.credentials.secretRef` names that Secret, found in the
//! accounts' reflector caches.

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};

use super::AccountObject;

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

/// The accounts in `cache` whose `spec.credentials.secretRef` names `secret` (a ClusterAccount's
/// Secret is in `operator_namespace`, an Account's in its own namespace). A Secret event costs
/// one pass over the accounts of the kind (kube's `Store::state_filter`, cloning only matches).
pub(super) fn naming<K: AccountObject>(
    cache: &Store<K>,
    secret: &PartialObjectMeta<Secret>,
    operator_namespace: &str,
) -> Vec<ObjectRef<K>> {
    let (namespace, name) = (secret.namespace().unwrap_or_default(), secret.name_any());
    let names_secret = |a: &K| {
        a.connection().credentials.secret_ref.name == name
            && a.secret_namespace(operator_namespace) == namespace
    };
    (cache.state_filter(names_secret).iter())
        .map(|a| ObjectRef::from_obj(a.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{Account, ClusterAccount};

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

    fn secret(namespace: &str, name: &str) -> PartialObjectMeta<Secret> {
        let mut meta = PartialObjectMeta::<Secret>::default();
        meta.metadata.namespace = Some(namespace.into());
        meta.metadata.name = Some(name.into());
        meta
    }

    fn names<K: AccountObject>(objects: Vec<K>, namespace: &str, name: &str) -> Vec<String> {
        let (cache, mut writer) = kube::runtime::reflector::store::<K>();
        for o in objects {
            writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(o));
        }
        let mut names: Vec<String> = naming(&cache, &secret(namespace, name), "ops")
            .into_iter()
            .map(|r| format!("{}/{}", r.namespace.unwrap_or_default(), r.name))
            .collect();
        names.sort();
        names
    }

    /// An Account is found by its own namespace and Secret name.
    #[test]
    fn accounts_are_found_by_their_secret() {
        let accounts = || {
            vec![
                account("team-a", "one", "mt"),
                account("team-a", "two", "mt"),
                account("team-a", "three", "other"),
                account("team-b", "four", "mt"),
            ]
        };
        assert_eq!(
            names(accounts(), "team-a", "mt"),
            ["team-a/one", "team-a/two"]
        );
        assert_eq!(names(accounts(), "team-b", "mt"), ["team-b/four"]);
        assert_eq!(names(accounts(), "team-a", "other"), ["team-a/three"]);
        assert!(names(accounts(), "ops", "mt").is_empty());
    }

    /// A ClusterAccount's Secret is in the operator's namespace, whatever namespace another
    /// Secret of that name is in.
    #[test]
    fn cluster_accounts_are_found_in_the_operator_namespace() {
        let clusters = || vec![cluster_account("default", "mt")];
        assert_eq!(names(clusters(), "ops", "mt"), ["/default"]);
        assert!(names(clusters(), "team-a", "mt").is_empty());
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
