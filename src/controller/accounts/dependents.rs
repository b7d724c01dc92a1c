//! Reconciles started by a change of an account: when an account's check changes what the
//! resources using it get (ready or not, another client), or the account goes, every managed
//! resource that names it is reconciled again, as cert-manager reconciles the Certificates of an
//! Issuer that becomes ready. A resource waiting with `AccountNotReady` thus goes on as soon as
//! its account is checked, not at its next resync.

use std::sync::Mutex;

use futures::channel::mpsc::{UnboundedSender, unbounded};
use futures::{Stream, StreamExt};
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use super::registry::{AccountName, AccountRegistry};
use super::usage::account_name;
use crate::controller::common::Locked;

/// The subscribers to account changes, one per managed kind's controller.
#[derive(Default)]
pub(super) struct Subscribers(Mutex<Vec<UnboundedSender<AccountName>>>);

impl AccountRegistry {
    /// The resources of `store` to reconcile again after each change of an account: those
    /// whose `spec.accountRef` names it (read from `store` when the change comes). The stream
    /// ends when the registry is dropped.
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
                    account_name(&r.namespace().unwrap_or_default(), r.account_ref()) == changed
                })
                .map(|r| ObjectRef::from_obj(r.as_ref()))
                .collect();
            futures::stream::iter(refs)
        })
    }

    /// Tells the subscribers that what `name` gives its resources changed.
    pub(super) fn changed(&self, name: &AccountName) {
        let mut subscribers = self.subscribers.0.locked();
        subscribers.retain(|tx| tx.unbounded_send(name.clone()).is_ok());
    }
}
