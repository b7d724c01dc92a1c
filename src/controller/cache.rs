//! The controller's view of the account: the three lists, read with the list endpoints and shared
//! by every reconcile.
//!
//! A list is read again when it is older than its maximum age (half the resync interval), so a
//! full resync of N objects costs about `ceil(N / 100)` page calls per kind instead of one GET per
//! object. The operator's own writes update the cached items at once, so a create is never
//! followed by a second create for lack of a fresh list.

use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::api::{
    ApiError, ApiKeyListItem, Client, ListApiKeysQuery, ListSendingDomainsQuery,
    ListSubAccountsQuery, SendingDomainListItem, SubAccountListItem,
};

/// One cached list.
#[derive(Debug)]
pub struct CachedList<T> {
    items: Mutex<(Option<Instant>, Vec<T>)>,
    refresh: tokio::sync::Mutex<()>,
    id_of: fn(&T) -> i64,
}

impl<T: Clone> CachedList<T> {
    fn new(id_of: fn(&T) -> i64) -> Self {
        CachedList {
            items: Mutex::new((None, Vec::new())),
            refresh: tokio::sync::Mutex::new(()),
            id_of,
        }
    }

    fn fresh(&self, max_age: Duration) -> bool {
        self.items
            .lock()
            .map(|g| g.0.is_some_and(|t| t.elapsed() < max_age))
            .unwrap_or(false)
    }

    /// Reads the list with `fetch` when older than `max_age`; one fetch at a time (others wait
    /// for it and reuse its result).
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
        let items = fetch().await?;
        if let Ok(mut g) = self.items.lock() {
            *g = (Some(started), items);
        }
        Ok(())
    }

    /// Runs `f` on the cached items.
    pub fn read<R>(&self, f: impl FnOnce(&[T]) -> R) -> R {
        match self.items.lock() {
            Ok(g) => f(&g.1),
            Err(poisoned) => f(&poisoned.into_inner().1),
        }
    }

    /// Inserts or replaces the item with the same id.
    pub fn upsert(&self, item: T) {
        let id = (self.id_of)(&item);
        if let Ok(mut g) = self.items.lock() {
            match g.1.iter_mut().find(|i| (self.id_of)(i) == id) {
                Some(old) => *old = item,
                None => g.1.push(item),
            }
        }
    }

    /// Removes the item with id `id`.
    pub fn remove(&self, id: i64) {
        if let Ok(mut g) = self.items.lock() {
            g.1.retain(|i| (self.id_of)(i) != id);
        }
    }

    /// Marks the list stale so that the next reconcile reads it again.
    pub fn invalidate(&self) {
        if let Ok(mut g) = self.items.lock() {
            g.0 = None;
        }
    }
}

/// The three cached lists of one account.
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
        }
    }

    /// Makes the sub account list fresh. Errors: the list call's error.
    pub async fn fresh_sub_accounts(&self) -> Result<&CachedList<SubAccountListItem>, ApiError> {
        let q = ListSubAccountsQuery::default();
        self.sub_accounts
            .ensure_fresh(self.max_age, || self.client.list_all_sub_accounts(&q))
            .await?;
        Ok(&self.sub_accounts)
    }

    /// Makes the API key list fresh. Errors: the list call's error.
    pub async fn fresh_api_keys(&self) -> Result<&CachedList<ApiKeyListItem>, ApiError> {
        let q = ListApiKeysQuery::default();
        self.api_keys
            .ensure_fresh(self.max_age, || self.client.list_all_api_keys(&q))
            .await?;
        Ok(&self.api_keys)
    }

    /// Makes the sending domain list fresh. Errors: the list call's error.
    pub async fn fresh_sending_domains(
        &self,
    ) -> Result<&CachedList<SendingDomainListItem>, ApiError> {
        let q = ListSendingDomainsQuery::default();
        self.sending_domains
            .ensure_fresh(self.max_age, || self.client.list_all_sending_domains(&q))
            .await?;
        Ok(&self.sending_domains)
    }
}
