//! The `SendingDomain` kind: a sending domain and the DNS records to publish for it
//! (interface document, section "Sending domains").

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{DeletionPolicy, ManagementPolicy, Ownership};
use super::conditions::Condition;

/// Desired state of a sending domain. Maps to `POST /domain/sending` and
/// `PUT /domain/sending/{id}/share`.
// The derive's repeated `printcolumn(type_ = ...)` arguments are separate columns, not duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "mailtarget.co",
    version = "v1alpha1",
    kind = "SendingDomain",
    namespaced,
    status = "SendingDomainStatus",
    shortname = "mdom",
    category = "mailtarget",
    doc = "A Mailtarget sending domain managed by mailtarget-operator.",
    printcolumn(name = "Domain", type_ = "string", json_path = ".spec.domain"),
    printcolumn(name = "ID", type_ = "integer", json_path = ".status.id", priority = 1),
    printcolumn(
        name = "SPF",
        type_ = "boolean",
        json_path = ".status.dnsRecords[?(@.purpose==\"spf\")].verified"
    ),
    printcolumn(
        name = "DKIM",
        type_ = "boolean",
        json_path = ".status.dnsRecords[?(@.purpose==\"dkim\")].verified"
    ),
    printcolumn(
        name = "CNAME",
        type_ = "boolean",
        json_path = ".status.dnsRecords[?(@.purpose==\"tracking\")].verified"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": super::schema::ACCOUNT_REF_IMMUTABLE, "message": super::schema::ACCOUNT_REF_IMMUTABLE_MESSAGE},
    {"rule": super::schema::SUB_ACCOUNT_REF_IMMUTABLE, "message": super::schema::SUB_ACCOUNT_REF_IMMUTABLE_MESSAGE},
]))]
pub struct SendingDomainSpec {
    /// The account this resource is managed through: a ClusterAccount (default kind) or an
    /// Account of this namespace. Unset: ClusterAccount `default`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::account_ref")]
    pub account_ref: Option<super::account::AccountReference>,
    /// SubAccount whose sub account holds the domain: it is created, verified, shared and
    /// deleted there with the sub account's credential, and looked up only among that sub
    /// account's domains. Unset: a domain of the account itself. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_account_ref: Option<super::common::SubAccountReference>,
    /// The domain (`domain` on create). Required, immutable, a lowercase hostname; the natural key
    /// used to adopt an existing sending domain.
    #[schemars(schema_with = "super::schema::domain")]
    pub domain: String,
    /// `assignment` on create (free string; the simulator's default is `company`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub assignment: Option<String>,
    /// `note` on create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1000))]
    pub note: Option<String>,
    /// Share the domain across sub accounts (`PUT /domain/sending/{id}/share`, once).
    #[serde(default)]
    pub shared: bool,
    /// Secret (same namespace) that receives the DKIM private key under `dkimPrivateKey`.
    /// Unset: the private key is not stored anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub dkim_private_key_secret_name: Option<String>,
    /// `Delete` (default) deletes the domain with the resource; `Orphan` leaves it.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
    /// `Full` (default) manages the domain; `ObserveOnly` only reports it.
    #[serde(default)]
    pub management_policy: ManagementPolicy,
}

/// Observed state of a sending domain, mirrored from `GET /domain/sending/{id}`.
/// Never holds the DKIM private key.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendingDomainStatus {
    /// Sending domain id in the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    /// Whether the resource owns the object `id` names (`Owned`) or only observes it
    /// (`Observed`, written by `ManagementPolicy::ObserveOnly`). Absent next to an `id`: written
    /// by release 0.1, which owned what `id` names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership: Option<Ownership>,
    /// `status` list in the service, e.g. `["pending"]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub status: Vec<String>,
    /// `types` in the service.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub types: Vec<String>,
    /// `assignment` in the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignment: Option<String>,
    /// `subAccountId` in the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_account_id: Option<i64>,
    /// The DNS records to publish: SPF TXT, DKIM TXT and the tracking CNAME.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dns_records: Vec<DnsRecord>,
    /// `dkimSelector` in the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dkim_selector: Option<String>,
    /// `dkimPublicKey` in the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dkim_public_key: Option<String>,
    /// `trackingDomainName` in the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracking_domain: Option<String>,
    /// `suggestion` of `GET /domain/sending/{id}/spf-suggestion`, while SPF is unverified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spf_suggestion: Option<String>,
    /// True when SPF, DKIM and the tracking CNAME are all verified.
    #[serde(default)]
    pub verified: bool,
    /// Number of `verify-txt` calls made since the domain was last seen unverified; drives the
    /// verification backoff across restarts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify_attempts: Option<u32>,
    /// RFC 3339 time of the last `verify-txt` call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_verify_time: Option<String>,
    /// `metadata.generation` last reconciled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Reconciling`, `Stalled`.
    #[serde(default)]
    #[schemars(schema_with = "super::schema::conditions")]
    pub conditions: Vec<Condition>,
}

/// One DNS record to publish for a sending domain.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DnsRecord {
    /// `spf`, `dkim` or `tracking`.
    pub purpose: String,
    /// DNS record type: `TXT` or `CNAME`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Fully qualified name of the record (`spfHostname`, `dkimHostname`, `cnameHostname`).
    pub hostname: String,
    /// Record value (`spfValue`, `dkimValue`, `cnameValue`).
    pub value: String,
    /// The service's verification flag for this record.
    pub verified: bool,
}
