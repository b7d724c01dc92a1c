//! A snapshot of the account read with the list endpoints: every sub account, API key and
//! sending domain. Reading the account this way costs `ceil(N / 100)` page calls per kind
//! instead of one GET per object (the interface's lists carry `count`; pages of 100).

use crate::api::{
    ApiError, ApiKeyListItem, Client, ListApiKeysQuery, ListSendingDomainsQuery,
    ListSubAccountsQuery, SendingDomainListItem, SubAccountDetail, SubAccountListItem,
};

/// Every object of the account, as list items.
#[derive(Clone, Debug, Default)]
pub struct Inventory {
    /// `GET /sub-account`, all pages.
    pub sub_accounts: Vec<SubAccountListItem>,
    /// `GET /api-key`, all pages.
    pub api_keys: Vec<ApiKeyListItem>,
    /// `GET /domain/sending`, all pages.
    pub sending_domains: Vec<SendingDomainListItem>,
    /// The sub account of the key the lists were read with, when it is a sub account's key
    /// ([`super::placement::own_sub_account`]): where the account's resources live.
    pub own_sub_account: Option<i64>,
}

impl Inventory {
    /// Reads the three lists concurrently.
    ///
    /// Errors: the first failing list call (after the client's retries).
    pub async fn load(client: &Client) -> Result<Inventory, ApiError> {
        let (sa, keys, domains) = (
            ListSubAccountsQuery::default(),
            ListApiKeysQuery::default(),
            ListSendingDomainsQuery::default(),
        );
        let (sub_accounts, api_keys, sending_domains) = tokio::try_join!(
            client.list_all_sub_accounts(&sa),
            client.list_all_api_keys(&keys),
            client.list_all_sending_domains(&domains),
        )?;
        Ok(Inventory {
            own_sub_account: super::placement::own_sub_account(&api_keys, client),
            sub_accounts,
            api_keys,
            sending_domains,
        })
    }

    /// What the sub account `detail` holds a moment after its create answered it: the keys
    /// that answer lists (the key it was created with), and no domain yet.
    pub fn of_new_sub_account(detail: &SubAccountDetail) -> Inventory {
        let keys = detail.api_keys.iter().map(|k| ApiKeyListItem {
            sub_account_id: detail.id,
            ..k.clone()
        });
        Inventory {
            api_keys: keys.collect(),
            ..Inventory::default()
        }
    }
}
