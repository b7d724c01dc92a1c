//! The generic driver: matches a resource to its API object, plans its steps through its
//! [`ManagedKind`], and executes them in order, each when its condition holds on what the
//! service answered so far. A create is never repeated blindly: one without a definite answer
//! is resolved by looking the object up by natural key (`reconcile::execute`).

use super::{ManagedKind, Planned, StepAction, StepOutcome, StepReport};
use crate::api::{ApiError, Client};
use crate::reconcile::execute::create_or_recover;
use crate::reconcile::inventory::Inventory;
use crate::reconcile::{Lookup, validate};

/// A resource's validated spec and its plan.
pub struct ResourcePlan<K: ManagedKind> {
    /// The validated spec.
    pub desired: K::Desired,
    /// What to do.
    pub planned: Planned,
}

impl<K: ManagedKind> Clone for ResourcePlan<K>
where
    K::Desired: Clone,
{
    fn clone(&self) -> Self {
        ResourcePlan {
            desired: self.desired.clone(),
            planned: self.planned.clone(),
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

/// Plans `r` against the objects of `inventory`, matching by its external id, then by natural
/// key (the caller holds the account's key, so an existing object is adopted).
///
/// Errors: for people, every problem of an invalid spec, or why the lookup stops the resource
/// (several objects with the natural key, an external id that names no object).
pub fn plan<K: ManagedKind>(
    r: &K::Resource,
    inventory: &Inventory,
) -> Result<ResourcePlan<K>, String> {
    let desired = K::desired(r).map_err(|problems| validate::describe(&problems))?;
    let lookup = K::lookup(
        &desired,
        K::external_id(&desired),
        None,
        K::items(inventory),
    );
    if let Some((_, message)) = lookup.blocked(K::NOUN, K::natural_key(&desired)) {
        return Err(message);
    }
    let found = match lookup {
        Lookup::Found(item, how) => Some((how, item)),
        _ => None,
    };
    let planned = K::plan(&desired, found);
    Ok(ResourcePlan { desired, planned })
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

/// Executes `plan` with `client`. Steps run in order while they succeed; a step whose condition
/// needs the object's current state reads it first (one GET). With `want_detail`, the object
/// is read at the end when no step answered it (to export secrets or report).
pub async fn execute<K: ManagedKind>(
    client: &Client,
    plan: &ResourcePlan<K>,
    want_detail: bool,
) -> Executed<K::Detail> {
    let mut current: Option<K::Detail> = None;
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
            step: step.clone(),
            outcome,
        });
    }
    if error.is_none()
        && want_detail
        && current.is_none()
        && let Some(id) = id
    {
        match K::read(client, id).await {
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

/// Runs one step when due; `Ok(false)` when its condition did not hold.
async fn run_step<K: ManagedKind>(
    client: &Client,
    plan: &ResourcePlan<K>,
    step: &super::Step,
    current: &mut Option<K::Detail>,
    id: &mut Option<i64>,
) -> Result<bool, ApiError> {
    let d = &plan.desired;
    let due = match K::due(d, step, current.as_ref()) {
        Some(due) => due,
        None => match (current.is_none(), *id) {
            (true, Some(target)) => {
                let read = K::read(client, target).await?;
                let due = K::due(d, step, Some(&read)).unwrap_or(true);
                *current = Some(read);
                due
            }
            _ => true,
        },
    };
    if !due {
        return Ok(false);
    }
    let answer = if step.action == StepAction::Create {
        create_or_recover(K::run(client, d, step, None), || K::recover(client, d)).await?
    } else {
        K::run(client, d, step, *id).await?
    };
    *id = Some(K::detail_id(&answer));
    *current = Some(answer);
    Ok(true)
}
