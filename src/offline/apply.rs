//! Executing an [`OfflinePlan`]: sub accounts, then API keys, then sending domains.

use std::path::{Path, PathBuf};

use futures::{StreamExt, stream};
use secrecy::SecretString;
use serde::Serialize;

use super::plan::{Entry, KeyScope, OfflinePlan, Step, Summary};
use super::secrets;
use crate::api::{
    ApiError, ApiKeyDetail, Client, ListApiKeysQuery, ListSubAccountsQuery, SubAccountDetail,
};
use crate::crd::{DnsRecord, SendingDomain};
use crate::engine::driver;
use crate::engine::{ManagedKind, StepReport};
use crate::manifest::Resource;
use crate::reconcile::execute::create_or_recover;
use crate::reconcile::{Action, apikey, natural_key, sendingdomain, subaccount};

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
    /// Each planned API call with what became of it (kinds on the engine: SendingDomain).
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
            match o.result {
                "created" => s.create += 1,
                "updated" => s.update += 1,
                "unchanged" | super::guards::OBSERVE | super::guards::PAUSED => s.unchanged += 1,
                _ => s.error += 1,
            }
        }
        s
    }
}

struct Ctx<'a> {
    client: &'a Client,
    secrets_dir: Option<&'a Path>,
}

fn outcome(entry: &Entry, result: &'static str) -> Outcome {
    Outcome {
        entry: entry.clone(),
        result,
        dns_records: Vec::new(),
        verified: None,
        secret_files: Vec::new(),
        steps: Vec::new(),
    }
}

fn failed(entry: &Entry, error: impl std::fmt::Display) -> Outcome {
    let mut o = outcome(entry, "failed");
    o.entry.error = Some(error.to_string());
    o
}

fn result_word<C, U>(action: &Action<C, U>) -> &'static str {
    match action {
        Action::Create(_) => "created",
        Action::Update { .. } => "updated",
        Action::Unchanged { .. } => "unchanged",
    }
}

/// Executes `plan`. A plan with errors writes nothing: every resource is reported `skipped`.
///
/// Failures of single resources are outcomes with result `failed` and the API's message;
/// the others go on.
pub async fn run(client: &Client, plan: &OfflinePlan, secrets_dir: Option<&Path>) -> ApplyReport {
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
            sub_details.push((
                plan.resources[i].namespace().to_string(),
                plan.resources[i].name().to_string(),
                d,
            ));
        }
    }
    let sub_details = &sub_details;

    let keys = indexed(|s| matches!(s, Step::ApiKey { .. }));
    let done: Vec<(usize, Outcome)> = stream::iter(keys)
        .map(|i| async move { (i, apply_api_key(ctx, plan, i, sub_details).await) })
        .buffered(PARALLEL)
        .collect()
        .await;
    for (i, o) in done {
        outcomes[i] = Some(o);
    }

    let domains = indexed(|s| matches!(s, Step::SendingDomain { .. }));
    let done: Vec<(usize, Outcome)> = stream::iter(domains)
        .map(|i| async move { (i, apply_domain(ctx, plan, i).await) })
        .buffered(PARALLEL)
        .collect()
        .await;
    for (i, o) in done {
        outcomes[i] = Some(o);
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
        Err(e) => o.entry.notes.push(e),
    }
}

async fn apply_sub_account(
    ctx: &Ctx<'_>,
    plan: &OfflinePlan,
    i: usize,
) -> (Outcome, Option<SubAccountDetail>) {
    let (Step::SubAccount { desired, plan: p }, entry) = (&plan.steps[i], &plan.entries[i]) else {
        return (outcome(&plan.entries[i], "skipped"), None);
    };
    let client = ctx.client;
    if let Action::Unchanged { id } = &p.action
        && (ctx.secrets_dir.is_none() || desired.initial_key.is_none())
    {
        // Nothing to write and nothing to report beyond the id: no read needed.
        let mut o = outcome(entry, "unchanged");
        o.entry.id = Some(*id);
        return (o, None);
    }
    let result: Result<SubAccountDetail, ApiError> = match &p.action {
        Action::Create(req) => {
            create_or_recover(client.create_sub_account(req), || async {
                let q = ListSubAccountsQuery {
                    search: Some(desired.name.clone()),
                    ..Default::default()
                };
                let found = client.list_all_sub_accounts(&q).await?;
                match found
                    .iter()
                    .find(|s| natural_key::same_ignoring_case(&s.name, &desired.name))
                {
                    Some(s) => client.get_sub_account(s.id).await.map(Some),
                    None => Ok(None),
                }
            })
            .await
        }
        Action::Update { id, request, .. } => client.update_sub_account(*id, request).await,
        Action::Unchanged { id } => client.get_sub_account(*id).await,
    };
    match result {
        Ok(detail) => {
            let mut o = outcome(entry, result_word(&p.action));
            o.entry.id = Some(detail.id);
            if let (Some(key), Resource::SubAccount(r)) = (&desired.initial_key, &plan.resources[i])
            {
                let name = subaccount::initial_key_name(desired).unwrap_or_default();
                if let Some(k) = detail
                    .api_keys
                    .iter()
                    .find(|k| natural_key::same_key_name(&k.name, &name))
                {
                    write_secret(
                        ctx,
                        &mut o,
                        plan.resources[i].namespace(),
                        &key.secret_name,
                        "apiKey",
                        &k.key,
                    );
                } else if r.spec.api_key.is_some() {
                    o.entry
                        .notes
                        .push(format!("the sub account has no key named \"{name}\""));
                }
            }
            (o, Some(detail))
        }
        Err(e) => (failed(entry, e), None),
    }
}

async fn apply_api_key(
    ctx: &Ctx<'_>,
    plan: &OfflinePlan,
    i: usize,
    subs: &[(String, String, SubAccountDetail)],
) -> Outcome {
    let (
        Step::ApiKey {
            desired,
            plan: p,
            scope,
        },
        entry,
    ) = (&plan.steps[i], &plan.entries[i])
    else {
        return outcome(&plan.entries[i], "skipped");
    };
    let client = ctx.client;
    let namespace = plan.resources[i].namespace().to_string();
    if let Some(p) = p
        && let Action::Unchanged { id } = &p.action
        && ctx.secrets_dir.is_none()
    {
        // The key value is not written anywhere: no read needed.
        let mut o = outcome(entry, "unchanged");
        o.entry.id = Some(*id);
        return o;
    }
    let result: Result<(ApiKeyDetail, &'static str), KeyError> = async {
        match (scope, p) {
            (KeyScope::CreatedWith(sub), _) => {
                let Some((_, _, detail)) =
                    subs.iter().find(|(ns, n, _)| ns == &namespace && n == sub)
                else {
                    return Err(KeyError::Missing(format!(
                        "SubAccount \"{sub}\" was not applied"
                    )));
                };
                let Some(item) = detail
                    .api_keys
                    .iter()
                    .find(|k| natural_key::same_key_name(&k.name, &desired.name))
                else {
                    return Err(KeyError::Missing(format!(
                        "the sub account of SubAccount \"{sub}\" has no key named \"{}\"",
                        desired.name
                    )));
                };
                let current = client.get_api_key(item.id).await?;
                let observed = apikey::Observed::from(&current);
                let found = crate::reconcile::Found {
                    id: item.id,
                    matched_by: crate::reconcile::MatchedBy::NaturalKey,
                };
                match apikey::plan(desired, Some((found, &observed))) {
                    Ok(crate::reconcile::Plan {
                        action: Action::Update { id, request, .. },
                        ..
                    }) => Ok((client.update_api_key(id, &request).await?, "created")),
                    _ => Ok((current, "created")),
                }
            }
            (_, Some(p)) => match &p.action {
                Action::Create(req) => {
                    let detail = create_or_recover(client.create_api_key(req), || async {
                        let q = ListApiKeysQuery {
                            search: Some(desired.name.clone()),
                            ..Default::default()
                        };
                        let found = client.list_all_api_keys(&q).await?;
                        match found.iter().find(|k| {
                            natural_key::same_key_name(&k.name, &desired.name)
                                && k.sub_account_id == 0
                        }) {
                            Some(k) => client.get_api_key(k.id).await.map(Some),
                            None => Ok(None),
                        }
                    })
                    .await?;
                    // The create body has no permissionType: set it when the spec asks for another.
                    let observed = apikey::Observed::from(&detail);
                    let found = crate::reconcile::Found {
                        id: detail.id,
                        matched_by: crate::reconcile::MatchedBy::StatusId,
                    };
                    match apikey::plan(desired, Some((found, &observed))) {
                        Ok(crate::reconcile::Plan {
                            action: Action::Update { id, request, .. },
                            ..
                        }) => Ok((client.update_api_key(id, &request).await?, "created")),
                        _ => Ok((detail, "created")),
                    }
                }
                Action::Update { id, request, .. } => {
                    Ok((client.update_api_key(*id, request).await?, "updated"))
                }
                Action::Unchanged { id } => Ok((client.get_api_key(*id).await?, "unchanged")),
            },
            (_, None) => Err(KeyError::Missing("no plan for this key".into())),
        }
    }
    .await;
    match result {
        Ok((detail, word)) => {
            let mut o = outcome(entry, word);
            o.entry.id = Some(detail.id);
            write_secret(
                ctx,
                &mut o,
                &namespace,
                &desired.secret_name,
                "apiKey",
                &detail.key,
            );
            o
        }
        Err(e) => failed(entry, e),
    }
}

/// Why an API key could not be applied.
#[derive(Debug, thiserror::Error)]
enum KeyError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("{0}")]
    Missing(String),
}

async fn apply_domain(ctx: &Ctx<'_>, plan: &OfflinePlan, i: usize) -> Outcome {
    let (Step::SendingDomain(p), entry) = (&plan.steps[i], &plan.entries[i]) else {
        return outcome(&plan.entries[i], "skipped");
    };
    // The detail carries the DNS records and flags the report prints.
    let executed = driver::execute::<SendingDomain>(ctx.client, p, true).await;
    let mut o = match &executed.error {
        None => outcome(entry, past_tense(entry.action)),
        Some(e) => failed(entry, e),
    };
    o.steps = executed.steps;
    if let Some(detail) = &executed.detail {
        o.entry.id = Some(detail.id);
        o.dns_records = sendingdomain::dns_records(detail);
        o.verified = Some(o.dns_records.iter().all(|r| r.verified));
        for export in SendingDomain::exports(&p.desired, detail) {
            write_secret(
                ctx,
                &mut o,
                plan.resources[i].namespace(),
                &export.secret_name,
                export.key,
                &export.value,
            );
        }
    }
    o
}

/// The result word of an entry whose steps all ran: `created`, `updated` or `unchanged`.
fn past_tense(action: &str) -> &'static str {
    match action {
        "create" => "created",
        "update" => "updated",
        _ => "unchanged",
    }
}
