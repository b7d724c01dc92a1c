//! What the engine and both front ends read of every managed kind's custom resource besides
//! its kind's own spec fields: its status (kube's `HasStatus`, derived with the CRD), its
//! management policy, and the account and sub account it is managed through.

use kube::core::object::HasStatus;

use super::ManagedStatus;
use crate::crd::{
    AccountReference, ApiKey, ManagementPolicy, SendingDomain, SubAccount, SubAccountReference,
};

/// A managed kind's custom resource, as every managed kind shares it.
pub trait ManagedResource:
    kube::Resource + HasStatus<Status: ManagedStatus + std::fmt::Debug>
{
    /// `spec.managementPolicy`.
    fn management_policy(&self) -> ManagementPolicy;
    /// `spec.accountRef`: the account the resource is managed through (`None`: ClusterAccount
    /// `default`).
    fn account_ref(&self) -> Option<&AccountReference>;
    /// `spec.subAccountRef`: the SubAccount whose sub account holds the object, if the spec
    /// names one (its calls are then made with that sub account's credential); `None` for
    /// kinds without the field.
    fn sub_account_ref(&self) -> Option<&SubAccountReference> {
        None
    }
    /// The id in the `mailtarget.co/external-id` annotation (`None` when absent or invalid:
    /// validation reports an invalid one).
    fn external_id(&self) -> Option<i64> {
        super::validate::external_id(self.meta().annotations.as_ref())
            .ok()
            .flatten()
    }
    /// The status as last written (empty when none).
    fn last_status(&self) -> Self::Status {
        self.status().cloned().unwrap_or_default()
    }
    /// `status.id` when the resource owns that object ([`ManagedStatus::owned_id`]): not an
    /// object an `ObserveOnly` reconcile only observed.
    fn recorded_id(&self) -> Option<i64> {
        self.status().and_then(ManagedStatus::owned_id)
    }
    /// False under `managementPolicy: ObserveOnly`: such a resource never writes, so it owns
    /// nothing and conflicts with nobody.
    fn writes(&self) -> bool {
        self.management_policy().may_write()
    }
}

macro_rules! managed_resource {
    ($t:ident $(, $sub_account_ref:ident)?) => {
        impl ManagedResource for $t {
            fn management_policy(&self) -> ManagementPolicy {
                self.spec.management_policy
            }
            fn account_ref(&self) -> Option<&AccountReference> {
                self.spec.account_ref.as_ref()
            }
            $(fn sub_account_ref(&self) -> Option<&SubAccountReference> {
                self.spec.$sub_account_ref.as_ref()
            })?
        }
    };
}

managed_resource!(SubAccount);
managed_resource!(ApiKey, sub_account_ref);
managed_resource!(SendingDomain, sub_account_ref);
