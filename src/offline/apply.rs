//! Executing an [`OfflinePlan`]: sub accounts, then API keys, then sending domains.

use std::path::PathBuf;

use futures::{StreamExt, stream};
use serde::Serialize;

use super::guards::OBSERVE;
use super::inside::Inside;
use super::plan::{Entry, OfflinePlan, Step, Summary};
use super::twins;
use crate::api::{ApiObject, Client, SubAccountDetail};
use crate::crd::DnsRecord;
use crate::engine::driver::{self, ResourcePlan};
use crate::engine::inventory::Inventory;
use crate::engine::{ManagedKind, StepReport, placement};
use crate::files::SafeDir;

/// How many resources of one kind are applied at once. The client's request budget
/// (`--api-concurrency`, `--api-rps`) is the real limit; this only bounds the tasks waiting
/// for it.
const PARALLEL: usize = 64;

/// What happened to one resource.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// The plan entry this outcome executes.
    #[serde(flatten)]
    pub entry: Entry,
    /// `created`, `updated`, `unchanged`, `observe`, `paused`, `failed` or `skipped`.
    pub result: &'static str,
    /// For sending domains: the DNS records to publish.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dns_records: Vec<DnsRecord>,
    /// For sending domains: all three records verified.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
    /// Files written under `--secrets-dir` (paths only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub secret_files: Vec<PathBuf>,
    /// Files `destroy --secrets-dir` removed (paths only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed_files: Vec<PathBuf>,
    /// Each planned API call with what became of it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepReport>,
}

/// The result of an apply.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ApplyReport {
    /// One outcome per resource, in manifest order.
    pub outcomes: Vec<Outcome>,
}

impl ApplyReport {
    /// Counts by result (`created` counts as create, `updated` as update).
    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for o in &self.outcomes {
            s.add(o.result);
        }
        s
    }
}

pub(crate) struct Ctx<'a> {
    pub(crate) client: &'a Client,
    pub(crate) secrets_dir: Option<&'a SafeDir>,
    /// The sub account whose credential `client` calls as, if any: a 401 is then told as that
    /// credential's refusal ([`Inside::refused`]), not the company key's.
    pub(crate) inside: Option<&'a Inside>,
}

pub(crate) fn outcome(entry: &Entry, result: &'static str) -> Outcome {
    Outcome {
        entry: entry.clone(),
        result,
        ..Outcome::default()
    }
}

pub(crate) fn failed(entry: &Entry, error: impl std::fmt::Display) -> Outcome {
    let mut o = outcome(entry, "failed");
    o.entry.error = Some(error.to_string());
    o
}

/// Executes `plan`. A plan with errors writes nothing: each resource is reported as [`not_run`]
/// says.
///
/// Failures of single resources are outcomes with result `failed` and the API's message;
/// the others go on.
pub async fn run(
    client: &Client,
    plan: &OfflinePlan,
    secrets_dir: Option<&SafeDir>,
) -> ApplyReport {
    if plan.has_errors() {
        let outcomes = plan.entries.iter().map(not_run).collect();
        return ApplyReport { outcomes };
    }
    let mut outcomes: Vec<Option<Outcome>> = plan.entries.iter().map(|_| None).collect();
    // Sub accounts, then keys, then domains; each resource through the client of its placement.
    let rank = |s: &Step| match s {
        Step::SubAccount(_) => 0,
        Step::ApiKey(_) => 1,
        Step::SendingDomain(_) => 2,
        _ => 3,
    };
    let mut created: Vec<(usize, SubAccountDetail)> = Vec::new();
    for phase in 0..3 {
        let created_so_far = &created;
        let done: Vec<(usize, Outcome, Option<SubAccountDetail>)> =
            stream::iter((0..plan.steps.len()).filter(|i| rank(&plan.steps[*i]) == phase))
                .map(|i| async move {
                    let entry = &plan.entries[i];
                    let inside = plan.inside.get(i).and_then(Option::as_ref);
                    let (client, new_sub) = match placed(client, inside, created_so_far) {
                        Ok(placed) => placed,
                        Err(e) => return (i, failed(entry, e), None),
                    };
                    let ctx = &Ctx {
                        client: &client,
                        secrets_dir,
                        inside,
                    };
                    match &plan.steps[i] {
                        Step::SubAccount(p) => {
                            let (o, detail) = apply_one(ctx, p, entry, true).await;
                            (i, o, detail)
                        }
                        Step::ApiKey(p) => (i, apply_placed(ctx, p, entry, new_sub).await, None),
                        Step::SendingDomain(p) => {
                            (i, apply_placed(ctx, p, entry, new_sub).await, None)
                        }
                        _ => unreachable!("the phases take sub accounts, keys and domains only"),
                    }
                })
                .buffered(PARALLEL)
                .collect()
                .await;
        for (i, o, detail) in done {
            outcomes[i] = Some(o);
            created.extend(detail.map(|d| (i, d)));
        }
    }
    let outcomes = outcomes
        .into_iter()
        .zip(&plan.entries)
        .zip(&plan.steps)
        .map(|((o, e), step)| {
            o.unwrap_or_else(|| match step {
                // Paused, or ObserveOnly with nothing to observe: the plan's word is the result.
                Step::Skip => outcome(e, e.action),
                _ => outcome(e, "skipped"),
            })
        })
        .collect();
    ApplyReport { outcomes }
}

/// The outcome of a resource of a plan with errors, where nothing runs: `failed` when the
/// resource's own plan failed, else `skipped`.
pub(crate) fn not_run(e: &Entry) -> Outcome {
    outcome(
        e,
        if e.error.is_some() {
            "failed"
        } else {
            "skipped"
        },
    )
}

/// The client a resource calls with and, when it is placed inside a sub account this apply
/// created, that sub account's create answer. Outside a sub account (`inside` `None`): the
/// company client. Inside one: the company client calling as the sub account's credential,
/// from the answer of the SubAccount applied (`created`: manifest index and answer), else as
/// the plan found it.
///
/// Errors: for people, why there is none (the SubAccount failed, or has no usable key).
fn placed<'a>(
    client: &Client,
    inside: Option<&Inside>,
    created: &'a [(usize, SubAccountDetail)],
) -> Result<(Client, Option<&'a SubAccountDetail>), String> {
    let Some(inside) = inside else {
        return Ok((client.clone(), None));
    };
    let answered = (created.iter().find(|(i, _)| *i == inside.sub)).map(|(_, d)| d);
    let key = match (answered, &inside.credential) {
        (Some(detail), _) => {
            placement::credential(&inside.credential_key, detail.id, &detail.api_keys)?
                .key
                .clone()
        }
        (None, Some(key)) => key.clone(),
        (None, None) => return Err("its SubAccount was not applied".into()),
    };
    let client = client.calling_as(key).map_err(|e| e.to_string())?;
    Ok((client, answered.filter(|_| inside.id.is_none())))
}

/// Executes the plan of one resource of kind `K` and reports it: the result word, the id, each
/// step's outcome, the secret values written under `--secrets-dir` and, with `report`, the DNS
/// records to publish ([`ManagedKind::records`]; the object is read at the end when no step
/// answered it and the report or a secret value needs it).
pub(crate) async fn apply_one<K: ManagedKind>(
    ctx: &Ctx<'_>,
    plan: &ResourcePlan<K>,
    entry: &Entry,
    report: bool,
) -> (Outcome, Option<K::Detail>) {
    // Observing is not owning: values are exported only under the adoption annotation.
    let may_export = entry.action != OBSERVE || entry.takes_over_files;
    let exports =
        may_export && ctx.secrets_dir.is_some() && !K::secret_refs(&plan.desired).is_empty();
    let want_detail = report && (K::HAS_RECORDS || exports);
    let executed = driver::execute::<K>(ctx.client, plan, None, want_detail).await;
    let mut o = match (&executed.error, ctx.inside) {
        (None, _) => outcome(entry, past_tense(entry.action)),
        (Some(e), Some(inside)) if e.status() == Some(401) => failed(
            entry,
            format!("{}. The service answered: {e}", inside.refused()),
        ),
        (Some(e), _) => failed(entry, e),
    };
    o.steps = executed.steps;
    o.entry.id = o.entry.id.or(plan.planned.found.map(|f| f.id));
    if let Some(detail) = &executed.detail {
        let id = detail.id();
        o.entry.id = Some(id);
        if let Some((records, verified)) = K::records(detail).filter(|_| report) {
            o.dns_records = records;
            o.verified = Some(verified);
        }
        match K::exports(&plan.desired, detail) {
            Ok(exports) => {
                if let Some(dir) = ctx.secrets_dir.filter(|_| may_export) {
                    for export in &exports {
                        let (secret, key, value) = (&export.secret_name, export.key, &export.value);
                        super::secret_files::write(dir, &mut o, secret, key, value);
                    }
                }
            }
            Err(note) => o.entry.notes.push(note),
        }
        // After the value is stored: a twin fails the run, and loses nothing.
        if !K::NATURAL_KEY_UNIQUE
            && o.steps.iter().any(StepReport::created)
            && let Err(problem) =
                twins::check::<K>(ctx.client, &plan.desired, id, !o.secret_files.is_empty()).await
        {
            o.result = "failed";
            o.entry.error = Some(problem);
        }
    }
    (o, executed.detail)
}

/// Applies `plan`, made against the account as it was: for a resource inside a sub account this
/// apply created (`new_sub`: its create answer), planned again first against what that answer
/// shows the sub account holds (the plan found nothing there; the key the sub account was
/// created with is there now). Every success of such a resource is reported `created`, as its
/// entry says.
async fn apply_placed<K: ManagedKind>(
    ctx: &Ctx<'_>,
    plan: &ResourcePlan<K>,
    entry: &Entry,
    new_sub: Option<&SubAccountDetail>,
) -> Outcome {
    let Some(sub) = new_sub else {
        return apply_one(ctx, plan, entry, true).await.0;
    };
    let mut desired = plan.desired.clone();
    K::in_sub_account(&mut desired, sub.id);
    let held = Inventory::of_new_sub_account(sub);
    match driver::plan_desired::<K>(ctx.client, desired, plan.external_id, K::items(&held)).await {
        Ok(plan) => apply_one(ctx, &plan, entry, true).await.0,
        Err(e) => failed(entry, e),
    }
}

/// The result word of an entry whose steps all ran: `created`, `updated`, `unchanged`,
/// `observe` (an `ObserveOnly` resource, which has none), and for `destroy` `deleted`,
/// `deactivated`, `kept` or `absent`.
fn past_tense(action: &str) -> &'static str {
    match action {
        "create" => "created",
        "update" => "updated",
        "delete" => "deleted",
        "deactivate" => "deactivated",
        "keep" => "kept",
        "absent" => "absent",
        OBSERVE => OBSERVE,
        _ => "unchanged",
    }
}
