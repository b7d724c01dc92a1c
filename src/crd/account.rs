//! The `ClusterAccount` and `Account` kinds: a company account of the service, as the operator
//! reaches it (credentials, addresses, request budget), modelled on cert-manager's
//! ClusterIssuer/Issuer and Crossplane's ClusterProviderConfig/ProviderConfig.
//!
//! - [`ClusterAccount`] (cluster-scoped): its credentials Secret lives in the operator's own
//!   namespace (the cluster resource namespace, as for cert-manager's ClusterIssuer), which
//!   tenants cannot read. `spec.namespaceSelector` names the namespaces whose resources may use
//!   it (unset: every namespace, as a ClusterIssuer, a ClusterProviderConfig or External
//!   Secrets' ClusterSecretStore without conditions), and `spec.adoptionNamespaceSelector`
//!   those whose resources may adopt existing objects through it (unset: only the operator's
//!   own namespace).
//! - [`Account`] (namespaced): its Secret lives in its own namespace; only resources of that
//!   namespace use it, and they may adopt through it (whoever can create it holds the key).
//!
//! The operator checks each account with one authenticated call and writes no object at the
//! service (product design, "Accounts and tenancy").

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::conditions::Condition;

/// What an account holds, for both kinds: credentials, addresses, request budget, key scope.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountConnection {
    /// Where the API key is: a key of a Secret (in the operator's namespace for a
    /// ClusterAccount, in the Account's namespace for an Account).
    pub credentials: Credentials,
    /// Base URL of the management API (API keys, sub accounts, sending domains, analytics).
    #[serde(default = "default_api_url")]
    #[schemars(length(min = 8, max = 2048), pattern(URL_PATTERN))]
    pub api_url: String,
    /// Base URL of the transmission API, version segment included.
    #[serde(default = "default_transmission_url")]
    #[schemars(length(min = 8, max = 2048), pattern(URL_PATTERN))]
    pub transmission_url: String,
    /// Requests the operator makes to the service with this account's credentials, and with
    /// those of every sub account reached through it: one budget per company.
    #[serde(default)]
    pub request_budget: RequestBudget,
    /// The scope of the key, when declared: `Company` or `SubAccount`. Unset: the operator finds
    /// the key's own entry in `GET /api-key` (one list read, paged by 100): one authenticated
    /// call alone cannot tell a company key from a sub account key. (The CRD shows the
    /// description of [`KeyScope`] here.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<KeyScope>,
}

/// Pattern of a base URL: `http://` or `https://` followed by a host.
pub const URL_PATTERN: &str = r"^https?://[^\s/?#]+[^\s]*$";

fn default_api_url() -> String {
    crate::api::ClientConfig::DEFAULT_API_URL.to_owned()
}

fn default_transmission_url() -> String {
    crate::api::ClientConfig::DEFAULT_TRANSMISSION_URL.to_owned()
}

/// Where an account's API key is read from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Credentials {
    /// The Secret and key holding the API key (surrounding whitespace ignored). Read again
    /// whenever the Secret changes: a rotated key is used without a restart.
    pub secret_ref: SecretKeyReference,
}

/// A key of a Secret whose namespace is given by the referring kind.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyReference {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Key inside the Secret's `data`. Default `apiKey` (the key an ApiKey's Secret uses).
    #[serde(default = "default_secret_key")]
    #[schemars(length(min = 1, max = 253), pattern(r"^[-._a-zA-Z0-9]+$"))]
    pub key: String,
}

fn default_secret_key() -> String {
    "apiKey".to_owned()
}

/// The request budget of an account (`ClientConfig::max_concurrency` and
/// `requests_per_second`): every attempt, retries included, takes from it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequestBudget {
    /// Most requests started per second, evenly spaced. Unset: unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000))]
    pub requests_per_second: Option<u32>,
    /// Most requests in flight at once. Default 8, as the operator's `--api-concurrency`.
    #[serde(default = "default_concurrency")]
    #[schemars(range(min = 1, max = 1000))]
    pub concurrency: u32,
}

fn default_concurrency() -> u32 {
    crate::api::ClientConfig::DEFAULT_MAX_CONCURRENCY as u32
}

impl Default for RequestBudget {
    fn default() -> Self {
        RequestBudget {
            requests_per_second: None,
            concurrency: default_concurrency(),
        }
    }
}

/// The scope of an API key (product design, decision "Scope of a key"): `Company` (sees and
/// acts on the whole company account) or `SubAccount` (acts within its sub account only). In
/// `spec.scope`: declared, so the operator makes one cheap authenticated call instead of reading
/// the key list; unset, the operator finds the key's own entry in `GET /api-key` (one
/// authenticated call alone cannot tell the two apart). In `status.scope`: as declared or found.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum KeyScope {
    /// A company key: sees and acts on the whole company account.
    Company,
    /// A key of one sub account: acts within that sub account only.
    SubAccount,
}

/// How `status.scope` was learnt.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ScopeSource {
    /// From `spec.scope`.
    Declared,
    /// From the key's own entry in `GET /api-key` (its `subAccountId`), or, when the key is not
    /// listed, from the list showing company keys or keys of several sub accounts (which a sub
    /// account key never sees).
    KeyList,
}

/// A cluster-wide company account: credentials, addresses and request budget, usable by the
/// namespaces its selector matches.
// The derive's repeated `printcolumn(type_ = ...)` arguments are separate columns, not duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "mailtarget.co",
    version = "v1alpha1",
    kind = "ClusterAccount",
    status = "AccountStatus",
    shortname = "mcacct",
    category = "mailtarget",
    doc = "A Mailtarget account (API key, addresses, request budget) usable cluster-wide; its credentials Secret lives in the operator's namespace.",
    printcolumn(name = "Scope", type_ = "string", json_path = ".status.scope"),
    printcolumn(
        name = "SubAccount",
        type_ = "string",
        json_path = ".status.subAccountName"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAccountSpec {
    /// Credentials, addresses, budget and key scope.
    #[serde(flatten)]
    pub connection: AccountConnection,
    /// Namespaces whose resources may use this account (a label selector on Namespaces; the
    /// label `kubernetes.io/metadata.name` selects by name). Unset: every namespace, as with a
    /// cert-manager ClusterIssuer or a Crossplane ClusterProviderConfig. An empty selector (`{}`)
    /// also matches every namespace, as in Kubernetes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Namespaces whose resources may adopt existing objects of the account through it
    /// (annotation `mailtarget.co/adoption-policy`, or an `external-id` the operator did not
    /// write). Unset: only the operator's own namespace: adopting takes over an object any
    /// tenant's resources could otherwise name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adoption_namespace_selector: Option<LabelSelector>,
}

/// A company or sub account key for the resources of one namespace; its credentials Secret
/// lives in the same namespace.
// The derive's repeated `printcolumn(type_ = ...)` arguments are separate columns, not duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "mailtarget.co",
    version = "v1alpha1",
    kind = "Account",
    namespaced,
    status = "AccountStatus",
    shortname = "macct",
    category = "mailtarget",
    doc = "A Mailtarget account (API key, addresses, request budget) for the resources of its namespace; its credentials Secret lives in the same namespace.",
    printcolumn(name = "Scope", type_ = "string", json_path = ".status.scope"),
    printcolumn(
        name = "SubAccount",
        type_ = "string",
        json_path = ".status.subAccountName"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct AccountSpec {
    /// Credentials, addresses, budget and key scope.
    #[serde(flatten)]
    pub connection: AccountConnection,
}

/// The name of the ClusterAccount a resource without `spec.accountRef` uses.
pub const DEFAULT_ACCOUNT: &str = "default";

/// The kind of account an [`AccountReference`] names.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum AccountRefKind {
    /// A [`ClusterAccount`], by name.
    #[default]
    ClusterAccount,
    /// An [`Account`] in the resource's own namespace, by name.
    Account,
}

/// `spec.accountRef` of a SubAccount, ApiKey or SendingDomain: the account the resource is
/// managed through (product design, "Accounts and tenancy"; as Crossplane's
/// `providerConfigRef` and cert-manager's `issuerRef`). Unset: ClusterAccount `default`.
/// Immutable (a CEL transition rule on the spec, see [`super::schema::ACCOUNT_REF_IMMUTABLE`]):
/// moving a resource to another account would leave its object behind in the first one.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountReference {
    /// `ClusterAccount` (default) or `Account` (in the resource's namespace).
    #[serde(default)]
    pub kind: AccountRefKind,
    /// The account's name (a DNS-1123 subdomain, as every object name).
    #[schemars(
        length(min = 1, max = 253),
        pattern(super::schema::DNS_SUBDOMAIN_PATTERN)
    )]
    pub name: String,
}

/// Observed state of an account: the outcome of the last authenticated call, and the key's
/// scope.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountStatus {
    /// `metadata.generation` last checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` (`True` after an authenticated call succeeded with the current credentials;
    /// reasons when not: `CredentialsNotFound`, `CredentialsInvalid`, `Unauthorized`,
    /// `Unreachable`, `ApiRejected`, `InvalidSpec`; `Deleting` while an Account being deleted
    /// waits for the resources that use it), `Reconciling`, `Stalled`.
    #[serde(default)]
    #[schemars(schema_with = "super::schema::conditions")]
    pub conditions: Vec<Condition>,
    /// The key's scope; unset until known (declare `spec.scope` when the key list cannot tell).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<KeyScope>,
    /// How the scope was learnt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_source: Option<ScopeSource>,
    /// The id of the key itself at the service, when found in the key list (never its value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<i64>,
    /// For a sub account key found in the key list: its sub account's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_account_id: Option<i64>,
    /// For a sub account key found in the key list: its sub account's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_account_name: Option<String>,
    /// ClusterAccount only: the namespace the credentials Secret was looked for in (the
    /// cluster resource namespace of the operator instance whose check this status shows).
    /// Instances reading another namespace, which do not find the Secret there, leave the
    /// status to the one that does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_namespace: Option<String>,
}

/// The parts both kinds share, read the same way by the accounts controller.
pub trait AccountKind {
    /// Credentials, addresses, budget and declared scope.
    fn connection(&self) -> &AccountConnection;
    /// The last written status, if any.
    fn account_status(&self) -> Option<&AccountStatus>;
}

impl AccountKind for ClusterAccount {
    fn connection(&self) -> &AccountConnection {
        &self.spec.connection
    }
    fn account_status(&self) -> Option<&AccountStatus> {
        self.status.as_ref()
    }
}

impl AccountKind for Account {
    fn connection(&self) -> &AccountConnection {
        &self.spec.connection
    }
    fn account_status(&self) -> Option<&AccountStatus> {
        self.status.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal manifest gets today's flag defaults: public URLs, 8 requests in flight, no rate,
    /// the `apiKey` key of the Secret, no declared scope.
    #[test]
    fn defaults_match_the_flags() {
        let spec: ClusterAccountSpec = serde_json::from_value(
            serde_json::json!({"credentials": {"secretRef": {"name": "mt"}}}),
        )
        .unwrap();
        let c = &spec.connection;
        assert_eq!(c.api_url, crate::api::ClientConfig::DEFAULT_API_URL);
        assert_eq!(
            c.transmission_url,
            crate::api::ClientConfig::DEFAULT_TRANSMISSION_URL
        );
        assert_eq!(c.request_budget, RequestBudget::default());
        assert_eq!(c.request_budget.concurrency, 8);
        assert_eq!(c.credentials.secret_ref.key, "apiKey");
        assert_eq!(c.scope, None);
        assert!(spec.namespace_selector.is_none() && spec.adoption_namespace_selector.is_none());
    }
}
