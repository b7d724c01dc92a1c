//! Sub accounts: the interface document, section "Resources and their fields" (Sub account) and
//! section "Endpoints", "Sub accounts".

use serde::{Deserialize, Serialize};

use super::api_key::ApiKeyListItem;
use super::serde_helpers::nullable;

/// One sub account as listed by `GET /sub-account`. Note: the list item calls the name `name`,
/// the detail calls it `subAccountName`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubAccountListItem {
    /// Identifier of the sub account.
    pub id: i64,
    /// Name of the sub account.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// Status (free string; the simulator uses `active` by default).
    #[serde(default, deserialize_with = "nullable")]
    pub status: String,
    /// Creation time (opaque integer).
    #[serde(default, deserialize_with = "nullable")]
    pub created_at: i64,
}

/// The list item the service lists for a sub account as a read answers it (the detail's
/// `subAccountName` is the list item's `name`).
impl From<&SubAccountDetail> for SubAccountListItem {
    fn from(d: &SubAccountDetail) -> Self {
        SubAccountListItem {
            id: d.id,
            name: d.sub_account_name.clone(),
            status: d.status.clone(),
            created_at: d.created_at,
        }
    }
}

/// A sending domain as embedded in a sub account detail.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubAccountDomain {
    /// Identifier of the sending domain.
    pub id: i64,
    /// Domain name.
    #[serde(default, deserialize_with = "nullable")]
    pub domain: String,
    /// Creation time (opaque integer).
    #[serde(default, deserialize_with = "nullable")]
    pub created_at: i64,
    /// Last update time (opaque integer).
    #[serde(default, deserialize_with = "nullable")]
    pub updated_at: i64,
}

/// A sub account as returned by `POST /sub-account` (200, not 201), `GET /sub-account/{id}` and
/// `PUT /sub-account/{id}`.
///
/// `api_keys` holds the keys of the sub account, values included (secret, redacted in `Debug`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubAccountDetail {
    /// Identifier of the sub account.
    pub id: i64,
    /// Identifier of the owning company.
    #[serde(default, deserialize_with = "nullable")]
    pub company_id: i64,
    /// Name of the sub account.
    #[serde(default, deserialize_with = "nullable")]
    pub sub_account_name: String,
    /// Status (free string).
    #[serde(default, deserialize_with = "nullable")]
    pub status: String,
    /// Creation time (opaque integer).
    #[serde(default, deserialize_with = "nullable")]
    pub created_at: i64,
    /// Identifier of the assigned IP pool.
    #[serde(default, deserialize_with = "nullable")]
    pub ip_pool_id: i64,
    /// Name of the assigned IP pool.
    #[serde(default, deserialize_with = "nullable")]
    pub ip_pool_name: String,
    /// API keys of the sub account.
    #[serde(default, deserialize_with = "nullable")]
    pub api_keys: Vec<ApiKeyListItem>,
    /// Sending domains of the sub account.
    #[serde(default, deserialize_with = "nullable")]
    pub domains: Vec<SubAccountDomain>,
}

/// One page of `GET /sub-account`: the sub accounts on this page and the total `count`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubAccountList {
    /// Total number of sub accounts matching the query, over all pages.
    #[serde(default, deserialize_with = "nullable")]
    pub count: i64,
    /// Sub accounts on this page.
    #[serde(default, deserialize_with = "nullable")]
    pub sub_accounts: Vec<SubAccountListItem>,
}

/// Query of `GET /sub-account`. Every `None` field is left out so the service's default applies
/// (`page` 1, `size` 10, empty `search` and `status`, no `hasApiKey` filter).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListSubAccountsQuery {
    /// Page number, starting at 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
    /// Page size (the simulator caps it at 100).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u32>,
    /// Free text search.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search: Option<String>,
    /// Only sub accounts with this status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Only sub accounts with (`true`) or without (`false`) an API key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub has_api_key: Option<bool>,
}

/// Body of `POST /sub-account`; every field is optional and left out when `None`.
///
/// With `create_api_key: Some(true)` the service also creates a key named `api_key_name` with
/// the given permissions; it is returned in [`SubAccountDetail::api_keys`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CreateSubAccount {
    /// Name of the sub account.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Initial status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// IP pool to assign.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_pool_id: Option<i64>,
    /// Allowed client IP addresses of the created key, comma separated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_ips: Option<String>,
    /// Also create an API key in the new sub account.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub create_api_key: Option<bool>,
    /// Name of the created key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_name: Option<String>,
    /// Permissions of the created key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission_ids: Option<Vec<i64>>,
    /// Permission type of the created key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission_type: Option<String>,
}

/// Body of `PUT /sub-account/{id}`; every field is optional and left out when `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UpdateSubAccount {
    /// IP pool to assign.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_pool_id: Option<i64>,
    /// New name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// New status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}
