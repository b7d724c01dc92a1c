//! The managed-resource engine (design: "The managed-resource model"), modelled on Crossplane's
//! managed resources: per kind, one implementation of [`ManagedKind`] (spec validation, natural
//! key, lookup, plan, the API call of each step, exported secrets); one generic [`driver`] that
//! matches a resource to its API object, turns desired and observed state into an ordered list
//! of [`Step`]s and executes them. Every API call is a step with the condition under which it
//! runs, so a plan lists every call an apply may make.
//!
//! Both front ends run on it: the controller (`crate::controller::converge`, adding what only
//! a cluster has: cached lists, identity in metadata, Events, Secrets, pacing) and the
//! cluster-less `plan`/`apply`/`destroy` (`crate::offline`).

pub mod driver;
pub mod inventory;
pub mod kinds;
pub mod lookup;
pub mod natural_key;
pub mod placement;
pub mod recovery;
mod resource;
mod status;
mod step;
pub mod validate;

use std::future::Future;

use secrecy::SecretString;

pub use lookup::{Found, Lookup, MatchedBy};
pub use resource::ManagedResource;
pub use status::{ManagedStatus, Pacing};
pub use step::{FieldChange, Sent, Step, StepAction, StepOutcome, StepReport, shown, shown_held};
pub use validate::Problem;

use crate::api::{ApiError, ApiObject, Client};
use crate::engine::inventory::Inventory;

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
    /// The plan of an object not found: `steps`, a create first.
    pub fn creating(steps: Vec<PlannedStep<R>>) -> Self {
        Planned {
            found: None,
            steps,
            changes: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// The plan of the object `found`: one `StepAction::Update` step calling `endpoint` that
    /// sends each of `changes` (as `request`), or no step when nothing differs; `notes` as given.
    pub fn updating(
        found: Found,
        endpoint: &'static str,
        changes: Vec<FieldChange>,
        request: R,
        notes: Vec<String>,
    ) -> Self {
        let steps = if changes.is_empty() {
            Vec::new()
        } else {
            let step = (changes.iter()).fold(Step::new(StepAction::Update, endpoint), |s, c| {
                s.sends(c.field, &c.to, false)
            });
            vec![PlannedStep { step, request }]
        };
        Planned {
            found: Some(found),
            steps,
            changes,
            notes,
        }
    }

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

/// A Secret key the spec asks the front end to fill with a value of the object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretRef {
    /// Secret name from the spec.
    pub secret_name: String,
    /// Key in the Secret's data.
    pub key: &'static str,
}

/// What a status is projected from: a list item (the fields a list shows) or an object as a
/// read, create or update answered it (all fields).
#[derive(Clone, Copy, Debug)]
pub enum Seen<'a, I, D> {
    /// A list item.
    Item(&'a I),
    /// A detail.
    Detail(&'a D),
}

/// Where a converged resource stands, for its `Ready` condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// True when the object is as the spec asks and nothing is pending at the service.
    pub ready: bool,
    /// CamelCase reason, e.g. `Available`, `Verified`, `VerifyingDns`.
    pub reason: &'static str,
    /// For people.
    pub message: String,
}

/// The status of kind `K`'s resource.
pub type StatusOf<K> = <<K as ManagedKind>::Resource as kube::core::object::HasStatus>::Status;

/// One kind of managed resource. Implementations hold the kind's behaviour and nothing else:
/// no retries, no ordering, no Kubernetes; the [`driver`] supplies those.
pub trait ManagedKind: 'static {
    /// The custom resource.
    type Resource: ManagedResource + Sync;
    /// The validated spec.
    type Desired: Clone + Send + Sync;
    /// An object as a list page shows it.
    type Item: Clone + Send + Sync + for<'a> From<&'a Self::Detail>;
    /// An object as a read, a create or an update answers it: how it is read, searched for and
    /// listed is the interface's ([`ApiObject`]).
    type Detail: ApiObject<Item = Self::Item>;
    /// What the plan compares: built from a list item or, when the spec sets fields the list
    /// lacks ([`ManagedKind::needs_detail`]), from a read.
    type Observed: Send + Sync + for<'a> From<&'a Self::Item> + for<'a> From<&'a Self::Detail>;
    /// The request of one step.
    type Request: Clone + std::fmt::Debug + Send + Sync;
    /// Kind name, e.g. `SendingDomain`.
    const KIND: &'static str;
    /// What the API object is called in messages, e.g. `sending domain`.
    const NOUN: &'static str;
    /// The key under which every Secret of the kind holds the value it exports (`apiKey`,
    /// `dkimPrivateKey`); [`SecretRef::key`] is always this.
    const SECRET_KEY: &'static str;
    /// False when the service lets several objects share the natural key (API key names; sub
    /// account names and domains are refused as duplicates): a create may then meet a twin made
    /// at the same moment by another client, which the cluster-less `apply` looks for after
    /// each create (`offline::twins`).
    const NATURAL_KEY_UNIQUE: bool = true;
    /// True when an update can change the natural key (a sub account's name; a domain is set
    /// at create only). With [`Self::NATURAL_KEY_UNIQUE`], a change into a key another object
    /// holds is refused before any write ([`driver::rename_taken`]).
    const NATURAL_KEY_UPDATABLE: bool = false;

    /// Validates the spec. Errors: every problem, each naming its field.
    fn desired(r: &Self::Resource) -> Result<Self::Desired, Vec<Problem>>;
    /// The natural key, for messages.
    fn natural_key(d: &Self::Desired) -> &str;
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
    /// The steps for `d` against the matched object (`None`: none exists).
    ///
    /// Errors: for people, why the object can be neither found nor created.
    fn plan(
        d: &Self::Desired,
        found: Option<(Found, &Self::Observed)>,
    ) -> Result<Planned<Self::Request>, String>;
    /// Whether the step with `request` runs, given what the service answered so far in this
    /// execution (`current`); `None` when nothing answered yet, and the step then runs as
    /// planned (its condition held on what the plan observed). Steps without a condition
    /// always run.
    fn due(_request: &Self::Request, _current: Option<&Self::Detail>) -> Option<bool> {
        Some(true)
    }
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
    /// Why the deletion step of `r` is not needed for `item`, which already is what the step
    /// would make it (a sub account already deactivated); `None` (the default): it is needed.
    fn already_deleted(_r: &Self::Resource, _item: &Self::Item) -> Option<String> {
        None
    }
    /// The Secret keys the spec asks to fill.
    fn secret_refs(d: &Self::Desired) -> Vec<SecretRef>;
    /// The secret values of `detail` that the spec asks to store.
    ///
    /// Errors: for people, why `detail` lacks a value the spec asks for (a sub account without
    /// a key of the name `spec.apiKey.name` gives).
    fn exports(d: &Self::Desired, detail: &Self::Detail) -> Result<Vec<Export>, String>;
    /// The secret values a list item already carries (`None`: a read is needed).
    fn item_exports(_d: &Self::Desired, _item: &Self::Item) -> Option<Vec<Export>> {
        None
    }

    /// The status after seeing the object: fields the object shows replace those of `old`,
    /// fields it does not show (and the front end's own, such as pacing) are kept.
    fn project(old: &StatusOf<Self>, seen: Seen<'_, Self::Item, Self::Detail>) -> StatusOf<Self>;
    /// True when `status` already shows everything a read of `item`'s object would add, as far
    /// as `d` needs it: no read is needed to report or compare it.
    fn status_has_detail(_d: &Self::Desired, _status: &StatusOf<Self>, _item: &Self::Item) -> bool {
        true
    }
    /// What the plan compares when the spec needs detail-only fields and no read was made: the
    /// list item, with those fields as `status` last recorded them.
    fn observe_known(item: &Self::Item, _status: &StatusOf<Self>) -> Self::Observed {
        Self::Observed::from(item)
    }
    /// Where a resource stands once its steps ran, from its status.
    fn summary(d: &Self::Desired, status: &StatusOf<Self>) -> Summary;
    /// Fills in status fields that cost a call of their own and matter only until the
    /// resource is ready (a sending domain's SPF suggestion). Failures leave them empty.
    fn complete_status(
        _client: &Client,
        _status: &mut StatusOf<Self>,
    ) -> impl Future<Output = ()> + Send {
        async {}
    }
    /// True for the kind whose objects are API keys (a sub account's credential is one).
    const API_KEY: bool = false;
    /// True for a kind created and changed with a company key only (a SubAccount: a sub account
    /// key acts within its own sub account, product design decision "Scope of a key").
    const NEEDS_COMPANY_KEY: bool = false;
    /// Scopes `d` to the sub account `id` once the front end resolved the reference.
    fn in_sub_account(_d: &mut Self::Desired, _id: i64) {}
    /// True for a kind whose objects ask for DNS records (see [`ManagedKind::records`]).
    const HAS_RECORDS: bool = false;
    /// The DNS records `detail` asks to publish and whether the service found them all (a
    /// sending domain's, interface document "Sending domains"); `None` for kinds without
    /// records. The cluster-less `apply` reports them.
    fn records(_detail: &Self::Detail) -> Option<(Vec<crate::crd::DnsRecord>, bool)> {
        None
    }
}
