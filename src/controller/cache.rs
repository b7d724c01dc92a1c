//! The controller's view of the account: the three lists, read with the list endpoints and shared
//! by every reconcile.
//!
//! A list is read again when it is older than its maximum age (the resync interval), so a
//! full resync of N objects costs about `ceil(N / 100)` page calls per kind instead of one GET per
//! object. The operator's own writes update the cached items at once, so a create is never
//! followed by a second create for lack of a fresh list.

use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::api::{
    ApiError, ApiKeyListItem, Client, ListApiKeysQuery, ListSendingDomainsQuery,
    ListSubAccountsQuery, SendingDomainListItem, SubAccountDetail, SubAccountListItem,
};
use crate::controller::common::Locked;
use crate::crd::{ApiKey, SendingDomain, SubAccount};
use crate::engine::ManagedKind;

/// A change the operator made to a list item while a fetch of the list was under way.
#[derive(Debug)]
enum LocalChange<T> {
    Upsert(T),
    Remove(i64),
}

#[derive(Debug)]
struct ListState<T> {
    /// When the fetch that produced `items` started.
    fetched_at: Option<Instant>,
    /// A list fetched before this instant is stale (set by [`CachedList::invalidate`] and
    /// [`CachedList::doubt`]).
    not_before: Option<Instant>,
    items: Vec<T>,
    /// Local changes made since the fetch under way started (`Some` while one runs); they are
    /// applied again on top of its result, which may predate them.
    pending: Option<Vec<LocalChange<T>>>,
}

/// One cached list.
///
/// A fetch takes time (several pages, retries); a create, update or delete the operator makes
/// meanwhile may be missing from the fetched pages. Such local changes are recorded and applied
/// again on top of the fetched list, so a fresh list never forgets an object the operator just
/// created (which would lead to creating it twice).
#[derive(Debug)]
pub struct CachedList<T> {
    state: Mutex<ListState<T>>,
    refresh: tokio::sync::Mutex<()>,
    id_of: fn(&T) -> i64,
}

impl<T: Clone> CachedList<T> {
    fn new(id_of: fn(&T) -> i64) -> Self {
        CachedList {
            state: Mutex::new(ListState {
                fetched_at: None,
                not_before: None,
                items: Vec::new(),
                pending: None,
            }),
            refresh: tokio::sync::Mutex::new(()),
            id_of,
        }
    }

    fn fresh(&self, max_age: Duration) -> bool {
        let g = self.state.locked();
        g.fetched_at.is_some_and(|t| {
            t.elapsed() < max_age && g.not_before.is_none_or(|not_before| t >= not_before)
        })
    }

    fn apply(items: &mut Vec<T>, id_of: fn(&T) -> i64, change: LocalChange<T>) {
        match change {
            LocalChange::Upsert(item) => {
                let id = id_of(&item);
                match items.iter_mut().find(|i| id_of(i) == id) {
                    Some(old) => *old = item,
                    None => items.push(item),
                }
            }
            LocalChange::Remove(id) => items.retain(|i| id_of(i) != id),
        }
    }

    /// Reads the list with `fetch` when older than `max_age` (or fetched before the last
    /// [`invalidate`](Self::invalidate) or [`doubt`](Self::doubt)); one fetch at a time (others wait for it and reuse its
    /// result). Local changes made during the fetch are kept.
    ///
    /// Errors: the fetch's error; the old items stay in place.
    pub async fn ensure_fresh<F, Fut>(&self, max_age: Duration, fetch: F) -> Result<(), ApiError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Vec<T>, ApiError>>,
    {
        if self.fresh(max_age) {
            return Ok(());
        }
        let _guard = self.refresh.lock().await;
        if self.fresh(max_age) {
            return Ok(());
        }
        let started = Instant::now();
        self.state.locked().pending = Some(Vec::new());
        let result = fetch().await;
        let mut g = self.state.locked();
        let pending = g.pending.take().unwrap_or_default();
        let mut items = result?;
        for change in pending {
            Self::apply(&mut items, self.id_of, change);
        }
        g.items = items;
        g.fetched_at = Some(started);
        Ok(())
    }

    /// The cached item with id `id`, if any.
    pub fn get(&self, id: i64) -> Option<T> {
        let id_of = self.id_of;
        self.read(|items| items.iter().find(|i| id_of(i) == id).cloned())
    }

    /// Runs `f` on the cached items.
    pub fn read<R>(&self, f: impl FnOnce(&[T]) -> R) -> R {
        f(&self.state.locked().items)
    }

    fn change(&self, change: LocalChange<T>)
    where
        T: Clone,
    {
        let mut g = self.state.locked();
        if let Some(pending) = g.pending.as_mut() {
            pending.push(match &change {
                LocalChange::Upsert(item) => LocalChange::Upsert(item.clone()),
                LocalChange::Remove(id) => LocalChange::Remove(*id),
            });
        }
        Self::apply(&mut g.items, self.id_of, change);
    }

    /// Whether a verdict on the cached items needs a newer list, for a reader that began at
    /// `since` (see [`super::find::find_managed`]). A list whose fetch started
    /// at or after `since` is as new as the reader can ask for: false, the verdict stands.
    /// Otherwise `verdict` runs on the items; when it returns true the list it saw becomes
    /// stale, and the next [`ensure_fresh`](Self::ensure_fresh) fetches a list that started at
    /// or after `since`, or reuses one that another reader started then (never one under way
    /// since before `since`). Resources doubting the same list (several stalled ones after a
    /// restart, say) thus share one fetch.
    pub fn doubt(&self, since: Instant, verdict: impl FnOnce(&[T]) -> bool) -> bool {
        let mut g = self.state.locked();
        if g.fetched_at.is_some_and(|t| t >= since) || !verdict(&g.items) {
            return false;
        }
        g.not_before = Some(g.not_before.map_or(since, |t| t.max(since)));
        true
    }

    /// Inserts or replaces the item with the same id (after the operator wrote it).
    pub fn upsert(&self, item: T) {
        self.change(LocalChange::Upsert(item));
    }

    /// Removes the item with id `id` (after the operator deleted it).
    pub fn remove(&self, id: i64) {
        self.change(LocalChange::Remove(id));
    }

    /// Marks the list stale so that the next reader fetches it again, and refuses any list
    /// whose fetch started before now (e.g. one under way while a create lost its answer).
    pub fn invalidate(&self) {
        let mut g = self.state.locked();
        g.fetched_at = None;
        g.not_before = Some(Instant::now());
    }
}

/// One account as the reconciles call it: its client (key, addresses, request budget) and its
/// three cached lists, shared by every resource managed through the account.
#[derive(Debug)]
pub struct AccountCache {
    client: Client,
    max_age: Duration,
    /// Sub accounts.
    pub sub_accounts: CachedList<SubAccountListItem>,
    /// API keys.
    pub api_keys: CachedList<ApiKeyListItem>,
    /// Sending domains.
    pub sending_domains: CachedList<SendingDomainListItem>,
    /// Ids of sub account credentials the service refused (401) to a resource placed inside
    /// their sub account, until their SubAccount finds them accepted again.
    refused_credentials: std::sync::Mutex<std::collections::HashSet<i64>>,
}

impl AccountCache {
    /// A cache whose lists are read again when older than `max_age`.
    pub fn new(client: Client, max_age: Duration) -> Self {
        AccountCache {
            client,
            max_age,
            sub_accounts: CachedList::new(|i: &SubAccountListItem| i.id),
            api_keys: CachedList::new(|i: &ApiKeyListItem| i.id),
            sending_domains: CachedList::new(|i: &SendingDomainListItem| i.id),
            refused_credentials: Default::default(),
        }
    }

    /// Records that the service refused the sub account credential `key_id` (a 401 to a call
    /// made with it). The key list is read again at its next use (once per refusal): a
    /// credential deleted at the service is then missing rather than refused.
    pub fn refuse_credential(&self, key_id: i64) {
        let first = self.refused_credentials.locked().insert(key_id);
        // Once per refusal, however many resources inside the sub account met it.
        if first {
            self.api_keys.invalidate();
        }
    }

    /// Whether the service refused credential `key_id` since it was last found accepted.
    pub fn credential_refused(&self, key_id: i64) -> bool {
        self.refused_credentials.locked().contains(&key_id)
    }

    /// Records that the service accepts credential `key_id` again.
    pub fn accept_credential(&self, key_id: i64) {
        self.refused_credentials.locked().remove(&key_id);
    }

    /// The account's client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Kind `K`'s list, read again when older than the maximum age.
    ///
    /// Errors: the list call's error.
    pub async fn fresh<K: CachedKind>(&self) -> Result<&CachedList<K::Item>, ApiError> {
        let list = K::list(self);
        list.ensure_fresh(self.max_age, || K::fetch(&self.client))
            .await?;
        Ok(list)
    }

    /// Kind `K`'s list as [`Self::fresh`] reads it, read once more when `doubt` holds on a list
    /// older than `since` (see [`CachedList::doubt`]): a verdict on it is then confirmed on a
    /// list at least that new.
    ///
    /// Errors: the list call's error.
    pub async fn confirmed<K: CachedKind>(
        &self,
        since: Instant,
        doubt: impl FnOnce(&[K::Item]) -> bool,
    ) -> Result<&CachedList<K::Item>, ApiError> {
        let list = self.fresh::<K>().await?;
        match list.doubt(since, doubt) {
            true => self.fresh::<K>().await,
            false => Ok(list),
        }
    }
}

/// A kind whose objects the cache lists.
pub trait CachedKind: ManagedKind {
    /// The kind's cached list.
    fn list(cache: &AccountCache) -> &CachedList<Self::Item>;
    /// Reads every page of the kind's list.
    fn fetch(client: &Client) -> impl Future<Output = Result<Vec<Self::Item>, ApiError>> + Send;
    /// Takes the object a write answered into the cache.
    fn absorb(cache: &AccountCache, detail: &Self::Detail) {
        Self::list(cache).upsert(Self::Item::from(detail));
    }
}

impl CachedKind for SubAccount {
    fn list(cache: &AccountCache) -> &CachedList<SubAccountListItem> {
        &cache.sub_accounts
    }
    async fn fetch(client: &Client) -> Result<Vec<SubAccountListItem>, ApiError> {
        client
            .list_all_sub_accounts(&ListSubAccountsQuery::default())
            .await
    }
    /// A sub account's answer lists its keys too (those created with it among them).
    fn absorb(cache: &AccountCache, detail: &SubAccountDetail) {
        cache.sub_accounts.upsert(Self::Item::from(detail));
        for key in &detail.api_keys {
            cache.api_keys.upsert(key.clone());
        }
    }
}

impl CachedKind for ApiKey {
    fn list(cache: &AccountCache) -> &CachedList<ApiKeyListItem> {
        &cache.api_keys
    }
    async fn fetch(client: &Client) -> Result<Vec<ApiKeyListItem>, ApiError> {
        client.list_all_api_keys(&ListApiKeysQuery::default()).await
    }
}

impl CachedKind for SendingDomain {
    fn list(cache: &AccountCache) -> &CachedList<SendingDomainListItem> {
        &cache.sending_domains
    }
    async fn fetch(client: &Client) -> Result<Vec<SendingDomainListItem>, ApiError> {
        client
            .list_all_sending_domains(&ListSendingDomainsQuery::default())
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list() -> CachedList<(i64, &'static str)> {
        CachedList::new(|i: &(i64, &'static str)| i.0)
    }

    /// An item created while a fetch runs survives the fetch's older result; one deleted
    /// meanwhile stays deleted.
    #[tokio::test]
    async fn local_changes_during_a_fetch_are_kept() {
        let cache = list();
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let fetch = cache.ensure_fresh(Duration::from_secs(60), || async move {
            let _ = wait.await;
            Ok(vec![(1, "old"), (2, "gone")])
        });
        let change = async {
            tokio::task::yield_now().await;
            cache.upsert((3, "created"));
            cache.upsert((1, "updated"));
            cache.remove(2);
            let _ = go.send(());
        };
        let (result, ()) = tokio::join!(fetch, change);
        result.unwrap();
        let mut items = cache.read(<[_]>::to_vec);
        items.sort_unstable();
        assert_eq!(items, vec![(1, "updated"), (3, "created")]);
        assert!(cache.fresh(Duration::from_secs(60)));
    }

    /// A list whose fetch started before `invalidate` is not fresh.
    #[tokio::test]
    async fn invalidate_refuses_a_fetch_that_started_before() {
        let cache = list();
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let fetch = cache.ensure_fresh(Duration::from_secs(60), || async move {
            let _ = wait.await;
            Ok(vec![(1, "a")])
        });
        let change = async {
            tokio::task::yield_now().await;
            cache.invalidate();
            let _ = go.send(());
        };
        let (result, ()) = tokio::join!(fetch, change);
        result.unwrap();
        assert!(!cache.fresh(Duration::from_secs(60)));
        cache
            .ensure_fresh(Duration::from_secs(60), || async { Ok(vec![(2, "b")]) })
            .await
            .unwrap();
        assert_eq!(cache.read(<[_]>::to_vec), vec![(2, "b")]);
    }

    /// A verdict on a list fetched after the reader began stands. Two readers that began
    /// after the list was fetched doubt it, the second while the first one's fetch of a newer
    /// list runs: that newer list answers both (one fetch, not two); a reader that began after
    /// it and doubts it gets another.
    #[tokio::test]
    async fn doubters_of_one_list_share_the_next_fetch() {
        let max_age = Duration::from_secs(60);
        let cache = list();
        let fetches = std::sync::atomic::AtomicUsize::new(0);
        let count = || fetches.load(std::sync::atomic::Ordering::SeqCst);
        let fetch = |items: Vec<(i64, &'static str)>| {
            fetches.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async move { Ok(items) }
        };
        let began = Instant::now();
        cache.ensure_fresh(max_age, || fetch(vec![])).await.unwrap();
        assert!(
            !cache.doubt(began, |_| true),
            "fetched after the reader began"
        );

        let began = Instant::now();
        assert!(!cache.doubt(began, |items| items.len() == 1), "no doubt");
        assert!(cache.fresh(max_age));
        assert!(cache.doubt(began, <[_]>::is_empty));
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let first = cache.ensure_fresh(max_age, || {
            fetches.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async move {
                let _ = wait.await;
                Ok(vec![(1, "created meanwhile")])
            }
        });
        let second = async {
            tokio::task::yield_now().await;
            // Sees the old list (the newer one is still being fetched) and doubts it too.
            assert!(cache.doubt(began, <[_]>::is_empty));
            let _ = go.send(());
            cache
                .ensure_fresh(max_age, || fetch(vec![(9, "refetched")]))
                .await
        };
        let (a, b) = tokio::join!(first, second);
        a.unwrap();
        b.unwrap();
        assert_eq!(count(), 2);
        assert_eq!(cache.read(<[_]>::to_vec), vec![(1, "created meanwhile")]);

        // A reader that began after that fetch and doubts the list gets a newer one.
        let began = Instant::now();
        assert!(cache.doubt(began, |items| items.len() == 1));
        cache
            .ensure_fresh(max_age, || fetch(vec![(2, "b")]))
            .await
            .unwrap();
        assert_eq!(count(), 3);
        assert_eq!(cache.read(<[_]>::to_vec), vec![(2, "b")]);
    }

    /// A doubt asks for a list fetched after the reader began, not only after the list it
    /// doubts: a fetch already under way when the reader began does not answer it (cleanup
    /// after a deletion doubts the cached list without reading it first).
    #[tokio::test]
    async fn a_fetch_under_way_before_the_reader_began_does_not_answer_its_doubt() {
        let max_age = Duration::from_secs(60);
        let cache = list();
        let fetch = |items: Vec<(i64, &'static str)>| async move { Ok(items) };
        cache
            .ensure_fresh(max_age, || fetch(vec![(1, "seen")]))
            .await
            .unwrap();
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let (started, has_started) = tokio::sync::oneshot::channel::<Instant>();
        // Another reader's fetch (the list aged), under way before the reader below began.
        let under_way = cache.ensure_fresh(Duration::ZERO, || async move {
            let _ = started.send(Instant::now());
            let _ = wait.await;
            Ok(vec![(1, "under way")])
        });
        let reader = async {
            let started = has_started.await.unwrap();
            let mut began = Instant::now();
            while began <= started {
                began = Instant::now();
            }
            assert!(cache.doubt(began, |_| true));
            let _ = go.send(());
        };
        let (result, ()) = tokio::join!(under_way, reader);
        result.unwrap();
        cache
            .ensure_fresh(max_age, || fetch(vec![(1, "after")]))
            .await
            .unwrap();
        assert_eq!(
            cache.read(<[_]>::to_vec),
            vec![(1, "after")],
            "the list under way began before the reader"
        );
    }
}
