//! Building the plan: one [`Entry`] per resource, from the manifests and the account.

use futures::{StreamExt, TryStreamExt, stream};
use serde::Serialize;

use crate::api::{ApiError, Client};
use crate::crd::{ApiKey, SendingDomain, SubAccount};
use crate::engine::driver::{self, PlanError, ResourcePlan};
use crate::engine::inventory::Inventory;
use crate::engine::kinds::api_key;
use crate::engine::kinds::sub_account;
use crate::engine::{FieldChange, MatchedBy};
use crate::engine::{ManagedKind, Step as EngineStep};
use crate::manifest::{Loaded, Resource};

/// The plan of one resource, for people and for `--output json`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// Kind of the resource.
    pub kind: &'static str,
    /// Namespace (`default` when unset).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// File and document it was read from.
    pub source: String,
    /// `create`, `update`, `unchanged`, `observe` (ObserveOnly), `paused` or `error`.
    pub action: &'static str,
    /// Id of the matched API object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    /// How the API object was matched (`externalId`, `naturalKey`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_by: Option<MatchedBy>,
    /// Field differences (updates only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<FieldChange>,
    /// Differences the interface cannot change, and other remarks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Every API call `apply` may make for this resource, in order, with its condition.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<EngineStep>,
    /// Why nothing can be done for this resource (action `error`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Counts of a plan or an apply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Resources whose API object is (to be) created.
    pub create: usize,
    /// Resources whose API object is (to be) updated.
    pub update: usize,
    /// Resources needing no write (paused and `ObserveOnly` ones included).
    pub unchanged: usize,
    /// Resources that cannot be planned or failed.
    pub error: usize,
    /// Resources whose object is (to be) deleted or deactivated (`destroy`).
    #[serde(skip_serializing_if = "is_zero")]
    pub delete: usize,
}

impl Summary {
    /// Counts one plan action (`create`, `keep`, ...) or apply result (`created`, `kept`, ...);
    /// anything else (`error`, `failed`, `skipped`) is an error.
    pub(crate) fn add(&mut self, word: &str) {
        match word {
            "create" | "created" => self.create += 1,
            "update" | "updated" => self.update += 1,
            "unchanged"
            | "keep"
            | "kept"
            | "absent"
            | super::guards::OBSERVE
            | super::guards::PAUSED => self.unchanged += 1,
            "delete" | "deleted" | "deactivate" | "deactivated" => self.delete += 1,
            _ => self.error += 1,
        }
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The typed plan of one resource, kept for [`crate::offline::apply`].
#[derive(Clone, Debug)]
pub(crate) enum Step {
    SubAccount(ResourcePlan<SubAccount>),
    ApiKey(ResourcePlan<ApiKey>),
    /// The first key of a sub account this apply creates (named in that SubAccount's
    /// `spec.apiKey`): planned once the sub account exists.
    KeyOfNewSubAccount {
        desired: api_key::Desired,
        sub_account: String,
    },
    SendingDomain(ResourcePlan<SendingDomain>),
    Invalid,
    /// Paused or `ObserveOnly`: nothing to execute (see [`super::guards`]).
    Skip,
}

/// A whole plan: entries in manifest order plus the typed steps.
#[derive(Clone, Debug)]
pub struct OfflinePlan {
    /// One entry per resource.
    pub entries: Vec<Entry>,
    /// Objects of the account that no resource matched: left alone, listed for information
    /// (like a prune preview).
    pub unmanaged: Vec<Unmanaged>,
    pub(crate) steps: Vec<Step>,
    pub(crate) resources: Vec<Resource>,
}

/// An object of the account that no manifest names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Unmanaged {
    /// Kind that would manage it.
    pub kind: &'static str,
    /// Id at the service.
    pub id: i64,
    /// Its name (sub account, key) or domain.
    pub name: String,
}

/// The objects of `inventory` whose id no entry of its kind matched.
fn unmanaged(entries: &[Entry], inventory: &Inventory) -> Vec<Unmanaged> {
    let matched = |kind: &str, id: i64| entries.iter().any(|e| e.kind == kind && e.id == Some(id));
    let subs = inventory
        .sub_accounts
        .iter()
        .map(|s| ("SubAccount", s.id, &s.name));
    let keys = inventory.api_keys.iter().map(|k| ("ApiKey", k.id, &k.name));
    let domains = inventory
        .sending_domains
        .iter()
        .map(|d| ("SendingDomain", d.id, &d.domain));
    subs.chain(keys)
        .chain(domains)
        .filter(|(kind, id, _)| !matched(kind, *id))
        .map(|(kind, id, name)| Unmanaged {
            kind,
            id,
            name: name.clone(),
        })
        .collect()
}

impl OfflinePlan {
    /// Counts by action.
    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for e in &self.entries {
            s.add(e.action);
        }
        s
    }

    /// True when some resource cannot be planned; `apply` then writes nothing.
    pub fn has_errors(&self) -> bool {
        self.entries.iter().any(|e| e.error.is_some())
    }
}

/// An entry for `loaded` with action `error` and nothing else filled in.
pub(crate) fn entry_of(loaded: &Loaded) -> Entry {
    Entry {
        kind: loaded.resource.kind(),
        namespace: loaded.resource.namespace().to_string(),
        name: loaded.resource.name().to_string(),
        source: loaded.source.to_string(),
        action: "error",
        id: None,
        matched_by: None,
        changes: Vec::new(),
        notes: Vec::new(),
        steps: Vec::new(),
        error: None,
    }
}

/// Fills `e` from a kind's plan: `create` when no object matched, `update` when fields differ,
/// else `unchanged`; every step `apply` may take.
fn fill<K: ManagedKind>(e: &mut Entry, plan: &ResourcePlan<K>) {
    let p = &plan.planned;
    e.action = if p.found.is_none() {
        "create"
    } else if p.changes.is_empty() {
        "unchanged"
    } else {
        "update"
    };
    e.id = p.found.map(|f| f.id);
    e.matched_by = p.found.map(|f| f.matched_by);
    e.changes = p.changes.clone();
    e.notes = p.notes.clone();
    e.steps = p.shown_steps();
}

/// The step of a resource planned by the driver, or its error in `e`.
fn planned<K: ManagedKind>(
    e: &mut Entry,
    result: Result<ResourcePlan<K>, PlanError>,
    step: impl FnOnce(ResourcePlan<K>) -> Step,
) -> Result<Step, ApiError> {
    match result {
        Ok(plan) => {
            fill(e, &plan);
            Ok(step(plan))
        }
        Err(PlanError::Blocked(message)) => {
            e.error = Some(message);
            Ok(Step::Invalid)
        }
        Err(PlanError::Api(err)) => Err(err),
    }
}

/// Plans every resource of `resources` against the account.
///
/// Reads: the three lists, plus one GET per matched object whose spec sets a field the list does
/// not carry (a sub account's `ipPoolId`, a key's permissions or allowed IPs); those GETs run
/// concurrently, within the client's request budget.
///
/// Errors: API failures while reading. Problems of single resources (ambiguous matches, keys
/// that cannot be created) are entries with action `error`.
pub async fn build(client: &Client, resources: &[Loaded]) -> Result<OfflinePlan, ApiError> {
    let inventory = Inventory::load(client).await?;
    build_with(client, resources, &inventory).await
}

/// How many detail reads planning runs at once; the client's request budget is the real limit.
const PARALLEL: usize = 64;

/// Namespace, name, matched id and first key name of a planned SubAccount (keys refer to it).
type PlannedSubAccount = (String, String, Option<i64>, Option<String>);

pub(crate) async fn build_with(
    client: &Client,
    resources: &[Loaded],
    inventory: &Inventory,
) -> Result<OfflinePlan, ApiError> {
    let mut slots: Vec<Option<(Entry, Step)>> = resources.iter().map(|_| None).collect();
    // SubAccounts first: keys refer to them. Detail reads of one pass run concurrently.
    let planned: Vec<(usize, Entry, Step, Option<PlannedSubAccount>)> =
        stream::iter(resources.iter().enumerate().filter_map(|(index, loaded)| {
            match &loaded.resource {
                Resource::SubAccount(r) => Some((index, loaded, r)),
                _ => None,
            }
        }))
        .map(|(index, loaded, r)| async move {
            let (e, step, sub) = plan_sub_account(client, r, loaded, inventory).await?;
            Ok::<_, ApiError>((index, e, step, sub))
        })
        .buffered(PARALLEL)
        .try_collect()
        .await?;
    let mut sub_accounts: Vec<PlannedSubAccount> = Vec::new();
    for (index, e, step, sub) in planned {
        slots[index] = Some((e, step));
        sub_accounts.extend(sub);
    }
    let sub_accounts = &sub_accounts;
    let planned: Vec<(usize, Entry, Step)> = stream::iter(resources.iter().enumerate())
        .filter(|(_, loaded)| {
            futures::future::ready(!matches!(loaded.resource, Resource::SubAccount(_)))
        })
        .map(|(index, loaded)| async move {
            let mut e = entry_of(loaded);
            let step = match &loaded.resource {
                Resource::ApiKey(r) => {
                    plan_key(client, r, loaded, sub_accounts, inventory, &mut e).await?
                }
                Resource::SendingDomain(r) => plan_domain(client, r, inventory, &mut e).await?,
                Resource::SubAccount(_) => Step::Invalid,
            };
            Ok::<_, ApiError>((index, e, step))
        })
        .buffered(PARALLEL)
        .try_collect()
        .await?;
    for (index, e, step) in planned {
        slots[index] = Some((e, step));
    }
    // Every slot is filled: each resource is of one of the three kinds handled above.
    let (mut entries, mut steps): (Vec<Entry>, Vec<Step>) = slots.into_iter().flatten().unzip();
    let resources: Vec<Resource> = resources.iter().map(|l| l.resource.clone()).collect();
    super::guards::apply(&mut entries, &mut steps, &resources);
    Ok(OfflinePlan {
        unmanaged: unmanaged(&entries, inventory),
        entries,
        steps,
        resources,
    })
}

async fn plan_sub_account(
    client: &Client,
    r: &SubAccount,
    loaded: &Loaded,
    inventory: &Inventory,
) -> Result<(Entry, Step, Option<PlannedSubAccount>), ApiError> {
    let mut e = entry_of(loaded);
    let step = planned(
        &mut e,
        driver::plan::<SubAccount>(client, r, inventory).await,
        Step::SubAccount,
    )?;
    let sub = match &step {
        Step::SubAccount(plan) => Some((
            loaded.resource.namespace().to_string(),
            loaded.resource.name().to_string(),
            plan.planned.found.map(|f| f.id),
            sub_account::initial_key_name(&plan.desired),
        )),
        _ => None,
    };
    Ok((e, step, sub))
}

async fn plan_domain(
    client: &Client,
    r: &SendingDomain,
    inventory: &Inventory,
    e: &mut Entry,
) -> Result<Step, ApiError> {
    planned(
        e,
        driver::plan::<SendingDomain>(client, r, inventory).await,
        Step::SendingDomain,
    )
}

async fn plan_key(
    client: &Client,
    r: &ApiKey,
    loaded: &Loaded,
    sub_accounts: &[PlannedSubAccount],
    inventory: &Inventory,
    e: &mut Entry,
) -> Result<Step, ApiError> {
    let mut d = match driver::desired::<ApiKey>(r) {
        Ok(d) => d,
        Err(problem) => {
            e.error = Some(problem.to_string());
            return Ok(Step::Invalid);
        }
    };
    if let Some(name) = &d.sub_account_ref {
        let ns = loaded.resource.namespace();
        match sub_accounts
            .iter()
            .find(|(n, m, _, _)| n == ns && m == name)
        {
            Some((_, _, Some(id), _)) => d.sub_account_id = Some(*id),
            Some((_, _, None, initial)) if initial.as_deref() == Some(d.name.as_str()) => {
                e.action = "create";
                e.notes.push(format!(
                    "created with SubAccount \"{name}\" (its spec.apiKey)"
                ));
                return Ok(Step::KeyOfNewSubAccount {
                    sub_account: name.clone(),
                    desired: d,
                });
            }
            Some((_, _, None, _)) => {
                e.error = Some(format!(
                    "SubAccount \"{name}\" is to be created and its spec.apiKey does not name a key \"{}\"; the interface creates keys inside a sub account only with the sub account",
                    d.name
                ));
                return Ok(Step::Invalid);
            }
            None => {
                e.error = Some(format!(
                    "spec.subAccountRef.name: no SubAccount \"{name}\" in namespace \"{ns}\""
                ));
                return Ok(Step::Invalid);
            }
        }
    }
    let result = driver::plan_desired::<ApiKey>(client, d, &inventory.api_keys).await;
    planned(e, result, Step::ApiKey)
}
