//! The `ApiKey` kind: an API key (interface document, section "API keys"), its value written
//! to a Secret.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{DeletionPolicy, ManagementPolicy, Ownership, SubAccountReference};
use super::conditions::Condition;
use super::subaccount::NamedId;

/// Desired state of an API key. Maps to `POST /api-key` and `PUT /api-key/{id}`.
///
/// With `subAccountRef` the key lives inside that SubAccount's sub account: it is created,
/// changed and deleted with the sub account's credential (product design, "Accounts and
/// tenancy"; a key created with a sub account's key belongs to that sub account). Without it,
/// the key is a key of the account `accountRef` names.
// The derive's repeated `printcolumn(type_ = ...)` arguments are separate columns, not duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "mailtarget.co",
    version = "v1alpha1",
    kind = "ApiKey",
    namespaced,
    status = "ApiKeyStatus",
    shortname = "mkey",
    category = "mailtarget",
    doc = "A Mailtarget API key managed by mailtarget-operator; the key value goes to a Secret.",
    printcolumn(name = "Service-Name", type_ = "string", json_path = ".status.name"),
    printcolumn(name = "ID", type_ = "integer", json_path = ".status.id"),
    printcolumn(
        name = "Permission",
        type_ = "string",
        json_path = ".status.permissionType"
    ),
    printcolumn(
        name = "SubAccount",
        type_ = "string",
        json_path = ".status.subAccountName"
    ),
    printcolumn(name = "Secret", type_ = "string", json_path = ".spec.secretName"),
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
pub struct ApiKeySpec {
    /// The account this resource is managed through: a ClusterAccount (default kind) or an
    /// Account of this namespace. Unset: ClusterAccount `default`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::account_ref")]
    pub account_ref: Option<super::account::AccountReference>,
    /// Key name in the service (`name`). Defaults to `metadata.name`. Also the natural key used to
    /// adopt an existing key. No leading or trailing whitespace (the service trims names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 100), pattern(super::schema::NAME_PATTERN))]
    pub name: Option<String>,
    /// `permissionType` (free string; values are not documented by the interface). No leading or
    /// trailing whitespace (the service trims it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), pattern(super::schema::NAME_PATTERN))]
    pub permission_type: Option<String>,
    /// `permissionIds`. Empty or unset: not managed, the key keeps the ids it has (the
    /// interface does not say what an empty list grants, so none is sent).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "super::schema::permission_ids")]
    pub permission_ids: Vec<i64>,
    /// IP addresses allowed to use the key (`allowedIp`, joined with commas on the wire).
    /// Empty means any address.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "super::schema::ip_list")]
    pub allowed_ips: Vec<String>,
    /// Secret (same namespace, owned by this ApiKey) that receives the key value under `apiKey`.
    #[schemars(length(min = 1, max = 253))]
    pub secret_name: String,
    /// SubAccount whose sub account holds the key: the key is created, changed and deleted
    /// there with the sub account's credential, and looked up only among that sub account's
    /// keys. Unset: a key of the account itself. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_account_ref: Option<SubAccountReference>,
    /// `Delete` (default) deletes the key with the resource; `Orphan` leaves it.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
    /// `Full` (default) manages the key; `ObserveOnly` only reports it.
    #[serde(default)]
    pub management_policy: ManagementPolicy,
}

/// Observed state of an API key, mirrored from `GET /api-key/{id}`. Never holds the key value.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiKeyStatus {
    /// Key id in the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    /// Whether the resource owns the object `id` names (`Owned`) or only observes it
    /// (`Observed`, written by `ManagementPolicy::ObserveOnly`). Absent next to an `id`: written
    /// by release 0.1, which owned what `id` names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership: Option<Ownership>,
    /// `name` in the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `subAccountId` in the service (0 or absent for company keys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_account_id: Option<i64>,
    /// `subAccountName` in the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_account_name: Option<String>,
    /// `permissionType` in the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_type: Option<String>,
    /// `permissions` in the service (ids and names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permissions: Vec<NamedId>,
    /// `allowedIp` in the service, split at commas.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_ips: Vec<String>,
    /// `createdAt` in the service (an opaque integer timestamp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<i64>,
    /// `metadata.generation` last reconciled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Reconciling`, `Stalled`.
    #[serde(default)]
    #[schemars(schema_with = "super::schema::conditions")]
    pub conditions: Vec<Condition>,
}

impl ApiKey {
    /// The key name in the service: `spec.name`, else `metadata.name`.
    pub fn service_name(&self) -> &str {
        self.spec
            .name
            .as_deref()
            .or(self.metadata.name.as_deref())
            .unwrap_or_default()
    }
}
