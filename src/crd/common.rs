//! Fields, names and policies shared by the three kinds.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of every custom resource of this operator.
pub const GROUP: &str = "mailtarget.co";
/// API version of every custom resource of this operator.
pub const VERSION: &str = "v1alpha1";

/// Finalizer held while the API object exists and the deletion policy needs a cleanup call
/// (Kubernetes API conventions, "Finalizers").
pub const FINALIZER: &str = "mailtarget.co/finalizer";

/// Annotation naming the id of an existing API object to adopt instead of creating one,
/// e.g. `mailtarget.co/external-id: "42"`.
pub const ANNOTATION_EXTERNAL_ID: &str = "mailtarget.co/external-id";

/// Annotation saying whether an API object that already exists may be taken over:
/// `Adopt` or `AdoptOrCreate` ([`AdoptionPolicy`]). Without it, an existing object with the
/// resource's natural key, or named by an `external-id` the operator did not write, is left
/// alone (`Stalled`, reason `AlreadyExists`), and so is a Secret the operator did not write.
pub const ANNOTATION_ADOPTION_POLICY: &str = "mailtarget.co/adoption-policy";

/// Annotation the controller writes (an RFC 3339 time) before each create call and removes when
/// it records the new object's id in [`ANNOTATION_EXTERNAL_ID`]: after a crash in between, the
/// object found by natural key is the one this operator created, and it is adopted without a
/// policy instead of being created twice.
pub const ANNOTATION_CREATE_PENDING: &str = "mailtarget.co/create-pending";

/// Whether an existing API object may be taken over (annotation
/// [`ANNOTATION_ADOPTION_POLICY`], or the operator's `--default-adoption-policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AdoptionPolicy {
    /// Take over the existing object (and a pre-existing Secret); never create one.
    Adopt,
    /// Take over the existing object when there is one, else create it.
    AdoptOrCreate,
}

impl AdoptionPolicy {
    /// The policy the annotations of `meta` set; an invalid value counts as none (validation
    /// reports it as `InvalidSpec` first).
    pub fn annotated(
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ) -> Option<Self> {
        meta.annotations
            .as_ref()
            .and_then(|a| Self::from_annotations(a).ok().flatten())
    }

    /// The policy `annotations` set (`None` when absent).
    ///
    /// Errors: a message for people when the value is neither `Adopt` nor `AdoptOrCreate`.
    pub fn from_annotations(
        annotations: &std::collections::BTreeMap<String, String>,
    ) -> Result<Option<Self>, String> {
        match annotations
            .get(ANNOTATION_ADOPTION_POLICY)
            .map(|v| v.trim())
        {
            None => Ok(None),
            Some("Adopt") => Ok(Some(AdoptionPolicy::Adopt)),
            Some("AdoptOrCreate") => Ok(Some(AdoptionPolicy::AdoptOrCreate)),
            Some(other) => Err(format!(
                "\"{other}\" is not an adoption policy: use Adopt or AdoptOrCreate"
            )),
        }
    }
}

/// Annotation that pauses reconciliation when set to `"true"`.
pub const ANNOTATION_PAUSED: &str = "mailtarget.co/paused";

/// True when `annotations` carry `mailtarget.co/paused: "true"`: the resource is left alone by
/// the controller and by `plan`/`apply` alike. An invalid value counts as not paused here;
/// validation refuses it first (see [`paused`]).
pub fn is_paused(annotations: &std::collections::BTreeMap<String, String>) -> bool {
    paused(annotations) == Ok(true)
}

/// Whether `annotations` pause the resource: `"true"` or `"false"` (ASCII case ignored), not
/// paused when absent.
///
/// Errors: a message for people for any other value (`"yes"`, `"1"`), which is refused rather
/// than guessed at, as the annotation's absence and a typo must not look alike.
pub fn paused(annotations: &std::collections::BTreeMap<String, String>) -> Result<bool, String> {
    match annotations.get(ANNOTATION_PAUSED).map(String::as_str) {
        None => Ok(false),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
        Some(other) => Err(format!(
            "\"{other}\" is not a paused value: use \"true\" to pause, or \"false\" (or remove the annotation) to resume"
        )),
    }
}

/// What happens to the API object when the custom resource is deleted (ApiKey, SendingDomain).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DeletionPolicy {
    /// Delete the API object (`DELETE /api-key/{id}`, `DELETE /domain/sending/{id}`).
    #[default]
    Delete,
    /// Leave the API object as it is.
    Orphan,
}

/// What happens to the sub account when the SubAccount resource is deleted.
///
/// The interface has no DELETE for sub accounts (section "Sub accounts"), so the choice is to
/// leave it or to deactivate it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SubAccountDeletionPolicy {
    /// Leave the sub account as it is.
    #[default]
    Orphan,
    /// `PUT /sub-account/{id}` with `status` set to `spec.deactivatedStatus`.
    Deactivate,
}

/// Whether the operator may write to the API for this resource.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ManagementPolicy {
    /// Create, update and delete the API object to match the spec.
    #[default]
    Full,
    /// Only read the API object and report it (and any drift) in status; never write.
    ObserveOnly,
}

/// Whether a resource owns the API object its `status.id` names (design: "The managed-resource
/// model": observing is not owning). Written by the operator only (status is a subresource
/// users do not write), so it is the record that says a later reconcile under `Full` may act on
/// that object without an adoption policy.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum Ownership {
    /// The resource created the object, or took it over under an adoption policy: its
    /// `deletionPolicy` applies to it and its values are exported.
    Owned,
    /// The resource owns nothing: `id`, if set, was recorded by an `ObserveOnly` reconcile of
    /// an object the resource did not own (switching to `Full` takes it over only under an
    /// adoption policy), or the operator refused the object (`AlreadyExists`,
    /// `ConflictingOwner`).
    Observed,
}

/// A reference to a SubAccount whose sub account holds an object (product design, "Accounts
/// and tenancy"): the object is created, changed, verified and deleted with that sub account's
/// credential, so it can reach nothing outside the sub account. Immutable once set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct SubAccountReference {
    /// Name of the SubAccount (a DNS-1123 subdomain).
    #[schemars(
        length(min = 1, max = 253),
        pattern(super::schema::DNS_SUBDOMAIN_PATTERN)
    )]
    pub name: String,
    /// Namespace of the SubAccount. Unset: the referring object's own namespace. Another
    /// namespace must be selected by the SubAccount's `spec.allowedNamespaces`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), pattern(super::schema::DNS_LABEL_PATTERN))]
    pub namespace: Option<String>,
}

impl SubAccountReference {
    /// The SubAccount's namespace for an object in `own`: `namespace`, else `own`.
    pub fn namespace_or<'a>(&'a self, own: &'a str) -> &'a str {
        self.namespace.as_deref().unwrap_or(own)
    }
}

impl ManagementPolicy {
    /// True when the operator may call write endpoints for this resource.
    pub fn may_write(self) -> bool {
        self == ManagementPolicy::Full
    }
}
