//! What starts a reconcile: the changes of a resource that are inputs to it ([`own_changes`]),
//! and changes to other objects, routed from the one watch of that object's kind after its cache
//! holds the change (as `Controller::owns` and `Controller::watches` would, without a watch of
//! their own; kube-runtime's shared streams would do so too but never deliver a deletion).

use std::hash::{DefaultHasher, Hash, Hasher};

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Predicate, predicates, watcher};
use kube::{Resource, ResourceExt};

use super::claims::Claimant;
use super::managed::Managed;
use crate::crd::{ANNOTATION_CREATE_PENDING, ANNOTATION_EXTERNAL_ID};
use crate::crd::{ApiKey, SendingDomain, SubAccount};

/// The changes of a managed resource that start its reconcile, as a kube-runtime predicate (for
/// `WatchStreamExt::predicate_filter`): its generation (the spec; the API server also bumps it
/// when a deletion starts), its finalizers, its `deletionTimestamp`, and the `mailtarget.co/`
/// annotations a user sets (pause, adoption policy, an external id other than the one the
/// resource owns). Nothing else does, the operator's own writes least of all: its status (the
/// reconcile's output), its pending-create marker and the external id it records after a create
/// (both written by a reconcile that goes on itself; a reconcile they started would run on a
/// cached copy older than that reconcile's last write, and read the service for nothing). A
/// reconcile after a requeue or a trigger can still find such an older copy;
/// [`super::revision`] makes that safe.
pub(super) fn own_changes<K: Resource + Claimant>() -> impl Predicate<K> {
    predicates::generation::<K>
        .combine(predicates::finalizers::<K>)
        .combine(deleting::<K>)
        .combine(operator_annotations::<K>)
}

fn hash(value: &impl Hash) -> Option<u64> {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    Some(hasher.finish())
}

fn deleting<K: Resource>(obj: &K) -> Option<u64> {
    hash(&obj.meta().deletion_timestamp.is_some())
}

fn operator_annotations<K: Resource + Claimant>(obj: &K) -> Option<u64> {
    let recorded = obj.recorded_id().map(|id| id.to_string());
    let ours: Vec<(&String, &String)> = obj
        .annotations()
        .iter()
        .filter(|(k, v)| {
            k.starts_with("mailtarget.co/")
                && k.as_str() != ANNOTATION_CREATE_PENDING
                && !(k.as_str() == ANNOTATION_EXTERNAL_ID && Some(*v) == recorded.as_ref())
        })
        .collect();
    hash(&ours)
}

/// The object a watch event applied or deleted (`None` for list boundaries and errors): what
/// starts the reconciles of the objects that depend on it.
pub(super) fn touched<K>(event: &Result<watcher::Event<K>, watcher::Error>) -> Option<&K> {
    match event {
        Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o) | watcher::Event::Delete(o)) => {
            Some(o)
        }
        _ => None,
    }
}

/// Routes a managed Secret's change to the controller of its owner's kind, as `Controller::owns`
/// would (every owner reference of one of the three kinds).
pub(super) struct SecretOwners {
    sub_accounts: UnboundedSender<ObjectRef<SubAccount>>,
    api_keys: UnboundedSender<ObjectRef<ApiKey>>,
    sending_domains: UnboundedSender<ObjectRef<SendingDomain>>,
}

/// The receiving ends of [`SecretOwners`], one per kind.
pub(super) type Trigger<K> = UnboundedReceiver<ObjectRef<K>>;

impl SecretOwners {
    pub(super) fn channels() -> (
        SecretOwners,
        Trigger<SubAccount>,
        Trigger<ApiKey>,
        Trigger<SendingDomain>,
    ) {
        let (sub_accounts, subs) = unbounded();
        let (api_keys, keys) = unbounded();
        let (sending_domains, domains) = unbounded();
        let owners = SecretOwners {
            sub_accounts,
            api_keys,
            sending_domains,
        };
        (owners, subs, keys, domains)
    }

    /// Starts the reconciles of the owners of the Secret `event` touched, when they have work:
    /// the Secret was deleted, or its value no longer is as the operator wrote it
    /// ([`super::secrets::as_written`] with `digest`). The operator's own Secret writes start
    /// nothing: the reconcile that wrote one goes on to write the status (a reconcile started by
    /// it would run on a cached copy older than that status, and read the object again for
    /// nothing).
    pub(super) fn route(
        &self,
        digest: &super::secrets::ValueDigest,
        event: &Result<watcher::Event<Secret>, watcher::Error>,
    ) {
        match event {
            Ok(watcher::Event::Delete(secret)) => self.trigger(secret),
            Ok(watcher::Event::Apply(secret) | watcher::Event::InitApply(secret))
                if !super::secrets::as_written(digest, secret) =>
            {
                self.trigger(secret)
            }
            _ => {}
        }
    }

    fn trigger(&self, secret: &Secret) {
        let namespace = secret.namespace().unwrap_or_default();
        for owner in secret.owner_references() {
            if !owner.api_version.starts_with("mailtarget.co/") {
                continue;
            }
            let name = owner.name.as_str();
            // A closed channel means that controller has stopped (shutdown): nothing to do.
            match owner.kind.as_str() {
                "SubAccount" => {
                    let _ = self
                        .sub_accounts
                        .unbounded_send(ObjectRef::new(name).within(&namespace));
                }
                "ApiKey" => {
                    let _ = self
                        .api_keys
                        .unbounded_send(ObjectRef::new(name).within(&namespace));
                }
                "SendingDomain" => {
                    let _ = self
                        .sending_domains
                        .unbounded_send(ObjectRef::new(name).within(&namespace));
                }
                _ => {}
            }
        }
    }
}

/// Routes a SubAccount's change to the ApiKeys and SendingDomains whose `spec.subAccountRef`
/// names it (in its namespace or another): a resource waiting for its sub account's id or
/// credential reconciles once the SubAccount controller's cache holds it.
pub(super) struct Referencing {
    keys: Store<ApiKey>,
    domains: Store<SendingDomain>,
    api_keys: UnboundedSender<ObjectRef<ApiKey>>,
    sending_domains: UnboundedSender<ObjectRef<SendingDomain>>,
}

impl Referencing {
    /// A router reading the resources from `keys` and `domains`, and the receiving ends of the
    /// ApiKey and SendingDomain controllers.
    pub(super) fn channel(
        keys: Store<ApiKey>,
        domains: Store<SendingDomain>,
    ) -> (Referencing, Trigger<ApiKey>, Trigger<SendingDomain>) {
        let (api_keys, keys_rx) = unbounded();
        let (sending_domains, domains_rx) = unbounded();
        let router = Referencing {
            keys,
            domains,
            api_keys,
            sending_domains,
        };
        (router, keys_rx, domains_rx)
    }

    pub(super) fn trigger(&self, sub: &SubAccount) {
        // A closed channel means that controller has stopped (shutdown).
        for key in referencing(&self.keys, sub) {
            let _ = self.api_keys.unbounded_send(key);
        }
        for domain in referencing(&self.domains, sub) {
            let _ = self.sending_domains.unbounded_send(domain);
        }
    }
}

/// The resources of `store` whose `spec.subAccountRef` names `sub`.
fn referencing<K: Managed>(store: &Store<K>, sub: &SubAccount) -> Vec<ObjectRef<K>> {
    let namespace = sub.namespace().unwrap_or_default();
    let name = sub.name_any();
    store
        .state()
        .into_iter()
        .filter(|r| {
            let own = r.namespace().unwrap_or_default();
            K::sub_account_ref(r.as_ref())
                .is_some_and(|s| s.name == name && s.namespace_or(&own) == namespace)
        })
        .map(|r| ObjectRef::from_obj(r.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::secrets::DIGEST_ANNOTATION;
    use crate::crd::{ApiKeyStatus, Ownership};
    use k8s_openapi::ByteString;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn key() -> ApiKey {
        serde_yaml::from_str(
            "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: k\n  namespace: ns\n  generation: 1\n  annotations: {note: a}\nspec: {name: k, secretName: s}\n",
        )
        .unwrap()
    }

    /// A managed Secret's deletion, or a value other than the operator wrote, starts its
    /// owner's reconcile (so that it is written again at once): the reason this router exists,
    /// as kube-runtime's shared streams deliver no deletion. The operator's own write does not.
    #[test]
    fn a_deleted_or_altered_secret_triggers_its_owner() {
        let digest = super::super::secrets::ValueDigest::new(b"k");
        let secret = |value: &[u8]| {
            let mut s: Secret = serde_yaml::from_str(
                "metadata:\n  name: ci-key\n  namespace: ns\n  ownerReferences:\n  - {apiVersion: mailtarget.co/v1alpha1, kind: ApiKey, name: ci, uid: u1}\n  - {apiVersion: v1, kind: ConfigMap, name: other, uid: u2}\n",
            )
            .unwrap();
            let annotation = (DIGEST_ANNOTATION.to_string(), digest.of(b"value"));
            s.metadata.annotations = Some([annotation].into());
            s.data = Some([("apiKey".into(), ByteString(value.to_vec()))].into());
            s
        };
        let (owners, mut subs, mut keys, mut domains) = SecretOwners::channels();
        for event in [
            watcher::Event::Delete(secret(b"value")),
            watcher::Event::Apply(secret(b"tampered")),
            watcher::Event::InitApply(secret(b"tampered")),
        ] {
            owners.route(&digest, &Ok(event));
            let routed = keys.try_recv().expect("routed");
            assert_eq!(routed, ObjectRef::new("ci").within("ns"));
        }
        for event in [
            watcher::Event::Apply(secret(b"value")),
            watcher::Event::InitApply(secret(b"value")),
            watcher::Event::InitDone,
        ] {
            owners.route(&digest, &Ok(event));
            assert!(keys.try_recv().is_err(), "the operator's own write");
        }
        assert!(subs.try_recv().is_err(), "no SubAccount named");
        assert!(domains.try_recv().is_err(), "no SendingDomain named");
    }

    /// A status write, or any other annotation, starts no reconcile; the spec (generation), the
    /// finalizers, a deletion and each `mailtarget.co/` annotation do.
    #[test]
    fn only_inputs_start_a_reconcile() {
        let predicate = own_changes::<ApiKey>();
        let before = predicate.hash_property(&key());
        let same = |change: &dyn Fn(&mut ApiKey)| {
            let mut k = key();
            change(&mut k);
            predicate.hash_property(&k) == before
        };
        assert!(same(&|k| {
            k.status = Some(Default::default());
            k.metadata.resource_version = Some("9".into());
        }));
        assert!(same(&|k| {
            k.annotations_mut().insert("note".into(), "b".into());
        }));
        assert!(!same(&|k| k.metadata.generation = Some(2)));
        assert!(!same(&|k| k
            .finalizers_mut()
            .push("mailtarget.co/finalizer".into())));
        assert!(!same(&|k| {
            k.metadata.deletion_timestamp = Some(Time(Default::default()));
        }));
        // The operator's own identity writes: the pending-create marker, and the external id
        // of the object the status owns.
        assert!(same(&|k| {
            k.annotations_mut()
                .insert("mailtarget.co/create-pending".into(), "x".into());
        }));
        let owning = |k: &mut ApiKey| {
            k.status = Some(ApiKeyStatus {
                id: Some(7),
                ownership: Some(Ownership::Owned),
                ..Default::default()
            });
        };
        assert!(same(&|k| {
            owning(k);
            k.annotations_mut()
                .insert("mailtarget.co/external-id".into(), "7".into());
        }));
        assert!(
            !same(&|k| {
                owning(k);
                k.annotations_mut()
                    .insert("mailtarget.co/external-id".into(), "8".into());
            }),
            "another object named by a user"
        );
        for annotation in [
            "mailtarget.co/paused",
            "mailtarget.co/adoption-policy",
            "mailtarget.co/external-id",
        ] {
            assert!(
                !same(&|k| {
                    k.annotations_mut().insert(annotation.into(), "x".into());
                }),
                "{annotation}"
            );
        }
    }
}
