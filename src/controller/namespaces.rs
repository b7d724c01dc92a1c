//! Watching several namespaces as one: one kube-runtime watcher per namespace, merged into a
//! single event stream that a reflector store and a `Controller::for_stream` take as if it came
//! from one watcher.
//!
//! A Kubernetes watch covers one namespace or all of them, so an operator confined to a list of
//! namespaces (with a Role in each, never a ClusterRole on Secrets) runs one watch per
//! namespace. Merging their raw events would break the store: each watcher's (re)list is an
//! `Init` .. `InitApply`* .. `InitDone` sequence after which the reflector *replaces* the whole
//! store, so one namespace's relist would drop every other namespace's objects. The merged
//! stream therefore keeps the reflector's contract over the union:
//!
//! - the first lists are gathered until every namespace has listed once (a namespace that has
//!   is not polled again until then), and emitted as one `Init`, the `InitApply` of every
//!   object, one `InitDone`: the store becomes ready holding all namespaces, as with one
//!   cluster-wide watcher;
//! - afterwards a namespace's relist (after a desync, e.g. `410 Gone`) is gathered, then
//!   emitted as an `Apply` per listed object and a `Delete` per object of that namespace the
//!   store holds but the list no longer has; other events pass through.
//!
//! Errors of a namespace's watcher pass through (its watcher retries with its own backoff).

use std::collections::{HashSet, VecDeque};
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use futures::stream::BoxStream;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Resource, ResourceExt};

/// The events of one watch: a namespace, all of them, or the merge of several.
pub type WatchStream<K> = BoxStream<'static, watcher::Result<Event<K>>>;

/// The kinds the operator watches: namespaced types kube-runtime can watch, cache and merge.
pub trait Watchable:
    Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
    + Clone
    + serde::de::DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + Unpin
    + 'static
{
}

impl<K> Watchable for K where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + Unpin
        + 'static
{
}

/// Where a member stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before its first complete list.
    FirstList,
    /// Its first list is complete; waiting for the other namespaces' first lists.
    Listed,
    /// Passing events through (and gathering relists).
    Watching,
}

/// One namespace's watcher.
struct Member<K> {
    namespace: String,
    stream: WatchStream<K>,
    phase: Phase,
    /// Objects of the list in progress (between `Init` and `InitDone`), or of the first list
    /// while waiting for the others.
    list: Vec<K>,
    ended: bool,
}

/// The merged stream of several namespaces' watchers (see the module documentation).
pub struct Merged<K: Resource<DynamicType = ()> + Clone + 'static> {
    members: Vec<Member<K>>,
    /// The store the merged events feed, to find what a relist no longer has.
    store: Store<K>,
    /// Every namespace has listed once and the union has been emitted.
    ready: bool,
    out: VecDeque<watcher::Result<Event<K>>>,
    /// The member polled first next time, for fairness.
    next: usize,
}

impl<K> Merged<K>
where
    K: Resource<DynamicType = ()> + Clone + Send + 'static,
{
    /// Merges `streams` (namespace, that namespace's watcher events), feeding a reflector
    /// whose reader is `store`.
    pub fn new(streams: Vec<(String, WatchStream<K>)>, store: Store<K>) -> Self {
        Merged {
            members: streams
                .into_iter()
                .map(|(namespace, stream)| Member {
                    namespace,
                    stream,
                    phase: Phase::FirstList,
                    list: Vec::new(),
                    ended: false,
                })
                .collect(),
            store,
            ready: false,
            out: VecDeque::new(),
            next: 0,
        }
    }

    /// Takes one event of member `i`.
    fn take(&mut self, i: usize, event: Event<K>) {
        let member = &mut self.members[i];
        match event {
            Event::Init => {
                member.list.clear();
            }
            Event::InitApply(obj) => member.list.push(obj),
            Event::InitDone => {
                if member.phase == Phase::FirstList {
                    member.phase = Phase::Listed;
                    self.emit_union_when_all_listed();
                } else {
                    let list = std::mem::take(&mut member.list);
                    let namespace = member.namespace.clone();
                    self.emit_relist(&namespace, list);
                }
            }
            // Not expected before the union is out (a watcher yields these only after its
            // first `InitDone`, and a listed member is not polled until then); folded into the
            // pending list so that the store still ends right.
            Event::Apply(obj) if member.phase != Phase::Watching => {
                member.list.retain(|o| o.name_any() != obj.name_any());
                member.list.push(obj);
            }
            Event::Delete(obj) if member.phase != Phase::Watching => {
                member.list.retain(|o| o.name_any() != obj.name_any());
            }
            event @ (Event::Apply(_) | Event::Delete(_)) => self.out.push_back(Ok(event)),
        }
    }

    /// Emits the first lists of all namespaces as one list, once all have listed.
    fn emit_union_when_all_listed(&mut self) {
        if self.members.iter().any(|m| m.phase != Phase::Listed) {
            return;
        }
        self.out.push_back(Ok(Event::Init));
        for member in &mut self.members {
            member.phase = Phase::Watching;
            for obj in member.list.drain(..) {
                self.out.push_back(Ok(Event::InitApply(obj)));
            }
        }
        self.out.push_back(Ok(Event::InitDone));
        self.ready = true;
    }

    /// Emits a relist of `namespace` as applies of what it lists and deletes of what the
    /// store holds there and the list lacks.
    fn emit_relist(&mut self, namespace: &str, list: Vec<K>) {
        let listed: HashSet<ObjectRef<K>> = list.iter().map(ObjectRef::from_obj).collect();
        for gone in self.store.state() {
            if gone.namespace().as_deref() == Some(namespace)
                && !listed.contains(&ObjectRef::from_obj(gone.as_ref()))
            {
                self.out.push_back(Ok(Event::Delete(gone.as_ref().clone())));
            }
        }
        for obj in list {
            self.out.push_back(Ok(Event::Apply(obj)));
        }
    }
}

impl<K> Stream for Merged<K>
where
    K: Resource<DynamicType = ()> + Clone + Send + Unpin + 'static,
{
    type Item = watcher::Result<Event<K>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(event) = this.out.pop_front() {
                return Poll::Ready(Some(event));
            }
            let count = this.members.len();
            let mut progressed = false;
            for offset in 0..count {
                let i = (this.next + offset) % count;
                let member = &mut this.members[i];
                // Hold a listed namespace back until every namespace has listed, so that none
                // changes the store before the union is in it.
                if member.ended || (!this.ready && member.phase == Phase::Listed) {
                    continue;
                }
                match member.stream.as_mut().poll_next(cx) {
                    Poll::Ready(Some(Ok(event))) => {
                        this.next = (i + 1) % count;
                        this.take(i, event);
                        progressed = true;
                        break;
                    }
                    Poll::Ready(Some(Err(err))) => {
                        this.next = (i + 1) % count;
                        return Poll::Ready(Some(Err(err)));
                    }
                    Poll::Ready(None) => member.ended = true,
                    Poll::Pending => {}
                }
            }
            if progressed {
                continue;
            }
            if this.members.iter().all(|m| m.ended) {
                return Poll::Ready(None);
            }
            return Poll::Pending;
        }
    }
}

/// The watch of kind `K` over `namespaces` (empty: all namespaces) with `config`, with
/// `managedFields` dropped (the operator never reads them) and kube-runtime's default backoff
/// on errors. `store` is the reader of the reflector these events feed: several namespaces are
/// merged with [`Merged`].
pub fn watch<K: Watchable>(
    client: &kube::Client,
    namespaces: &[String],
    config: &watcher::Config,
    store: Store<K>,
) -> WatchStream<K> {
    let one = |api: Api<K>| -> WatchStream<K> {
        Box::pin(
            watcher::watcher(api, config.clone())
                .modify(|o| o.managed_fields_mut().clear())
                .default_backoff(),
        )
    };
    match namespaces {
        [] => one(Api::all(client.clone())),
        [namespace] => one(Api::namespaced(client.clone(), namespace)),
        several => Box::pin(Merged::new(
            several
                .iter()
                .map(|ns| (ns.clone(), one(Api::namespaced(client.clone(), ns))))
                .collect(),
            store,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector;

    fn cm(namespace: &str, name: &str) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.namespace = Some(namespace.into());
        cm.metadata.name = Some(name.into());
        cm
    }

    type Sender = futures::channel::mpsc::UnboundedSender<watcher::Result<Event<ConfigMap>>>;

    /// Two fake namespace watchers feeding a merged stream and a store.
    fn rig() -> (
        Sender,
        Sender,
        Store<ConfigMap>,
        impl Stream<Item = watcher::Result<Event<ConfigMap>>>,
    ) {
        let (a_tx, a_rx) = futures::channel::mpsc::unbounded();
        let (b_tx, b_rx) = futures::channel::mpsc::unbounded();
        let (store, writer) = reflector::store::<ConfigMap>();
        let merged = Merged::new(
            vec![
                ("a".to_string(), a_rx.boxed()),
                ("b".to_string(), b_rx.boxed()),
            ],
            store.clone(),
        );
        (a_tx, b_tx, store, reflector::reflector(writer, merged))
    }

    fn names(store: &Store<ConfigMap>) -> Vec<String> {
        let mut names: Vec<String> = store
            .state()
            .iter()
            .map(|o| format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any()))
            .collect();
        names.sort();
        names
    }

    fn send(tx: &Sender, events: Vec<Event<ConfigMap>>) {
        for e in events {
            tx.unbounded_send(Ok(e)).unwrap();
        }
    }

    /// Drains what the merged stream has ready now.
    async fn drain(stream: &mut (impl Stream<Item = watcher::Result<Event<ConfigMap>>> + Unpin)) {
        while let Some(Some(_)) = futures::FutureExt::now_or_never(stream.next()) {}
    }

    /// The store is ready only once both namespaces listed, holds both, and one namespace's
    /// relist neither drops the other's objects nor keeps its own deleted ones.
    #[tokio::test]
    async fn store_holds_the_union_across_relists() {
        let (a, b, store, stream) = rig();
        let mut stream = Box::pin(stream);
        send(
            &a,
            vec![
                Event::Init,
                Event::InitApply(cm("a", "one")),
                Event::InitApply(cm("a", "two")),
                Event::InitDone,
                // Arrives after a's first list: held back until b has listed.
                Event::Apply(cm("a", "three")),
            ],
        );
        drain(&mut stream).await;
        assert!(
            names(&store).is_empty(),
            "nothing before every namespace listed"
        );
        assert!(
            futures::FutureExt::now_or_never(store.wait_until_ready()).is_none(),
            "not ready before b listed"
        );
        send(
            &b,
            vec![Event::Init, Event::InitApply(cm("b", "x")), Event::InitDone],
        );
        drain(&mut stream).await;
        assert_eq!(names(&store), ["a/one", "a/three", "a/two", "b/x"]);
        assert!(futures::FutureExt::now_or_never(store.wait_until_ready()).is_some());

        // b relists without x but with y; a's objects stay.
        send(
            &b,
            vec![Event::Init, Event::InitApply(cm("b", "y")), Event::InitDone],
        );
        drain(&mut stream).await;
        assert_eq!(names(&store), ["a/one", "a/three", "a/two", "b/y"]);
        send(&a, vec![Event::Delete(cm("a", "two"))]);
        drain(&mut stream).await;
        assert_eq!(names(&store), ["a/one", "a/three", "b/y"]);
    }

    /// A namespace whose first list restarts (an error mid-list) keeps only the second list.
    #[tokio::test]
    async fn a_restarted_first_list_replaces_the_partial_one() {
        let (a, b, store, stream) = rig();
        let mut stream = Box::pin(stream);
        send(&a, vec![Event::Init, Event::InitApply(cm("a", "stale"))]);
        send(
            &a,
            vec![
                Event::Init,
                Event::InitApply(cm("a", "fresh")),
                Event::InitDone,
            ],
        );
        send(&b, vec![Event::Init, Event::InitDone]);
        drain(&mut stream).await;
        assert_eq!(names(&store), ["a/fresh"]);
    }
}
