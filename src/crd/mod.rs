//! Custom resource types served under the group `mailtarget.co`, version `v1alpha1`.
//!
//! Three namespaced kinds stand for objects of the email service:
//! - [`SubAccount`]: a sub account (interface document, section "Sub accounts").
//! - [`ApiKey`]: an API key (section "API keys"); its value is written to a Secret.
//! - [`SendingDomain`]: a sending domain (section "Sending domains") and the DNS records to publish.
//!
//! Two kinds hold the credentials the operator calls the service with ([`account`]):
//! - [`ClusterAccount`] (cluster-scoped; its Secret in the operator's namespace);
//! - [`Account`] (namespaced; its Secret in its own namespace).
//!
//! The CRD YAML in `crds/` is generated from these types ([`generate::crds_yaml`]).

pub mod account;
pub mod apikey;
pub mod common;
pub mod conditions;
pub mod generate;
pub mod schema;
pub mod sendingdomain;
pub mod subaccount;

pub use account::{
    Account, AccountConnection, AccountKind, AccountRefKind, AccountReference, AccountSpec,
    AccountStatus, ClusterAccount, ClusterAccountSpec, Credentials, KeyScope, RequestBudget,
    ScopeSource, SecretKeyReference,
};
pub use apikey::{ApiKey, ApiKeySpec, ApiKeyStatus};
pub use common::{
    ANNOTATION_ADOPTION_POLICY, ANNOTATION_CREATE_PENDING, ANNOTATION_EXTERNAL_ID,
    ANNOTATION_PAUSED, AdoptionPolicy, DeletionPolicy, FINALIZER, GROUP, ManagementPolicy,
    Ownership, SubAccountDeletionPolicy, SubAccountReference, VERSION, is_paused, paused,
};
pub use conditions::Condition;
pub use sendingdomain::{DnsRecord, SendingDomain, SendingDomainSpec, SendingDomainStatus};
pub use subaccount::{InitialApiKey, SubAccount, SubAccountSpec, SubAccountStatus};
