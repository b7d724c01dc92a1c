//! The three objects the operator manages (interface document, sections "API keys", "Sub
//! accounts", "Sending domains") in one shape: each has an id, is read by id, is listed with a
//! free-text `search`, and a read answers more than its list item shows. The managed-resource
//! engine (`crate::engine`) works on this shape whatever the kind.

use std::future::Future;

use super::Client;
use super::error::Result;
use super::types::{
    ApiKeyDetail, ApiKeyListItem, ListApiKeysQuery, ListSendingDomainsQuery, ListSubAccountsQuery,
    SendingDomainDetail, SendingDomainListItem, SubAccountDetail, SubAccountListItem,
};

/// An object as a read, a create or an update answers it.
pub trait ApiObject: Send + Sync + Sized + 'static {
    /// The object as a list page shows it; `From<&Self>` gives the item the service would now
    /// list for an answered object (used to keep a cached list current).
    type Item: Clone + Send + Sync + for<'a> From<&'a Self>;
    /// The object's id.
    fn id(&self) -> i64;
    /// `GET /{resource}/{id}`.
    ///
    /// Errors: [`ApiError::NotFound`](super::ApiError::NotFound) for an unknown id, or any other
    /// [`ApiError`](super::ApiError).
    fn read(client: &Client, id: i64) -> impl Future<Output = Result<Self>> + Send;
    /// Every object the list endpoint's free-text `search` for `text` answers, all pages (see
    /// the `list_all_*` methods of [`Client`]).
    ///
    /// Errors: the first failing page's.
    fn search(client: &Client, text: &str) -> impl Future<Output = Result<Vec<Self::Item>>> + Send;
}

impl ApiObject for ApiKeyDetail {
    type Item = ApiKeyListItem;
    fn id(&self) -> i64 {
        self.id
    }
    async fn read(client: &Client, id: i64) -> Result<Self> {
        client.get_api_key(id).await
    }
    async fn search(client: &Client, text: &str) -> Result<Vec<ApiKeyListItem>> {
        let search = Some(text.to_string());
        let query = ListApiKeysQuery {
            search,
            ..Default::default()
        };
        client.list_all_api_keys(&query).await
    }
}

impl ApiObject for SubAccountDetail {
    type Item = SubAccountListItem;
    fn id(&self) -> i64 {
        self.id
    }
    async fn read(client: &Client, id: i64) -> Result<Self> {
        client.get_sub_account(id).await
    }
    async fn search(client: &Client, text: &str) -> Result<Vec<SubAccountListItem>> {
        let search = Some(text.to_string());
        let query = ListSubAccountsQuery {
            search,
            ..Default::default()
        };
        client.list_all_sub_accounts(&query).await
    }
}

impl ApiObject for SendingDomainDetail {
    type Item = SendingDomainListItem;
    fn id(&self) -> i64 {
        self.id
    }
    async fn read(client: &Client, id: i64) -> Result<Self> {
        client.get_sending_domain(id).await
    }
    async fn search(client: &Client, text: &str) -> Result<Vec<SendingDomainListItem>> {
        let search = Some(text.to_string());
        let query = ListSendingDomainsQuery {
            search,
            ..Default::default()
        };
        client.list_all_sending_domains(&query).await
    }
}
