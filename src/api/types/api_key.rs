//! API keys: the interface document, section "Resources and their fields" (API key list item
//! and detail) and section "Endpoints", "API keys".

use std::net::IpAddr;

use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use super::serde_helpers::nullable;

/// `subAccountId` of a company key, i.e. a key of no sub account. The interface does not say how a
/// company key shows; the client reads an absent or null `subAccountId` as 0 too, and the
/// simulator lists company keys with 0.
pub const COMPANY_SUB_ACCOUNT_ID: i64 = 0;

/// One API key as listed by `GET /api-key` (and embedded in a sub account detail).
///
/// `key` is the key value itself: a secret, redacted in `Debug`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiKeyListItem {
    /// Identifier of the key (path parameter of `/api-key/{id}`).
    pub id: i64,
    /// The key value (secret).
    #[serde(default, deserialize_with = "nullable")]
    pub key: SecretString,
    /// Display name of the key.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// Permission type (a free string; its allowed values are not given by the interface).
    #[serde(default, deserialize_with = "nullable")]
    pub permission_type: String,
    /// Identifier of the sub account holding the key.
    #[serde(default, deserialize_with = "nullable")]
    pub sub_account_id: i64,
    /// Name of the sub account holding the key.
    #[serde(default, deserialize_with = "nullable")]
    pub sub_account_name: String,
    /// Creation time (an opaque integer; the interface does not give its unit).
    #[serde(default, deserialize_with = "nullable")]
    pub created_at: i64,
}

/// The list item the service lists for a key as a read answers it.
impl From<&ApiKeyDetail> for ApiKeyListItem {
    fn from(d: &ApiKeyDetail) -> Self {
        ApiKeyListItem {
            id: d.id,
            key: d.key.clone(),
            name: d.name.clone(),
            permission_type: d.permission_type.clone(),
            sub_account_id: d.sub_account_id,
            sub_account_name: d.sub_account_name.clone(),
            created_at: d.created_at,
        }
    }
}

/// One permission attached to an API key (element of [`ApiKeyDetail::permissions`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Permission {
    /// Identifier of the permission (the value used in `permissionIds`).
    pub id: i64,
    /// Name of the permission.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// Human readable description.
    #[serde(default, deserialize_with = "nullable")]
    pub detail: String,
}

/// An API key as returned by `POST /api-key` (201), `GET /api-key/{id}` and `PUT /api-key/{id}`.
///
/// `key` is the key value itself: a secret, redacted in `Debug`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiKeyDetail {
    /// Identifier of the key.
    pub id: i64,
    /// The key value (secret).
    #[serde(default, deserialize_with = "nullable")]
    pub key: SecretString,
    /// Display name of the key.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// Allowed client IP addresses, comma separated; empty when unrestricted.
    #[serde(default, deserialize_with = "nullable")]
    pub allowed_ip: String,
    /// Identifier of the owning company.
    #[serde(default, deserialize_with = "nullable")]
    pub company_id: i64,
    /// Name of the owning company.
    #[serde(default, deserialize_with = "nullable")]
    pub company_name: String,
    /// Creation time (opaque integer).
    #[serde(default, deserialize_with = "nullable")]
    pub created_at: i64,
    /// Permission type (free string).
    #[serde(default, deserialize_with = "nullable")]
    pub permission_type: String,
    /// Permissions granted to the key.
    #[serde(default, deserialize_with = "nullable")]
    pub permissions: Vec<Permission>,
    /// Identifier of the sub account holding the key.
    #[serde(default, deserialize_with = "nullable")]
    pub sub_account_id: i64,
    /// Name of the sub account holding the key.
    #[serde(default, deserialize_with = "nullable")]
    pub sub_account_name: String,
}

impl ApiKeyDetail {
    /// The ids of `permissions`, sorted.
    pub fn permission_ids(&self) -> Vec<i64> {
        let mut ids: Vec<i64> = self.permissions.iter().map(|p| p.id).collect();
        ids.sort_unstable();
        ids
    }

    /// `allowedIp` parsed ([`allowed_ip::parse`]).
    pub fn allowed_ips(&self) -> Vec<IpAddr> {
        allowed_ip::parse(&self.allowed_ip)
    }
}

/// `allowedIp`: the interface's comma separated list of the addresses a key may be used from
/// (empty: from anywhere).
pub mod allowed_ip {
    use std::net::IpAddr;

    /// The addresses in `raw`, sorted and without repeats. Blanks and entries that are not
    /// addresses are skipped (they cannot match a spec, which holds addresses only).
    pub fn parse(raw: &str) -> Vec<IpAddr> {
        parse_each(raw.split(','))
    }

    /// The addresses among `entries`, sorted and without repeats (see [`parse`]).
    pub fn parse_each<'a>(entries: impl IntoIterator<Item = &'a str>) -> Vec<IpAddr> {
        let mut ips: Vec<IpAddr> = (entries.into_iter())
            .filter_map(|s| s.trim().parse().ok())
            .collect();
        ips.sort_unstable();
        ips.dedup();
        ips
    }

    /// `ips` as the interface writes them: comma separated.
    pub fn join(ips: &[IpAddr]) -> String {
        let ips: Vec<String> = ips.iter().map(ToString::to_string).collect();
        ips.join(",")
    }
}

/// One page of `GET /api-key`: the keys on this page and the total `count` over all pages.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiKeyList {
    /// Keys on this page.
    #[serde(default, deserialize_with = "nullable")]
    pub api_keys: Vec<ApiKeyListItem>,
    /// Total number of keys matching the query, over all pages.
    #[serde(default, deserialize_with = "nullable")]
    pub count: i64,
}

/// Query of `GET /api-key`. Every `None` field is left out so the service's default applies
/// (`page` 1, `size` 10, no filter).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListApiKeysQuery {
    /// Page number, starting at 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
    /// Page size (the simulator caps it at 100).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u32>,
    /// Free text search.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search: Option<String>,
    /// Sort expression (its format is not given by the interface).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sort: Option<String>,
    /// Only keys of this sub account.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sub_account_id: Option<i64>,
    /// Only keys of this permission type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission_type: Option<String>,
}

/// Body of `POST /api-key`; every field is optional and left out when `None`.
///
/// The body names no sub account: a key created this way belongs to the scope of the key that
/// calls (the company's, or the calling sub account's: product design, "Scope of a key"; a key
/// is placed inside a sub account by calling with that sub account's credential).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CreateApiKey {
    /// Allowed client IP addresses, comma separated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_ip: Option<String>,
    /// Display name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Permissions to grant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission_ids: Option<Vec<i64>>,
}

/// Body of `PUT /api-key/{id}`; every field is optional and left out when `None`
/// (a field left out is not changed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UpdateApiKey {
    /// Allowed client IP addresses, comma separated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_ip: Option<String>,
    /// Display name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Permissions to grant (replaces the current set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission_ids: Option<Vec<i64>>,
    /// Permission type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission_type: Option<String>,
}
