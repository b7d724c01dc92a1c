//! Reconciles started by a change of an account: when an account's check changes what the
//! resources using it get (ready or not, another client), or the account goes, every managed
//! resource that names it is reconciled again, as cert-manager reconciles the Certificates of an
//! Issuer that becomes ready. A resource waiting with `AccountNotReady` thus goes on as soon as
//! its account is checked, not at its next resync.
//!
//! Likewise for a Namespace the operator's cache receives or sees relabelled: the resources of
//! that namespace, and those placed inside a SubAccount of it (which may host them in its
//! account), are reconciled again, so that one that waited for the namespace to reach the cache
//! (to evaluate a selector on its labels) goes on at once.

use std::sync::Mutex;

use futures::channel::mpsc::{UnboundedSender, unbounded};
use futures::{Stream, StreamExt};
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use super::registry::{AccountName, AccountRegistry};
use super::usage::account_name;
use crate::controller::common::Locked;

/// What changed: an account, or a namespace (by name) in the operator's Namespace cache.
#[derive(Clone, Debug)]
pub(super) enum Changed {
    Account(AccountName),
    Namespace(String),
}

/// The subscribers to account and namespace changes, one per managed kind's controller.
#[derive(Default)]
pub(super) struct Subscribers(Mutex<Vec<UnboundedSender<Changed>>>);

impl AccountRegistry {
    /// The resources of `store` to reconcile again after each change of an account (those
    /// whose `spec.accountRef` names it) or of a namespace in the operator's cache (those of
    /// that namespace), read from `store` when the change comes. The stream ends when the
    /// registry is dropped.
    pub fn dependents<K>(&self, store: Store<K>) -> impl Stream<Item = ObjectRef<K>> + Send + use<K>
    where
        K: crate::engine::ManagedResource
            + kube::Resource<DynamicType = ()>
            + Clone
            + Send
            + Sync
            + 'static,
    {
        let (tx, rx) = unbounded();
        self.subscribers.0.locked().push(tx);
        rx.flat_map(move |changed| {
            let refs: Vec<ObjectRef<K>> = store
                .state()
                .iter()
                .filter(|r| {
                    let namespace = r.namespace().unwrap_or_default();
                    match &changed {
                        Changed::Account(name) => {
                            account_name(&namespace, r.account_ref()) == *name
                        }
                        // A resource a SubAccount of that namespace may host, too.
                        Changed::Namespace(name) => {
                            namespace == *name
                                || (r.sub_account_ref())
                                    .is_some_and(|s| s.namespace.as_deref() == Some(name))
                        }
                    }
                })
                .map(|r| ObjectRef::from_obj(r.as_ref()))
                .collect();
            futures::stream::iter(refs)
        })
    }

    /// Tells the subscribers that what account `name` gives its resources changed.
    pub(super) fn changed(&self, name: &AccountName) {
        self.tell(Changed::Account(name.clone()));
    }

    /// Tells the subscribers that the Namespace cache holds a new or relabelled namespace `name`.
    pub(super) fn namespace_changed(&self, name: String) {
        self.tell(Changed::Namespace(name));
    }

    fn tell(&self, change: Changed) {
        let mut subscribers = self.subscribers.0.locked();
        subscribers.retain(|tx| tx.unbounded_send(change.clone()).is_ok());
    }
}
