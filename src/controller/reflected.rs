//! A reflector's cache whose first list any number of tasks may await.
//!
//! kube-runtime's `Store::wait_until_ready` keeps a single waker (its `DelayedInit` holds a
//! futures oneshot receiver): when the first list arrives, only the task that polled it last is
//! woken, and a `now_or_never` check puts a no-op waker in place of a waiting task's. kube's
//! `Controller` holds its runner on that future, so a wait of the operator's own on the same
//! store (the account caches at start-up, readiness) took the controller's wake-up or lost its
//! own, and then waited for its timeout or for ever. [`Reflected`] takes the first list from the
//! reflector's event stream instead (`InitDone` passes once the store holds the list) into a
//! `tokio::sync::watch` channel, which wakes every waiter; kube's controller stays the store's
//! only waiter.

use std::hash::Hash;

use futures::{Stream, StreamExt};
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{Lookup, Store, reflector};
use kube::runtime::watcher;
use tokio::sync::watch;

/// What a cache knows of its first list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FirstList {
    /// Not in yet.
    Awaited,
    /// In the store (it stays so through relists).
    Listed,
    /// The API server does not serve the kind (the first list failed with 404: its CRD is not
    /// installed); the watcher retries, and lists once the CRD is installed.
    Unserved,
}

/// A reflector's store, and whether it holds its first list. Dereferences to the store.
pub struct Reflected<K: Lookup + Clone + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    listed: watch::Receiver<FirstList>,
}

/// The writing end of a [`Reflected`], which [`ReflectedWriter::reflect`] hands to the
/// reflector of its watch.
pub struct ReflectedWriter<K: Lookup + Clone + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    writer: Writer<K>,
    listed: watch::Sender<FirstList>,
}

/// True for a first list refused with 404: the API server does not serve the kind (its CRD is
/// not installed). kube's watcher reports it so with the list-then-watch initial mode, the one
/// this operator uses (a streaming list, `sendInitialEvents`, would fail at the watch's start).
pub(crate) fn not_served(error: &watcher::Error) -> bool {
    matches!(error, watcher::Error::InitialListFailed(kube::Error::Api(s)) if s.code == 404)
}

/// An empty cache of `K` (not listed) and its writer.
pub fn reflected<K>() -> (Reflected<K>, ReflectedWriter<K>)
where
    K: Lookup + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    let writer = Writer::default();
    let (sender, listed) = watch::channel(FirstList::Awaited);
    let cache = Reflected {
        store: writer.as_reader(),
        listed,
    };
    (
        cache,
        ReflectedWriter {
            writer,
            listed: sender,
        },
    )
}

impl<K: Lookup + Clone + 'static> Reflected<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    /// The store.
    pub fn store(&self) -> &Store<K> {
        &self.store
    }

    /// True once the store holds its first list (it stays true through relists).
    pub fn is_listed(&self) -> bool {
        *self.listed.borrow() == FirstList::Listed
    }

    /// True once the store holds its first list, or while the API server does not serve the
    /// kind (its first list failed with 404, and no list came since): what there is to know of
    /// the kind's objects is known.
    pub fn is_settled(&self) -> bool {
        *self.listed.borrow() != FirstList::Awaited
    }

    /// Returns true once the store holds its first list, or false once its watch stream was
    /// dropped before (the operator stops); every task waiting is woken.
    pub async fn listed(&self) -> bool {
        (self.listed.clone())
            .wait_for(|l| *l == FirstList::Listed)
            .await
            .is_ok()
    }

    /// Returns as [`Self::listed`] does, or once the kind is found not served: what there is to
    /// know of the kind's objects at start-up is known.
    pub async fn settled(&self) {
        let _ = (self.listed.clone())
            .wait_for(|l| *l != FirstList::Awaited)
            .await;
    }
}

impl<K: Lookup + Clone + 'static> Clone for Reflected<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    fn clone(&self) -> Self {
        Reflected {
            store: self.store.clone(),
            listed: self.listed.clone(),
        }
    }
}

impl<K: Lookup + Clone + 'static> std::ops::Deref for Reflected<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    type Target = Store<K>;

    fn deref(&self) -> &Store<K> {
        &self.store
    }
}

impl<K: Lookup + Clone + 'static> ReflectedWriter<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    /// The store, to read while building the watch (see `namespaces::watch`).
    pub fn as_reader(&self) -> Store<K> {
        self.writer.as_reader()
    }

    /// kube-runtime's `reflector` of `stream` into the store, which also records the first
    /// list once the store holds it, and a first list refused with 404 (the kind not served).
    /// The cache's waiters are released when the returned stream is dropped.
    pub fn reflect<W>(self, stream: W) -> impl Stream<Item = W::Item> + use<K, W>
    where
        W: Stream<Item = watcher::Result<watcher::Event<K>>>,
    {
        let listed = self.listed;
        reflector(self.writer, stream).inspect(move |event| match event {
            Ok(watcher::Event::InitDone) => {
                listed.send_replace(FirstList::Listed);
            }
            Err(error) if not_served(error) => {
                listed.send_if_modified(|l| {
                    let before = *l;
                    if before == FirstList::Awaited {
                        *l = FirstList::Unserved;
                    }
                    before == FirstList::Awaited
                });
            }
            _ => {}
        })
    }

    /// Applies `event` to the store as the reflector does, first list included.
    #[cfg(test)]
    pub fn apply_watcher_event(&mut self, event: &watcher::Event<K>) {
        self.writer.apply_watcher_event(event);
        if let watcher::Event::InitDone = event {
            self.listed.send_replace(FirstList::Listed);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::{Context, Poll, Wake, Waker};

    /// A task's waker that records whether it was woken.
    #[derive(Default)]
    pub(crate) struct Woken(AtomicBool);

    impl Woken {
        /// A waker for a new record, and the record.
        pub(crate) fn waker() -> (Waker, Arc<Woken>) {
            let woken = Arc::new(Woken::default());
            (Waker::from(woken.clone()), woken)
        }

        /// True once woken.
        pub(crate) fn woken(&self) -> bool {
            self.0.load(Ordering::SeqCst)
        }
    }

    /// The error kube's watcher yields when the API server does not serve the kind: its first
    /// list answered 404.
    pub(crate) fn not_served_error() -> watcher::Error {
        let mut status = kube::core::Status::failure("not found", "NotFound");
        status.code = 404;
        watcher::Error::InitialListFailed(kube::Error::Api(status.boxed()))
    }

    impl Wake for Woken {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// Every task waiting for the first list is woken by it, once the store holds the list
    /// (not before: `Init` alone lists nothing).
    #[tokio::test]
    async fn the_first_list_wakes_every_waiter() {
        let (cache, writer) = reflected::<ConfigMap>();
        let (to_reflector, events) = futures::channel::mpsc::unbounded();
        let mut reflecting = Box::pin(writer.reflect(events));
        let mut waiters: Vec<_> = (0..3)
            .map(|_| {
                let (waker, woken) = Woken::waker();
                let mut waiting = Box::pin(cache.listed());
                let pending = waiting.as_mut().poll(&mut Context::from_waker(&waker));
                assert!(pending.is_pending());
                (waiting, waker, woken)
            })
            .collect();
        let mut item = ConfigMap::default();
        item.metadata.name = Some("a".into());
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(item),
            watcher::Event::InitDone,
        ] {
            assert!(!cache.is_listed());
            to_reflector.unbounded_send(Ok(event)).unwrap();
            reflecting.next().await;
        }
        assert!(cache.is_listed());
        assert_eq!(cache.state().len(), 1);
        for (waiting, waker, woken) in &mut waiters {
            assert!(woken.woken(), "every waiter is woken");
            let done = waiting.as_mut().poll(&mut Context::from_waker(waker));
            assert_eq!(done, Poll::Ready(true));
        }
    }

    /// A first list refused with 404 (the kind not served) settles the cache without listing
    /// it: readiness (`listed`) still waits, and the list that comes once the CRD is installed
    /// lists it.
    #[tokio::test]
    async fn a_kind_not_served_settles_without_listing() {
        let (cache, writer) = reflected::<ConfigMap>();
        let (to_reflector, events) = futures::channel::mpsc::unbounded();
        let mut reflecting = Box::pin(writer.reflect(events));
        to_reflector
            .unbounded_send(Err(not_served_error()))
            .unwrap();
        reflecting.next().await;
        assert!(cache.is_settled() && !cache.is_listed());
        let (waker, _) = Woken::waker();
        let mut cx = Context::from_waker(&waker);
        assert!(Box::pin(cache.settled()).as_mut().poll(&mut cx).is_ready());
        let mut listed = Box::pin(cache.listed());
        assert!(listed.as_mut().poll(&mut cx).is_pending());
        for event in [watcher::Event::Init, watcher::Event::InitDone] {
            to_reflector.unbounded_send(Ok(event)).unwrap();
            reflecting.next().await;
        }
        assert!(cache.is_listed() && cache.is_settled());
        assert_eq!(listed.as_mut().poll(&mut cx), Poll::Ready(true));
    }

    /// A watch stream dropped before its first list releases the waiters, answering false (the
    /// operator stops).
    #[tokio::test]
    async fn a_dropped_stream_releases_the_waiters() {
        let (cache, writer) = reflected::<ConfigMap>();
        let reflecting = writer.reflect(futures::stream::pending());
        let (waker, woken) = Woken::waker();
        let mut waiting = Box::pin(cache.listed());
        assert!(
            waiting
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
        drop(reflecting);
        assert!(woken.woken(), "released");
        let done = waiting.as_mut().poll(&mut Context::from_waker(&waker));
        assert_eq!(done, Poll::Ready(false), "not listed");
        assert!(!cache.is_listed());
    }
}
