//! Sending domains: the interface document, section "Resources and their fields" (Sending
//! domain, SPF suggestion, Unverified SPF entry) and section "Endpoints", "Sending domains".

use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use super::serde_helpers::{nullable, string_or_list};

/// One sending domain as listed by `GET /domain/sending`.
///
/// Quirks of the list item: the sub account id is spelled `subAccountID` on the wire (the
/// spelling `subAccountId` is accepted too) and `status` is a single string.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendingDomainListItem {
    /// Identifier of the domain.
    pub id: i64,
    /// Domain name.
    #[serde(default, deserialize_with = "nullable")]
    pub domain: String,
    /// Assignment (free string; the simulator uses `company` by default).
    #[serde(default, deserialize_with = "nullable")]
    pub assignment: String,
    /// Identifier of the owning company.
    #[serde(default, deserialize_with = "nullable")]
    pub company_id: i64,
    /// Creation time (opaque integer).
    #[serde(default, deserialize_with = "nullable")]
    pub created_at: i64,
    /// Whether this is the default domain.
    #[serde(default, deserialize_with = "nullable")]
    pub default: bool,
    /// Status (a single string in the list item).
    #[serde(default, deserialize_with = "nullable")]
    pub status: String,
    /// Identifier of the sub account (wire name `subAccountID`).
    #[serde(
        rename = "subAccountID",
        alias = "subAccountId",
        default,
        deserialize_with = "nullable"
    )]
    pub sub_account_id: i64,
    /// Name of the sub account.
    #[serde(default, deserialize_with = "nullable")]
    pub sub_account_name: String,
    /// Types of the domain (free strings; the simulator uses `["sending"]`).
    #[serde(default, deserialize_with = "nullable")]
    pub types: Vec<String>,
}

/// The list item the service lists for a domain as a read answers it: `status` is `verified`
/// when all three records are, else the detail's first status (`pending` when it has none).
impl From<&SendingDomainDetail> for SendingDomainListItem {
    fn from(d: &SendingDomainDetail) -> Self {
        let status = match d.status.first() {
            _ if d.is_verified() => "verified".to_string(),
            Some(first) => first.clone(),
            None => "pending".to_string(),
        };
        SendingDomainListItem {
            id: d.id,
            domain: d.domain.clone(),
            assignment: d.assignment.clone(),
            created_at: d.created_at,
            status,
            sub_account_id: d.sub_account_id,
            sub_account_name: d.sub_account_name.clone(),
            types: d.types.clone(),
            ..Default::default()
        }
    }
}

/// A sending domain as returned by `POST /domain/sending` (201), `GET /domain/sending/{id}`,
/// `PUT /domain/sending/{id}/share` and (as an array) `PUT /domain/sending/{id}/verify-txt`.
///
/// Holds the DNS records to publish. `dkim_private_key` is a secret, redacted in `Debug`.
/// `status` is an array here (a bare string is accepted as a one-element list).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendingDomainDetail {
    /// Identifier of the domain.
    pub id: i64,
    /// Domain name.
    #[serde(default, deserialize_with = "nullable")]
    pub domain: String,
    /// Assignment (free string).
    #[serde(default, deserialize_with = "nullable")]
    pub assignment: String,
    /// Creation time (opaque integer).
    #[serde(default, deserialize_with = "nullable")]
    pub created_at: i64,
    /// Status values (the simulator gives `["pending"]`, then `["verified"]`).
    #[serde(default, deserialize_with = "string_or_list")]
    pub status: Vec<String>,
    /// Types of the domain.
    #[serde(default, deserialize_with = "nullable")]
    pub types: Vec<String>,
    /// Identifier of the sub account (wire name `subAccountId`; `subAccountID` accepted too).
    #[serde(alias = "subAccountID", default, deserialize_with = "nullable")]
    pub sub_account_id: i64,
    /// Name of the sub account.
    #[serde(default, deserialize_with = "nullable")]
    pub sub_account_name: String,
    /// Identifier of the tracking domain.
    #[serde(default, deserialize_with = "nullable")]
    pub tracking_domain_id: i64,
    /// Name of the tracking domain.
    #[serde(default, deserialize_with = "nullable")]
    pub tracking_domain_name: String,
    /// Host name of the SPF TXT record to publish.
    #[serde(default, deserialize_with = "nullable")]
    pub spf_hostname: String,
    /// Value of the SPF TXT record to publish.
    #[serde(default, deserialize_with = "nullable")]
    pub spf_value: String,
    /// Whether the SPF record was found.
    #[serde(default, deserialize_with = "nullable")]
    pub spf_verified: bool,
    /// DKIM selector.
    #[serde(default, deserialize_with = "nullable")]
    pub dkim_selector: String,
    /// Host name of the DKIM TXT record to publish.
    #[serde(default, deserialize_with = "nullable")]
    pub dkim_hostname: String,
    /// Value of the DKIM TXT record to publish.
    #[serde(default, deserialize_with = "nullable")]
    pub dkim_value: String,
    /// DKIM public key.
    #[serde(default, deserialize_with = "nullable")]
    pub dkim_public_key: String,
    /// DKIM private key (secret).
    #[serde(default, deserialize_with = "nullable")]
    pub dkim_private_key: SecretString,
    /// Whether the DKIM record was found.
    #[serde(default, deserialize_with = "nullable")]
    pub dkim_verified: bool,
    /// Host name of the tracking CNAME record to publish.
    #[serde(default, deserialize_with = "nullable")]
    pub cname_hostname: String,
    /// Target of the tracking CNAME record to publish.
    #[serde(default, deserialize_with = "nullable")]
    pub cname_value: String,
    /// Whether the CNAME record was found.
    #[serde(default, deserialize_with = "nullable")]
    pub cname_verified: bool,
}

impl SendingDomainDetail {
    /// True when the SPF, DKIM and CNAME records are all verified.
    pub fn is_verified(&self) -> bool {
        self.spf_verified && self.dkim_verified && self.cname_verified
    }
}

/// One page of `GET /domain/sending`: the domains on this page and the total `count`.
///
/// On the wire the answer is an array holding objects of this shape; the client unwraps it
/// (see [`Client::list_sending_domains`](crate::api::Client::list_sending_domains)).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendingDomainList {
    /// Total number of domains matching the query, over all pages.
    #[serde(default, deserialize_with = "nullable")]
    pub count: i64,
    /// Domains on this page (wire name `sendingDomain`).
    #[serde(default, deserialize_with = "nullable")]
    pub sending_domain: Vec<SendingDomainListItem>,
}

/// Query of `GET /domain/sending`. Every `None` field is left out so the service's default
/// applies (`page` 1, `size` 10, no filter).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListSendingDomainsQuery {
    /// Page number, starting at 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
    /// Page size (the simulator caps it at 100).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u32>,
    /// Free text search.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search: Option<String>,
    /// Only domains with this status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// Body of `POST /domain/sending`: `domain` is required, the rest is left out when `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateSendingDomain {
    /// Domain name to register.
    pub domain: String,
    /// Assignment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignment: Option<String>,
    /// Free note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One entry of `GET /domain/sending/unverified-spf`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnverifiedSpf {
    /// Identifier of the domain.
    pub id: i64,
    /// Domain name.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
}

/// Answer of `GET /domain/sending/unverified-spf`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnverifiedSpfList {
    /// Number of entries.
    #[serde(default, deserialize_with = "nullable")]
    pub count: i64,
    /// Domains whose SPF record is not verified.
    #[serde(default, deserialize_with = "nullable")]
    pub data: Vec<UnverifiedSpf>,
}

/// Answer of `GET /domain/sending/{id}/spf-suggestion`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpfSuggestion {
    /// Explanation of the suggestion.
    #[serde(default, deserialize_with = "nullable")]
    pub note: String,
    /// The SPF records currently found.
    #[serde(default, deserialize_with = "nullable")]
    pub spf_records: Vec<String>,
    /// The suggested SPF record.
    #[serde(default, deserialize_with = "nullable")]
    pub suggestion: String,
}
