//! Wire types of the service's interface, one module per resource.
//!
//! Field names follow the interface document exactly (camelCase on the wire), including its
//! quirks: the sending domain list item spells `subAccountID` while the detail spells
//! `subAccountId`, the sub account list item says `name` while the detail says
//! `subAccountName`, and the sending domain `status` is a string in the list item but an array
//! in the detail.
//!
//! Parsing rules shared by every response type:
//! - `id` is required; every other field defaults when absent or `null` (a Go-style server sends
//!   `null` for empty arrays), so a sparse answer still decodes;
//! - a value of the wrong JSON type is an error (surfaced as [`ApiError::Decode`]);
//! - unknown fields are ignored, so the client keeps working when the service adds fields.
//!
//! Secret values (API key values and DKIM private keys) are [`secrecy::SecretString`]: their
//! `Debug` output is redacted and reading them needs an explicit `expose_secret()`.
//!
//! Request types (bodies and queries) leave out every field that is `None`, so the service
//! applies its documented defaults.
//!
//! [`ApiError::Decode`]: crate::api::ApiError::Decode

mod analytics;
mod api_key;
mod sending_domain;
mod serde_helpers;
mod sub_account;
mod transmission;

pub use analytics::{
    AnalyticsPeriod, AnalyticsQuery, AnalyticsSummary, BreakdownQuery, TransmissionEvent,
    TransmissionEvents, TransmissionSender, TransmissionStats, TransmissionStatus,
};
pub use api_key::{
    ApiKeyDetail, ApiKeyList, ApiKeyListItem, COMPANY_SUB_ACCOUNT_ID, CreateApiKey,
    ListApiKeysQuery, Permission, UpdateApiKey, allowed_ip,
};
pub use sending_domain::{
    CreateSendingDomain, ListSendingDomainsQuery, SendingDomainDetail, SendingDomainList,
    SendingDomainListItem, SpfSuggestion, UnverifiedSpf, UnverifiedSpfList,
};
pub use sub_account::{
    CreateSubAccount, ListSubAccountsQuery, SubAccountDetail, SubAccountDomain, SubAccountList,
    SubAccountListItem, UpdateSubAccount,
};
pub use transmission::{
    Attachment, EmailAddress, Header, OptionsAttributes, Transmission, TransmissionAccepted,
};

#[cfg(test)]
mod tests;
