//! Reconciles started by a change to another object than the resource itself, routed from the
//! one watch of that object's kind after its cache holds the change (as `Controller::owns` and
//! `Controller::watches` would, without a watch of their own).

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

use crate::crd::{ApiKey, SendingDomain, SubAccount};

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

    pub(super) fn trigger(&self, secret: &Secret) {
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

/// Routes a SubAccount's change to the ApiKeys of its namespace whose `spec.subAccountRef`
/// names it: an ApiKey waiting for its sub account's id reconciles once the SubAccount
/// controller's cache holds it.
pub(super) struct ReferencingKeys {
    keys: Store<ApiKey>,
    api_keys: UnboundedSender<ObjectRef<ApiKey>>,
}

impl ReferencingKeys {
    /// A router reading the ApiKeys from `keys`, and the ApiKey controller's receiving end.
    pub(super) fn channel(keys: Store<ApiKey>) -> (ReferencingKeys, Trigger<ApiKey>) {
        let (api_keys, rx) = unbounded();
        (ReferencingKeys { keys, api_keys }, rx)
    }

    pub(super) fn trigger(&self, sub: &SubAccount) {
        let namespace = sub.namespace();
        let name = sub.name_any();
        for key in self.keys.state() {
            let references = key.namespace() == namespace
                && key
                    .spec
                    .sub_account_ref
                    .as_ref()
                    .is_some_and(|r| r.name == name);
            if references {
                // A closed channel means the ApiKey controller has stopped (shutdown).
                let _ = self
                    .api_keys
                    .unbounded_send(ObjectRef::from_obj(key.as_ref()));
            }
        }
    }
}
