//! What starts a reconcile: the changes of a resource that are inputs to it ([`own_changes`]),
//! and changes to other objects, routed from the one watch of that object's kind after its cache
//! holds the change (as `Controller::owns` and `Controller::watches` would, without a watch of
//! their own; kube-runtime's shared streams would do so too but never deliver a deletion).

use std::hash::{DefaultHasher, Hash, Hasher};

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender};
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Predicate, predicates, watcher};
use kube::{Resource, ResourceExt};

use super::claims::Claimant;
use super::managed::Managed;
use crate::crd::SubAccount;
use crate::crd::{ANNOTATION_CREATE_PENDING, ANNOTATION_EXTERNAL_ID};

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

/// The receiving end of a controller's trigger channel (for `Controller::reconcile_on`).
pub(super) type Trigger<K> = UnboundedReceiver<ObjectRef<K>>;

/// Sends each of `objects` to the controller at the other end of `to`. A closed channel means
/// that controller has stopped (shutdown): nothing to do.
pub(super) fn start<K: Resource>(
    to: &UnboundedSender<ObjectRef<K>>,
    objects: impl IntoIterator<Item = ObjectRef<K>>,
) {
    for object in objects {
        let _ = to.unbounded_send(object);
    }
}

/// The managed Secret `event` touched, when its owners have work: it was deleted, or its value
/// no longer is as the operator wrote it ([`super::secrets::as_written`] with `digest`). The
/// operator's own Secret writes start nothing: the reconcile that wrote one goes on to write
/// the status (a reconcile started by it would run on a cached copy older than that status, and
/// read the object again for nothing).
pub(super) fn altered<'a>(
    digest: &super::secrets::ValueDigest,
    event: &'a Result<watcher::Event<Secret>, watcher::Error>,
) -> Option<&'a Secret> {
    match event {
        Ok(watcher::Event::Delete(secret)) => Some(secret),
        Ok(watcher::Event::Apply(secret) | watcher::Event::InitApply(secret)) => {
            (!super::secrets::as_written(digest, secret)).then_some(secret)
        }
        _ => None,
    }
}

/// The owners of kind `K` of `secret`, from its owner references, as `Controller::owns` maps
/// them.
pub(super) fn owners<K: Resource<DynamicType = ()>>(secret: &Secret) -> Vec<ObjectRef<K>> {
    let namespace = secret.namespace();
    (secret.owner_references().iter())
        .filter_map(|o| ObjectRef::from_owner_ref(namespace.as_deref(), o, ()))
        .collect()
}

/// The resources of `store` whose `spec.subAccountRef` names `sub` (in its namespace or
/// another): a resource waiting for its sub account's id or credential reconciles once the
/// SubAccount controller's cache holds it.
pub(super) fn referencing<K: Managed>(store: &Store<K>, sub: &SubAccount) -> Vec<ObjectRef<K>> {
    let namespace = sub.namespace().unwrap_or_default();
    let name = sub.name_any();
    let names_sub = |r: &K| {
        let own = r.namespace().unwrap_or_default();
        r.sub_account_ref()
            .is_some_and(|s| s.name == name && s.namespace_or(&own) == namespace)
    };
    (store.state_filter(names_sub).iter())
        .map(|r| ObjectRef::from_obj(r.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::secrets::DIGEST_ANNOTATION;
    use crate::crd::{ApiKey, ApiKeyStatus, Ownership, SendingDomain};
    use k8s_openapi::ByteString;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn key() -> ApiKey {
        serde_yaml::from_str(
            "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: k\n  namespace: ns\n  generation: 1\n  annotations: {note: a}\nspec: {name: k, secretName: s}\n",
        )
        .unwrap()
    }

    /// A managed Secret's deletion, or a value other than the operator wrote, starts its
    /// owner's reconcile (so that it is written again at once), which kube-runtime's shared
    /// streams would not do (they deliver no deletion). The operator's own write does not.
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
        for event in [
            watcher::Event::Delete(secret(b"value")),
            watcher::Event::Apply(secret(b"tampered")),
            watcher::Event::InitApply(secret(b"tampered")),
        ] {
            let event = Ok(event);
            let secret = altered(&digest, &event).expect("starts its owners");
            assert_eq!(
                owners::<ApiKey>(secret),
                [ObjectRef::new("ci").within("ns")]
            );
            assert!(
                owners::<SubAccount>(secret).is_empty(),
                "no SubAccount named"
            );
            assert!(owners::<SendingDomain>(secret).is_empty());
        }
        for event in [
            watcher::Event::Apply(secret(b"value")),
            watcher::Event::InitApply(secret(b"value")),
            watcher::Event::InitDone,
        ] {
            assert!(
                altered(&digest, &Ok(event)).is_none(),
                "the operator's own write"
            );
        }
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
