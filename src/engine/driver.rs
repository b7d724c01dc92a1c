//! The generic driver: matches a resource to its API object, plans its steps through its
//! [`ManagedKind`], and executes them in order, each when its condition holds on what the
//! service answered so far. A create is never repeated blindly: one without a definite answer
//! is resolved by looking the object up by natural key (`engine::recovery`).

use super::{
    ManagedKind, ManagedResource, Planned, PlannedStep, StepAction, StepOutcome, StepReport, target,
};
use crate::api::{ApiError, ApiObject, Client};
use crate::engine::inventory::Inventory;
use crate::engine::recovery::create_or_recover;
use crate::engine::{Found, Lookup, validate};

/// A resource's validated spec and its plan.
#[derive(Clone)]
pub struct ResourcePlan<K: ManagedKind> {
    /// The validated spec.
    pub desired: K::Desired,
    /// The id in the resource's `mailtarget.co/external-id` annotation.
    pub external_id: Option<i64>,
    /// What to do.
    pub planned: Planned<K::Request>,
}

impl<K: ManagedKind> ResourcePlan<K> {
    /// A plan that found no object and makes no call, saying why in `note`.
    pub fn noting(desired: K::Desired, external_id: Option<i64>, note: String) -> Self {
        let planned = Planned {
            notes: vec![note],
            ..Planned::creating(Vec::new())
        };
        Self {
            desired,
            external_id,
            planned,
        }
    }
}

impl<K: ManagedKind> std::fmt::Debug for ResourcePlan<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourcePlan")
            .field("kind", &K::KIND)
            .field("planned", &self.planned)
            .finish_non_exhaustive()
    }
}

/// Why a resource cannot be planned.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// For people: every problem of an invalid spec, or why the lookup stops the resource
    /// (several objects with the natural key, an external id that names no object).
    #[error("{0}")]
    Blocked(String),
    /// Reading the matched object failed.
    #[error(transparent)]
    Api(#[from] ApiError),
}

/// The validated spec of `r`.
///
/// Errors: [`PlanError::Blocked`] naming every problem of the spec.
pub fn desired<K: ManagedKind>(r: &K::Resource) -> Result<K::Desired, PlanError> {
    K::desired(r).map_err(|problems| PlanError::Blocked(validate::describe(&problems)))
}

/// Plans a resource, given its validated spec and its external id, against `items` (the
/// account's list of the kind), matching by the external id, then by natural key (the caller
/// holds the account's key, so an existing object is adopted). Reads the matched object when the
/// spec sets fields the list lacks.
///
/// Errors: see [`PlanError`].
pub async fn plan_desired<K: ManagedKind>(
    client: &Client,
    desired: K::Desired,
    external_id: Option<i64>,
    items: &[K::Item],
) -> Result<ResourcePlan<K>, PlanError> {
    let lookup = K::lookup(&desired, external_id, None, items);
    if let Some((_, message)) = lookup.blocked(K::NOUN, K::natural_key(&desired)) {
        return Err(PlanError::Blocked(message));
    }
    let observed = match lookup {
        Lookup::Found(_, how) if K::needs_detail(&desired) => Some((
            how,
            K::Observed::from(&K::Detail::read(client, how.id).await?),
        )),
        Lookup::Found(item, how) => Some((how, K::Observed::from(item))),
        _ => None,
    };
    plan_observed(desired, external_id, observed)
}

/// Why the object `found` cannot be given `d`'s natural key, before any write: `d` renames it
/// ([`ManagedKind::NATURAL_KEY_UPDATABLE`]) to a key another object of `items` holds, and the
/// service keeps keys unique ([`ManagedKind::NATURAL_KEY_UNIQUE`]): a sub account's rename
/// would be refused `400 DUPLICATE`. `None` when `found` already has the key (a change of case
/// at most), when the key is free, or for other kinds. Callers ask it only for resources that
/// write (not paused, not `ObserveOnly`).
pub fn rename_taken<K: ManagedKind>(
    d: &K::Desired,
    found: i64,
    items: &[K::Item],
) -> Option<String> {
    if !(K::NATURAL_KEY_UNIQUE && K::NATURAL_KEY_UPDATABLE) {
        return None;
    }
    let Lookup::Found(item, _) = K::lookup(d, Some(found), None, items) else {
        return None;
    };
    if let Lookup::Found(..) = K::lookup(d, None, None, std::slice::from_ref(item)) {
        return None;
    }
    let holders = match K::lookup(d, None, None, items) {
        Lookup::Found(_, how) => vec![how.id],
        Lookup::Ambiguous(ids) => ids,
        _ => Vec::new(),
    };
    let other = holders.into_iter().find(|id| *id != found)?;
    let (noun, key) = (K::NOUN, K::natural_key(d));
    Some(format!(
        "\"{key}\" is taken by {noun} {other} (the service allows a name once, compared without case), so {noun} {found} cannot be renamed to it; choose another name, or rename {noun} {other} first (the rename into its name is planned once the name is free)"
    ))
}

/// The plan of `desired` against what was observed of its object (`None`: it does not exist).
///
/// Errors: [`PlanError::Blocked`] when the object can be neither found nor created.
pub fn plan_observed<K: ManagedKind>(
    desired: K::Desired,
    external_id: Option<i64>,
    observed: Option<(Found, K::Observed)>,
) -> Result<ResourcePlan<K>, PlanError> {
    let planned =
        K::plan(&desired, observed.as_ref().map(|(f, o)| (*f, o))).map_err(PlanError::Blocked)?;
    Ok(ResourcePlan {
        desired,
        external_id,
        planned,
    })
}

/// What executing a plan did.
#[derive(Debug)]
pub struct Executed<D> {
    /// The object as last answered (read at the end when `want_detail` and no step answered).
    pub detail: Option<D>,
    /// Each planned step with its outcome.
    pub steps: Vec<StepReport>,
    /// The failure that stopped the execution, if any.
    pub error: Option<ApiError>,
}

/// Executes `plan` with `client`. Steps run in order while they succeed; a step's condition is
/// evaluated again on what the service answered so far in this execution (`known`, then each
/// step's answer) and, with nothing answered yet, holds as planned (no read). With
/// `want_detail`, the object is read at the end when nothing answered it (to export secrets or
/// report).
pub async fn execute<K: ManagedKind>(
    client: &Client,
    plan: &ResourcePlan<K>,
    known: Option<K::Detail>,
    want_detail: bool,
) -> Executed<K::Detail> {
    let mut current: Option<K::Detail> = known;
    let mut steps = Vec::with_capacity(plan.planned.steps.len());
    let mut error: Option<ApiError> = None;
    let mut id = plan.planned.found.map(|f| f.id);
    for step in &plan.planned.steps {
        let outcome = if error.is_some() {
            StepOutcome::NotReached
        } else {
            match run_step::<K>(client, plan, step, &mut current, &mut id).await {
                Ok(true) => StepOutcome::Done,
                Ok(false) => StepOutcome::Skipped,
                Err(e) => {
                    let outcome = StepOutcome::Failed {
                        error: e.to_string(),
                    };
                    error = Some(e);
                    outcome
                }
            }
        };
        steps.push(StepReport {
            step: step.step.clone(),
            outcome,
        });
    }
    if error.is_none()
        && want_detail
        && current.is_none()
        && let Some(id) = id
    {
        match K::Detail::read(client, id).await {
            Ok(detail) => current = Some(detail),
            Err(e) => error = Some(e),
        }
    }
    Executed {
        detail: current,
        steps,
        error,
    }
}

/// The id of the object a create for `d` made, when its answer was lost (no answer, or the
/// process died before recording it): the one object with `d`'s natural key in a list read now
/// (the list endpoint's search, all pages). `None` when there is none, or several.
///
/// Errors: the list call's.
pub async fn find_created<K: ManagedKind>(
    client: &Client,
    d: &K::Desired,
) -> Result<Option<i64>, ApiError> {
    let items = K::Detail::search(client, K::natural_key(d)).await?;
    Ok(match K::lookup(d, None, None, &items) {
        Lookup::Found(_, how) => Some(how.id),
        _ => None,
    })
}

/// Plans the deletion of `r`'s object per its deletion policy, for its validated spec
/// `desired` (with its references resolved): one step, or none when the policy keeps the
/// object, no object matches (an external id naming no object is gone already; a natural key
/// found only outside the resource's scope is no object of its: both said in a note), or the
/// object already is what the step would make it ([`ManagedKind::already_deleted`], then said
/// in a note).
///
/// Errors: see [`PlanError`]: several objects match, or the external id names an object of
/// another natural key its kind cannot change ([`Lookup::OtherObject`]).
pub fn plan_deletion_of<K: ManagedKind>(
    r: &K::Resource,
    desired: K::Desired,
    inventory: &Inventory,
) -> Result<ResourcePlan<K>, PlanError> {
    let lookup = K::lookup(&desired, r.external_id(), None, K::items(inventory));
    let mut notes = Vec::new();
    match lookup.blocked(K::NOUN, K::natural_key(&desired)) {
        // Gone already, or another scope's: nothing to delete, as for no object matched by name.
        Some((_, message))
            if matches!(lookup, Lookup::ExternalIdNotFound(_) | Lookup::OutsideScope) =>
        {
            notes.push(format!("{message}: nothing to delete"));
        }
        Some((_, message)) => return Err(PlanError::Blocked(message)),
        None => {}
    }
    let (found, done) = match lookup {
        Lookup::Found(item, how) => (Some(how), K::already_deleted(r, item)),
        _ => (None, None),
    };
    let steps = (found.is_some() && done.is_none())
        .then(|| K::deletion(r))
        .flatten();
    Ok(ResourcePlan {
        desired,
        external_id: r.external_id(),
        planned: Planned {
            found,
            steps: steps.into_iter().collect(),
            changes: Vec::new(),
            notes: notes.into_iter().chain(done).collect(),
        },
    })
}

/// Runs the deletion `step` (from [`ManagedKind::deletion`]) on the object `id`: an object
/// already gone counts as deleted. Answers the object when the step leaves it in place (a
/// deactivation), `None` when it is gone.
///
/// Errors: the API's, other than not-found.
pub async fn delete<K: ManagedKind>(
    client: &Client,
    step: &PlannedStep<K::Request>,
    id: i64,
) -> Result<Option<K::Detail>, ApiError> {
    match K::run(client, &step.request, Some(id)).await {
        Err(e) if e.is_not_found() => Ok(None),
        other => other,
    }
}

/// Runs one step when due; `Ok(false)` when its condition did not hold.
async fn run_step<K: ManagedKind>(
    client: &Client,
    plan: &ResourcePlan<K>,
    step: &PlannedStep<K::Request>,
    current: &mut Option<K::Detail>,
    id: &mut Option<i64>,
) -> Result<bool, ApiError> {
    // The plan put the step there because its condition held on what was observed; it is
    // evaluated again only on what an earlier step of this execution answered.
    let due = K::due(&step.request, current.as_ref()).unwrap_or(true);
    if !due {
        return Ok(false);
    }
    let answer = match step.step.action {
        StepAction::Create => {
            // Without a definite answer: the object looked up by natural key, then read.
            create_or_recover(K::run(client, &step.request, None), || async {
                match find_created::<K>(client, &plan.desired).await? {
                    Some(id) => Ok(Some(Some(K::Detail::read(client, id).await?))),
                    None => Ok(None),
                }
            })
            .await?
        }
        StepAction::Delete => {
            let answer = delete::<K>(client, step, target(step.step.endpoint, *id)?).await?;
            *id = None;
            answer
        }
        _ => K::run(client, &step.request, *id).await?,
    };
    if let Some(answer) = &answer {
        *id = Some(answer.id());
    }
    *current = answer;
    Ok(true)
}
