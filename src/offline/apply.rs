//! Executing an [`OfflinePlan`]: sub accounts, then API keys, then sending domains.

use std::path::PathBuf;

use futures::{StreamExt, stream};
use secrecy::SecretString;
use serde::Serialize;

use super::plan::{Entry, Inside, OfflinePlan, Step, Summary};
use super::{secrets, twins};
use crate::api::{Client, SubAccountDetail};
use crate::crd::{ApiKey, DnsRecord};
use crate::engine::driver::{self, ResourcePlan};
use crate::engine::kinds::sending_domain::{self, records};
use crate::engine::kinds::sub_account;
use crate::engine::{Found, MatchedBy, natural_key};
use crate::engine::{ManagedKind, StepReport};
use crate::files::SafeDir;

/// How many resources of one kind are applied at once. The client's request budget
/// (`--api-concurrency`, `--api-rps`) is the real limit; this only bounds the tasks waiting
/// for it.
const PARALLEL: usize = 64;

/// What happened to one resource.
#[derive(Clone, Debug, Serialize)]
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
    /// Each planned API call with what became of it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepReport>,
}

/// The result of an apply.
#[derive(Clone, Debug, Serialize)]
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
}

pub(crate) fn outcome(entry: &Entry, result: &'static str) -> Outcome {
    Outcome {
        entry: entry.clone(),
        result,
        dns_records: Vec::new(),
        verified: None,
        secret_files: Vec::new(),
        steps: Vec::new(),
    }
}

pub(crate) fn failed(entry: &Entry, error: impl std::fmt::Display) -> Outcome {
    let mut o = outcome(entry, "failed");
    o.entry.error = Some(error.to_string());
    o
}

/// Executes `plan`. A plan with errors writes nothing: every resource is reported `skipped`.
///
/// Failures of single resources are outcomes with result `failed` and the API's message;
/// the others go on.
pub async fn run(
    client: &Client,
    plan: &OfflinePlan,
    secrets_dir: Option<&SafeDir>,
) -> ApplyReport {
    if plan.has_errors() {
        let outcomes = plan
            .entries
            .iter()
            .map(|e| {
                outcome(
                    e,
                    if e.error.is_some() {
                        "failed"
                    } else {
                        "skipped"
                    },
                )
            })
            .collect();
        return ApplyReport { outcomes };
    }
    let ctx = &Ctx {
        client,
        secrets_dir,
    };
    let mut outcomes: Vec<Option<Outcome>> = plan.entries.iter().map(|_| None).collect();
    let indexed = |pred: fn(&Step) -> bool| -> Vec<usize> {
        (0..plan.steps.len())
            .filter(|i| pred(&plan.steps[*i]))
            .collect()
    };

    let subs = indexed(|s| matches!(s, Step::SubAccount { .. }));
    let created: Vec<(usize, Outcome, Option<SubAccountDetail>)> = stream::iter(subs)
        .map(|i| async move {
            let (o, d) = apply_sub_account(ctx, plan, i).await;
            (i, o, d)
        })
        .buffered(PARALLEL)
        .collect()
        .await;
    let mut sub_details = Vec::new();
    for (i, o, d) in created {
        outcomes[i] = Some(o);
        if let Some(d) = d {
            sub_details.push((i, d));
        }
    }
    // The client each resource inside a sub account calls with.
    let callers: Vec<Option<Result<Client, String>>> = plan
        .inside
        .iter()
        .map(|placed| placed.as_ref().map(|p| caller(client, p, &sub_details)))
        .collect();
    let (sub_details, callers) = (&sub_details, &callers);

    // Keys, then domains, each resource through the client of its placement.
    let phases: [fn(&Step) -> bool; 2] = [
        |s| matches!(s, Step::ApiKey(_) | Step::KeyOfNewSubAccount { .. }),
        |s| matches!(s, Step::SendingDomain { .. }),
    ];
    for phase in phases {
        let done: Vec<(usize, Outcome)> = stream::iter(indexed(phase))
            .map(|i| async move {
                let o = match (placed_ctx(ctx, callers, i), &plan.steps[i]) {
                    (Err(e), _) => failed(&plan.entries[i], e),
                    (Ok(ctx), Step::SendingDomain(_)) => apply_domain(&ctx, plan, i).await,
                    (Ok(ctx), Step::ApiKey(_) | Step::KeyOfNewSubAccount { .. }) => {
                        apply_api_key(&ctx, plan, i, sub_details).await
                    }
                    (Ok(_), _) => outcome(&plan.entries[i], "skipped"),
                };
                (i, o)
            })
            .buffered(PARALLEL)
            .collect()
            .await;
        for (i, o) in done {
            outcomes[i] = Some(o);
        }
    }
    let outcomes = outcomes
        .into_iter()
        .zip(&plan.entries)
        .zip(&plan.steps)
        .map(|((o, e), step)| {
            o.unwrap_or_else(|| match step {
                // Paused or ObserveOnly: the plan's word is the result.
                Step::Skip => outcome(e, e.action),
                _ => outcome(e, "skipped"),
            })
        })
        .collect();
    ApplyReport { outcomes }
}

/// The client a resource placed inside a sub account calls with: the company client calling as
/// the sub account's credential, from the create answer of a sub account this apply created
/// (`created`: manifest index and answer), else as the plan found it.
///
/// Errors: for people, why there is none (the SubAccount failed, or has no usable key).
fn caller(
    client: &Client,
    placed: &Inside,
    created: &[(usize, SubAccountDetail)],
) -> Result<Client, String> {
    let answered = created.iter().find(|(i, _)| *i == placed.sub);
    let key = match (answered, &placed.credential) {
        (Some((_, detail)), _) => {
            sub_account::credential(&placed.credential_key, detail.id, &detail.api_keys)?
                .key
                .clone()
        }
        (None, Some(key)) => key.clone(),
        (None, None) => return Err("its SubAccount was not applied".into()),
    };
    client.calling_as(key).map_err(|e| e.to_string())
}

/// `ctx` with the client of resource `i`: its sub account's credential when it is placed
/// inside one.
fn placed_ctx<'a>(
    ctx: &Ctx<'a>,
    callers: &'a [Option<Result<Client, String>>],
    i: usize,
) -> Result<Ctx<'a>, String> {
    let client = match callers.get(i).and_then(Option::as_ref) {
        None => ctx.client,
        Some(Ok(client)) => client,
        Some(Err(e)) => return Err(e.clone()),
    };
    Ok(Ctx {
        client,
        secrets_dir: ctx.secrets_dir,
    })
}

fn write_secret(
    ctx: &Ctx<'_>,
    o: &mut Outcome,
    namespace: &str,
    secret: &str,
    key: &str,
    value: &SecretString,
) {
    let Some(dir) = ctx.secrets_dir else { return };
    match secrets::write(dir, namespace, secret, key, value) {
        Ok(path) => o.secret_files.push(path),
        // The value was obtained but not stored: the run fails, naming the file.
        Err(e) => {
            o.result = "failed";
            o.entry.error = Some(e.to_string());
        }
    }
}

/// Executes the plan of one resource of kind `K` and reports it: the result word, the id, each
/// step's outcome, and the secret values written under `--secrets-dir`. `known` is the object
/// as already read, if it was; `want_detail` reads it at the end when no step answered it.
pub(crate) async fn apply_one<K: ManagedKind>(
    ctx: &Ctx<'_>,
    plan: &ResourcePlan<K>,
    entry: &Entry,
    namespace: &str,
    known: Option<K::Detail>,
    want_detail: bool,
) -> (Outcome, Option<K::Detail>) {
    let executed = driver::execute::<K>(ctx.client, plan, known, want_detail).await;
    let mut o = match &executed.error {
        None => outcome(entry, past_tense(entry.action)),
        Some(e) => failed(entry, e),
    };
    o.steps = executed.steps;
    if let Some(detail) = &executed.detail {
        let id = K::detail_id(detail);
        o.entry.id = Some(id);
        match K::exports(&plan.desired, detail) {
            Ok(exports) => {
                for export in exports {
                    write_secret(
                        ctx,
                        &mut o,
                        namespace,
                        &export.secret_name,
                        export.key,
                        &export.value,
                    );
                }
            }
            Err(note) => o.entry.notes.push(note),
        }
        // After the value is stored: a twin fails the run, and loses nothing.
        if !K::NATURAL_KEY_UNIQUE
            && o.steps.iter().any(StepReport::created)
            && let Err(problem) = twins::check::<K>(ctx.client, &plan.desired, id).await
        {
            o.result = "failed";
            o.entry.error = Some(problem);
        }
    }
    (o, executed.detail)
}

async fn apply_sub_account(
    ctx: &Ctx<'_>,
    plan: &OfflinePlan,
    i: usize,
) -> (Outcome, Option<SubAccountDetail>) {
    let (Step::SubAccount(p), entry) = (&plan.steps[i], &plan.entries[i]) else {
        return (outcome(&plan.entries[i], "skipped"), None);
    };
    // The detail holds the first key's value, to write under --secrets-dir (a create answers
    // it anyway, for the keys created with the sub account).
    let want = ctx.secrets_dir.is_some() && p.desired.initial_key.is_some();
    let namespace = plan.resources[i].namespace();
    apply_one(ctx, p, entry, namespace, None, want).await
}

async fn apply_api_key(
    ctx: &Ctx<'_>,
    plan: &OfflinePlan,
    i: usize,
    subs: &[(usize, SubAccountDetail)],
) -> Outcome {
    let namespace = plan.resources[i].namespace();
    let want = ctx.secrets_dir.is_some();
    let entry = &plan.entries[i];
    let (desired, sub) = match &plan.steps[i] {
        Step::ApiKey(p) => return apply_one(ctx, p, entry, namespace, None, want).await.0,
        Step::KeyOfNewSubAccount {
            desired,
            sub_account,
        } => (desired, sub_account),
        _ => return outcome(entry, "skipped"),
    };
    // A key created with its SubAccount in this apply: planned now that the sub account exists.
    let placed = plan.inside.get(i).and_then(Option::as_ref);
    let Some((_, detail)) = placed.and_then(|p| subs.iter().find(|(s, _)| *s == p.sub)) else {
        return failed(entry, format!("SubAccount \"{sub}\" was not applied"));
    };
    let Some(item) = detail
        .api_keys
        .iter()
        .find(|k| natural_key::same_key_name(&k.name, &desired.name))
    else {
        return failed(
            entry,
            format!(
                "the sub account of SubAccount \"{sub}\" has no key named \"{}\"",
                desired.name
            ),
        );
    };
    // Read with the sub account's credential (`ctx`), which owns it.
    let current = match ctx.client.get_api_key(item.id).await {
        Ok(c) => c,
        Err(e) => return failed(entry, e),
    };
    let mut d = desired.clone();
    d.sub_account_id = Some(detail.id);
    let found = Found {
        id: item.id,
        matched_by: MatchedBy::NaturalKey,
    };
    let observed = ApiKey::observe_detail(&current);
    match driver::plan_observed::<ApiKey>(d, Some((found, observed))) {
        Ok(p) => {
            let mut o = apply_one(ctx, &p, entry, namespace, Some(current), want)
                .await
                .0;
            if o.result == "unchanged" || o.result == "updated" {
                o.result = "created";
            }
            o
        }
        Err(e) => failed(entry, e),
    }
}

async fn apply_domain(ctx: &Ctx<'_>, plan: &OfflinePlan, i: usize) -> Outcome {
    let (Step::SendingDomain(p), entry) = (&plan.steps[i], &plan.entries[i]) else {
        return outcome(&plan.entries[i], "skipped");
    };
    // The detail carries the DNS records and flags the report prints.
    let namespace = plan.resources[i].namespace();
    let (mut o, detail) = apply_one(ctx, p, entry, namespace, None, true).await;
    if let Some(detail) = &detail {
        o.dns_records = records::dns_records(detail);
        o.verified = Some(sending_domain::verified(detail));
    }
    o
}

/// The result word of an entry whose steps all ran: `created`, `updated`, `unchanged`, and for
/// `destroy` `deleted`, `deactivated`, `kept` or `absent`.
fn past_tense(action: &str) -> &'static str {
    match action {
        "create" => "created",
        "update" => "updated",
        "delete" => "deleted",
        "deactivate" => "deactivated",
        "keep" => "kept",
        "absent" => "absent",
        _ => "unchanged",
    }
}
