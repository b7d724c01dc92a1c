//! The managed-resource engine (design: "The managed-resource model"), modelled on Crossplane's
//! managed resources: per kind, one implementation of [`ManagedKind`] (spec validation, natural
//! key, lookup, plan, the API call of each step, exported secrets); one generic [`driver`] that
//! matches a resource to its API object, turns desired and observed state into an ordered list
//! of [`Step`]s and executes them. Every API call is a step with the condition under which it
//! runs, so a plan lists every call an apply may make.
//!
//! Where the move stands (issue "One managed-resource engine"): the cluster-less
//! `plan`/`apply`/`destroy` run every kind through this engine; the controller still runs its
//! own per-kind executors on `crate::reconcile` and moves here next.

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
/// differences they correct, and differences the interface cannot correct (notes). `R` is the
/// kind's request type: what each step sends, exactly as shown.
#[derive(Clone, Debug, PartialEq)]
pub struct Planned<R> {
    /// The matched API object, if any.
    pub found: Option<Found>,
    /// Every API call that may be made, in order.
    pub steps: Vec<PlannedStep<R>>,
    /// Field differences the steps correct (updates only).
    pub changes: Vec<FieldChange>,
    /// Differences the interface offers no way to correct, and other remarks.
    pub notes: Vec<String>,
}

impl<R> Planned<R> {
    /// The steps as shown to people and in `-o json`.
    pub fn shown_steps(&self) -> Vec<Step> {
        self.steps.iter().map(|s| s.step.clone()).collect()
    }
}

/// One step of a plan: what it is for people, and the request it sends.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedStep<R> {
    /// The step as shown.
    pub step: Step,
    /// The kind's request of this step.
    pub request: R,
}

/// The id a step acts on: every step but a create needs one.
///
/// Errors: [`ApiError::InvalidRequest`] for `endpoint` when there is none (no request is sent).
pub fn target(endpoint: &'static str, id: Option<i64>) -> Result<i64, ApiError> {
    id.ok_or_else(|| ApiError::InvalidRequest {
        endpoint,
        message: "no object id for this step".into(),
    })
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
    /// What the plan compares: built from a list item or, when the spec sets fields the list
    /// lacks ([`ManagedKind::needs_detail`]), from a read.
    type Observed: Send + Sync;
    /// The request of one step.
    type Request: Clone + std::fmt::Debug + Send + Sync;
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
    /// True when comparing `d` needs fields only a read of the object returns.
    fn needs_detail(_d: &Self::Desired) -> bool {
        false
    }
    /// What a list item shows.
    fn observe_item(item: &Self::Item) -> Self::Observed;
    /// What a read shows.
    fn observe_detail(detail: &Self::Detail) -> Self::Observed;
    /// The steps for `d` against the matched object (`None`: none exists).
    ///
    /// Errors: for people, why the object can be neither found nor created.
    fn plan(
        d: &Self::Desired,
        found: Option<(Found, &Self::Observed)>,
    ) -> Result<Planned<Self::Request>, String>;
    /// Reads the object `id`.
    fn read(
        client: &Client,
        id: i64,
    ) -> impl Future<Output = Result<Self::Detail, ApiError>> + Send;
    /// Whether the step with `request` runs, given what the service answered so far
    /// (`current`); `None` when that cannot be told without reading the object first. Steps
    /// without a condition always run.
    fn due(request: &Self::Request, current: Option<&Self::Detail>) -> Option<bool>;
    /// Sends `request` (a step's) for the object `id` (`None` for a create). Answers the object
    /// as it now is, `None` once it is deleted.
    fn run(
        client: &Client,
        request: &Self::Request,
        id: Option<i64>,
    ) -> impl Future<Output = Result<Option<Self::Detail>, ApiError>> + Send;
    /// The step that carries out the resource's deletion policy on its object (`DELETE`, or a
    /// sub account's deactivation); `None` when the policy keeps the object.
    fn deletion(r: &Self::Resource) -> Option<PlannedStep<Self::Request>>;
    /// Every object whose natural key matches `search` (the list endpoint's free-text search,
    /// all pages): where the driver looks for an object after a create that may have happened
    /// without a definite answer.
    fn search(
        client: &Client,
        search: &str,
    ) -> impl Future<Output = Result<Vec<Self::Item>, ApiError>> + Send;
    /// The id of an object as answered.
    fn detail_id(detail: &Self::Detail) -> i64;
    /// The secret values of `detail` that the spec asks to store.
    fn exports(d: &Self::Desired, detail: &Self::Detail) -> Vec<Export>;
}
