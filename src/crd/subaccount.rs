//! The `SubAccount` kind: a sub account of the company account
//! (interface document, section "Sub accounts").

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{ManagementPolicy, Ownership, SubAccountDeletionPolicy};
use super::conditions::Condition;

/// Desired state of a sub account.
///
/// Maps to the bodies of `POST /sub-account` and `PUT /sub-account/{id}`.
// The derive's repeated `printcolumn(type_ = ...)` arguments are separate columns, not duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "mailtarget.co",
    version = "v1alpha1",
    kind = "SubAccount",
    namespaced,
    status = "SubAccountStatus",
    shortname = "msub",
    category = "mailtarget",
    doc = "A Mailtarget sub account managed by mailtarget-operator.",
    printcolumn(name = "Service-Name", type_ = "string", json_path = ".status.name"),
    printcolumn(name = "ID", type_ = "integer", json_path = ".status.id"),
    printcolumn(name = "Status", type_ = "string", json_path = ".status.status"),
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
#[schemars(extend("x-kubernetes-validations" = [{"rule": super::schema::ACCOUNT_REF_IMMUTABLE, "message": super::schema::ACCOUNT_REF_IMMUTABLE_MESSAGE}]))]
pub struct SubAccountSpec {
    /// The account this resource is managed through: a ClusterAccount (default kind) or an
    /// Account of this namespace. Unset: ClusterAccount `default`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::account_ref")]
    pub account_ref: Option<super::account::AccountReference>,
    /// Sub account name in the service (`name` on create and update). Defaults to
    /// `metadata.name`. Also the natural key used to adopt an existing sub account (compared
    /// ignoring ASCII case, as the service does). No leading or trailing whitespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 100), pattern(super::schema::NAME_PATTERN))]
    pub name: Option<String>,

    /// Sub account `status` (free string; the service's values are not documented). Unset leaves
    /// the service's default (the simulator uses `active`). No leading or trailing whitespace
    /// (the service trims it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), pattern(super::schema::NAME_PATTERN))]
    pub status: Option<String>,

    /// IP pool to assign (`ipPoolId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ip_pool_id: Option<i64>,

    /// The first API key of the sub account, created with it (`createApiKey` and the fields after
    /// it on `POST /sub-account`). Used at creation only: changing it later has no effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<InitialApiKey>,

    /// Name of the sub account's API key the operator calls with for the objects inside it
    /// (ApiKeys and SendingDomains whose `subAccountRef` names this SubAccount). Unset: the
    /// key created with the sub account: `spec.apiKey`'s when that is set (release 0.1), else
    /// `mailtarget-operator`, which the operator creates with the sub account (full
    /// permissions, no address restriction). For a sub account adopted rather than created,
    /// name one of its keys. Must be `spec.apiKey`'s name when both are set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 100), pattern(super::schema::NAME_PATTERN))]
    pub credential_key_name: Option<String>,

    /// Namespaces besides this one whose ApiKeys and SendingDomains may place objects inside
    /// the sub account (`subAccountRef.namespace` naming this namespace): a label selector on
    /// Namespaces (`kubernetes.io/metadata.name` selects by name). Unset: none; `{}`: every
    /// namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_namespaces: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,

    /// What deleting this resource does: `Orphan` (default) leaves the sub account, `Deactivate`
    /// sets its status to `deactivatedStatus`. The interface has no DELETE for sub accounts.
    #[serde(default)]
    pub deletion_policy: SubAccountDeletionPolicy,

    /// Status written by `deletionPolicy: Deactivate`. Default `inactive`. No leading or trailing
    /// whitespace (the service trims it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), pattern(super::schema::NAME_PATTERN))]
    pub deactivated_status: Option<String>,

    /// `Full` (default) manages the sub account; `ObserveOnly` only reports it.
    #[serde(default)]
    pub management_policy: ManagementPolicy,
}

/// The sub account's first API key, created by `POST /sub-account` with `createApiKey: true`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InitialApiKey {
    /// Key name (`apiKeyName`). Defaults to the sub account name. No leading or trailing
    /// whitespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 100), pattern(super::schema::NAME_PATTERN))]
    pub name: Option<String>,
    /// `permissionType` of the key (free string; no leading or trailing whitespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), pattern(super::schema::NAME_PATTERN))]
    pub permission_type: Option<String>,
    /// `permissionIds` of the key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "super::schema::permission_ids")]
    pub permission_ids: Vec<i64>,
    /// IP addresses allowed to use the key (`allowedIps`, joined with commas on the wire).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "super::schema::ip_list")]
    pub allowed_ips: Vec<String>,
    /// Secret (same namespace) that receives the key value under `apiKey`.
    #[schemars(length(min = 1, max = 253))]
    pub secret_name: String,
}

/// Observed state of a sub account, mirrored from `GET /sub-account/{id}`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubAccountStatus {
    /// Sub account id in the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    /// Whether the resource owns the object `id` names (`Owned`) or only observes it
    /// (`Observed`, written by `ManagementPolicy::ObserveOnly`). Absent next to an `id`: written
    /// by release 0.1, which owned what `id` names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership: Option<Ownership>,
    /// `subAccountName` in the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `status` in the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// `ipPoolId` in the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_pool_id: Option<i64>,
    /// `ipPoolName` in the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_pool_name: Option<String>,
    /// `createdAt` in the service (an opaque integer timestamp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<i64>,
    /// The key the operator calls with inside the sub account (id and name, never the value);
    /// absent while it is not found among the sub account's keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<NamedId>,
    /// API keys of the sub account (ids and names, never values).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_keys: Vec<NamedId>,
    /// Sending domains of the sub account.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<NamedId>,
    /// `metadata.generation` last reconciled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Reconciling`, `Stalled`.
    #[serde(default)]
    #[schemars(schema_with = "super::schema::conditions")]
    pub conditions: Vec<Condition>,
}

/// An id with the object's name (API keys) or domain (sending domains).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct NamedId {
    /// Id in the service.
    pub id: i64,
    /// Name of the key, or the domain.
    pub name: String,
}

impl NamedId {
    /// The entry for object `id` called `name`.
    pub fn new(id: i64, name: &str) -> Self {
        NamedId {
            id,
            name: name.to_string(),
        }
    }
}

impl SubAccount {
    /// The sub account name in the service: `spec.name`, else `metadata.name`.
    pub fn service_name(&self) -> &str {
        self.spec
            .name
            .as_deref()
            .or(self.metadata.name.as_deref())
            .unwrap_or_default()
    }
}
