//! The managed-resource engine (design: "The managed-resource model"), modelled on Crossplane's
//! managed resources: per kind, one implementation of [`ManagedKind`] (spec validation, natural
//! key, lookup, plan, the API call of each step, exported secrets); one generic [`driver`] that
//! matches a resource to its API object, turns desired and observed state into an ordered list
//! of [`Step`]s and executes them. Every API call is a step with the condition under which it
//! runs, so a plan lists every call an apply may make.
//!
//! Where the move stands (issue "One managed-resource engine"): the cluster-less `plan`/`apply`
//! runs SendingDomains through this engine; SubAccounts and ApiKeys, and the controller, still
//! use `crate::reconcile` with their own executors and move here one at a time.

pub mod driver;
pub mod kinds;
mod step;

use std::future::Future;

use secrecy::SecretString;

pub use step::{Sent, Step, StepAction, StepOutcome, StepReport};

use crate::api::{ApiError, Client};
use crate::reconcile::inventory::Inventory;
use crate::reconcile::{FieldChange, Found, Lookup, Problem};

/// What a kind plans for one resource: the matched object, the steps in order, the field
/// differences they correct, and differences the interface cannot correct (notes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    /// The matched API object, if any.
    pub found: Option<Found>,
    /// Every API call that may be made, in order.
    pub steps: Vec<Step>,
    /// Field differences the steps correct (updates only).
    pub changes: Vec<FieldChange>,
    /// Differences the interface offers no way to correct, and other remarks.
    pub notes: Vec<String>,
}

/// A secret value obtained from the service, to be stored where the spec says (a Kubernetes
/// Secret in the cluster, a file under `--secrets-dir` in the CLI). Never printed.
#[derive(Clone, Debug)]
pub struct Export {
    /// Secret name from the spec.
    pub secret_name: String,
    /// Key in the Secret's data, e.g. `dkimPrivateKey`.
    pub key: &'static str,
    /// The value.
    pub value: SecretString,
}

/// One kind of managed resource. Implementations hold the kind's behaviour and nothing else:
/// no retries, no ordering, no Kubernetes; the [`driver`] supplies those.
pub trait ManagedKind: 'static {
    /// The custom resource.
    type Resource: Sync;
    /// The validated spec.
    type Desired: Send + Sync;
    /// An object as a list page shows it.
    type Item: Clone + Send + Sync;
    /// An object as a read, a create or an update answers it.
    type Detail: Send + Sync;
    /// Kind name, e.g. `SendingDomain`.
    const KIND: &'static str;
    /// What the API object is called in messages, e.g. `sending domain`.
    const NOUN: &'static str;

    /// Validates the spec. Errors: every problem, each naming its field.
    fn desired(r: &Self::Resource) -> Result<Self::Desired, Vec<Problem>>;
    /// The natural key, for messages.
    fn natural_key(d: &Self::Desired) -> &str;
    /// The id in the resource's `mailtarget.co/external-id` annotation.
    fn external_id(d: &Self::Desired) -> Option<i64>;
    /// The kind's objects in a snapshot of the account.
    fn items(inventory: &Inventory) -> &[Self::Item];
    /// Finds the object `d` stands for: `external_id`, then `status_id`, then the natural key.
    fn lookup<'a>(
        d: &Self::Desired,
        external_id: Option<i64>,
        status_id: Option<i64>,
        items: &'a [Self::Item],
    ) -> Lookup<'a, Self::Item>;
    /// The steps for `d` against the matched object (`None`: none exists).
    fn plan(d: &Self::Desired, found: Option<(Found, &Self::Item)>) -> Planned;
    /// Reads the object `id`.
    fn read(
        client: &Client,
        id: i64,
    ) -> impl Future<Output = Result<Self::Detail, ApiError>> + Send;
    /// Whether `step` runs, given what the service answered so far (`current`); `None` when
    /// that cannot be told without reading the object first.
    fn due(d: &Self::Desired, step: &Step, current: Option<&Self::Detail>) -> Option<bool>;
    /// Makes the API call of `step` on the object `id` (`None` for a create).
    fn run(
        client: &Client,
        d: &Self::Desired,
        step: &Step,
        id: Option<i64>,
    ) -> impl Future<Output = Result<Self::Detail, ApiError>> + Send;
    /// The object `d` stands for, looked up by natural key after a create that may have
    /// happened without a definite answer.
    fn recover(
        client: &Client,
        d: &Self::Desired,
    ) -> impl Future<Output = Result<Option<Self::Detail>, ApiError>> + Send;
    /// The id of an object as answered.
    fn detail_id(detail: &Self::Detail) -> i64;
    /// The secret values of `detail` that the spec asks to store.
    fn exports(d: &Self::Desired, detail: &Self::Detail) -> Vec<Export>;
}
