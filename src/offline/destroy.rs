//! `destroy -f PATH`: carries out the deletion policy of every resource the manifests name on
//! the object it matches (by external id, else by name, as `apply` matches; confirmed by the
//! user or `--auto-approve`): `Delete` deletes the API key or sending domain,
//! `Deactivate` sets a sub account's deactivated status (the interface has no DELETE for sub
//! accounts), `Orphan` keeps the object. Paused and `ObserveOnly` resources are left alone, and
//! two resources matching one object fail the run before any write. Runs in the reverse of
//! `apply`'s order: domains and keys first, then sub accounts.

use super::apply::{ApplyReport, Outcome, apply_one, failed, not_run, outcome};
use super::inside::{Inside, PlannedSubAccount, placed_in};
use super::plan::{Entry, OfflinePlan, Step, entry_of};
use crate::api::{ApiError, Client};
use crate::engine::driver::{self, PlanError, ResourcePlan};
use crate::engine::inventory::Inventory;
use crate::engine::{ManagedKind, ManagedResource, StepAction};
use crate::files::SafeDir;
use crate::manifest::{Loaded, Resource, Selectors};

/// Plans the deletion of every resource of `resources` against the account (the three lists,
/// no other read).
///
/// `selectors` as [`super::plan::build`] takes them.
///
/// Errors: API failures while reading the lists.
pub async fn plan(
    client: &Client,
    resources: &[Loaded],
    selectors: &Selectors,
) -> Result<OfflinePlan, ApiError> {
    let inventory = &super::guards::inventory_for(client, resources, selectors).await?;
    let mut entries: Vec<Entry> = resources.iter().map(entry_of).collect();
    let mut steps = vec![Step::Invalid; resources.len()];
    let mut inside: Vec<Option<Inside>> = vec![None; resources.len()];
    // Sub accounts first (planned once): keys inside them are looked up in their scope, found
    // by the namespace and name of their SubAccount.
    let mut subs = Vec::new();
    for sub_accounts in [true, false] {
        for (i, (loaded, e)) in resources.iter().zip(&mut entries).enumerate() {
            let is_sub_account = matches!(loaded.resource, Resource::SubAccount(_));
            if is_sub_account != sub_accounts {
                continue;
            }
            // Refused by its account: nothing of it is looked up, nothing called.
            let own = inventory.own_sub_account;
            if let Some(refused) = super::guards::refusal(loaded, selectors, own) {
                e.error = Some(refused);
                continue;
            }
            let at = (loaded, subs.as_slice(), inventory);
            (steps[i], inside[i]) = match &loaded.resource {
                Resource::SubAccount(r) => {
                    let (step, placed) = planned(e, r, at, Step::SubAccount);
                    subs.extend(PlannedSubAccount::of(i, loaded, &step, inventory));
                    (step, placed)
                }
                Resource::ApiKey(r) => planned(e, r, at, Step::ApiKey),
                Resource::SendingDomain(r) => planned(e, r, at, Step::SendingDomain),
            };
        }
    }
    let resources: Vec<Resource> = resources.iter().map(|l| l.resource.clone()).collect();
    super::guards::apply(&mut entries, &mut steps, &resources, &[], selectors);
    Ok(OfflinePlan {
        entries,
        steps,
        resources,
        inside,
        ..OfflinePlan::default()
    })
}

/// The deletion plan of a resource, looked up inside the sub account its `spec.subAccountRef`
/// names (one of `subs`; nothing is inside a sub account that does not exist), or in the
/// account itself (a SubAccount, or no reference); with where it is placed, when inside an
/// existing sub account: its deletion is made with that sub account's credential, as every
/// other call for it (the company key when the credential is gone).
///
/// Errors: the SubAccount is not among the manifests, its own plan failed, or it does not let
/// the resource's namespace place objects inside (as `plan` refuses it); see [`PlanError`].
fn deletion_inside<K: ManagedKind>(
    r: &K::Resource,
    loaded: &Loaded,
    subs: &[PlannedSubAccount],
    inventory: &Inventory,
) -> Result<(ResourcePlan<K>, Option<Inside>), PlanError> {
    let mut d = driver::desired::<K>(r)?;
    let own = loaded.resource.namespace();
    // A credential that cannot be had is no reason to keep the object: the company key
    // deletes it then.
    let placed = placed_in::<K>(r, (own, K::natural_key(&d)), subs, false);
    let placed = placed.map_err(PlanError::Blocked)?;
    let sub = placed.as_ref().map(|(sub, _)| *sub);
    let (id, placed) = match placed {
        Some((sub, _)) => match sub.inside.id {
            Some(id) => (Some(id), Some(sub.inside.clone())),
            None => {
                let note = format!(
                    "{} matches no sub account: nothing is inside it",
                    sub.shown()
                );
                return Ok((ResourcePlan::noting(d, r.external_id(), note), None));
            }
        },
        // Through a sub account's key: in that sub account, as `plan` places it.
        None => (inventory.own_sub_account, None),
    };
    if let Some(id) = id {
        K::in_sub_account(&mut d, id);
    }
    let mut plan = driver::plan_deletion_of::<K>(r, d, inventory)?;
    // Paused or ObserveOnly, the resource is left alone (its steps are cleared later).
    let left_alone = !r.writes() || loaded.resource.is_paused();
    let deleted = (plan.planned.found).filter(|_| !plan.planned.steps.is_empty() && !left_alone);
    if let Some(sub) = sub.filter(|sub| deleted.is_some_and(|f| sub.is_credential(f.id))) {
        plan.planned.notes.push(format!(
            "it is the operator's credential inside the sub account of {}, and the sub account stays (none is ever deleted): once the key is deleted, nothing inside it can be managed ({})",
            sub.shown(),
            crate::engine::placement::REASON_CREDENTIAL_MISSING
        ));
    }
    Ok((plan, placed))
}

/// Plans the deletion of `r` ([`deletion_inside`]) and fills `e` from it: `delete`,
/// `deactivate`, `keep` (the policy keeps the object), `unchanged` (the policy deletes, but the
/// object already is what the deletion would make it: a note says so) or `absent` (no object
/// matches, or none can exist: a note may say why).
fn planned<K: ManagedKind>(
    e: &mut Entry,
    r: &K::Resource,
    (loaded, subs, inventory): (&Loaded, &[PlannedSubAccount], &Inventory),
    step: impl FnOnce(ResourcePlan<K>) -> Step,
) -> (Step, Option<Inside>) {
    let deletes = K::deletion(r).is_some();
    match deletion_inside::<K>(r, loaded, subs, inventory) {
        Ok((plan, placed)) => {
            let p = &plan.planned;
            e.action = match (p.found, p.steps.first().map(|s| s.step.action)) {
                (None, _) => "absent",
                (Some(_), None) if deletes => "unchanged",
                (Some(_), None) => "keep",
                (Some(_), Some(StepAction::Delete)) => "delete",
                (Some(_), Some(_)) => "deactivate",
            };
            e.id = p.found.map(|f| f.id);
            e.notes = p.notes.clone();
            e.steps = p.shown_steps();
            (step(plan), placed)
        }
        Err(err) => {
            e.error = Some(err.to_string());
            (Step::Invalid, None)
        }
    }
}

/// Executes a deletion plan: nothing when it has errors, else domains and keys first, then sub
/// accounts, one at a time; with `secrets_dir`, each resource carried out loses the files
/// `apply --secrets-dir` wrote for it (see [`super::secret_files`]).
pub async fn run(
    client: &Client,
    plan: &OfflinePlan,
    secrets_dir: Option<&SafeDir>,
) -> ApplyReport {
    if plan.has_errors() {
        let outcomes = plan.entries.iter().map(not_run).collect();
        return ApplyReport { outcomes };
    }
    let rank = |s: &Step| match s {
        Step::SendingDomain(_) => 0,
        Step::ApiKey(_) => 1,
        _ => 2,
    };
    let mut order: Vec<usize> = (0..plan.steps.len()).collect();
    order.sort_by_key(|&i| rank(&plan.steps[i]));
    let mut outcomes: Vec<Option<Outcome>> = plan.entries.iter().map(|_| None).collect();
    for i in order {
        let e = &plan.entries[i];
        // Inside an existing sub account: with its credential, else the company key.
        let placed = plan.inside.get(i).and_then(Option::as_ref);
        let credential = placed.and_then(|inside| inside.credential.clone());
        let as_credential = credential.and_then(|key| client.calling_as(key).ok());
        let ctx = super::apply::Ctx {
            client: as_credential.as_ref().unwrap_or(client),
            secrets_dir: None,
            inside: placed.filter(|_| as_credential.is_some()),
        };
        let o = match &plan.steps[i] {
            Step::SubAccount(p) => carry(&ctx, p, e, (secrets_dir, &plan.resources[i])).await,
            Step::ApiKey(p) => carry(&ctx, p, e, (secrets_dir, &plan.resources[i])).await,
            Step::SendingDomain(p) => carry(&ctx, p, e, (secrets_dir, &plan.resources[i])).await,
            Step::Skip => outcome(e, e.action),
            _ => failed(e, "cannot be destroyed"),
        };
        outcomes[i] = Some(o);
    }
    ApplyReport {
        outcomes: outcomes.into_iter().flatten().collect(),
    }
}

/// Carries out the deletion plan of one resource (`r`), then removes the files `apply
/// --secrets-dir` wrote for it under `secrets_dir`.
async fn carry<K: ManagedKind>(
    ctx: &super::apply::Ctx<'_>,
    plan: &ResourcePlan<K>,
    e: &Entry,
    (secrets_dir, r): (Option<&SafeDir>, &Resource),
) -> Outcome {
    let mut o = apply_one(ctx, plan, e, false).await.0;
    if let Some(dir) = secrets_dir {
        super::secret_files::remove(dir, &mut o, r);
    }
    o
}
