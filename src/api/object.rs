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

/// `ApiObject` for a detail type: its list item, its `GET` by id and its paged list with a
/// `search` query (the interface's three object kinds differ only in these names).
macro_rules! api_object {
    ($detail:ty, $item:ty, $get:ident, $query:ident, $list_all:ident) => {
        impl ApiObject for $detail {
            type Item = $item;
            fn id(&self) -> i64 {
                self.id
            }
            async fn read(client: &Client, id: i64) -> Result<Self> {
                client.$get(id).await
            }
            async fn search(client: &Client, text: &str) -> Result<Vec<$item>> {
                let query = $query {
                    search: Some(text.to_string()),
                    ..Default::default()
                };
                client.$list_all(&query).await
            }
        }
    };
}

api_object!(
    ApiKeyDetail,
    ApiKeyListItem,
    get_api_key,
    ListApiKeysQuery,
    list_all_api_keys
);
api_object!(
    SubAccountDetail,
    SubAccountListItem,
    get_sub_account,
    ListSubAccountsQuery,
    list_all_sub_accounts
);
api_object!(
    SendingDomainDetail,
    SendingDomainListItem,
    get_sending_domain,
    ListSendingDomainsQuery,
    list_all_sending_domains
);
