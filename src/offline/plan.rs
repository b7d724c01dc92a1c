//! Building the plan: one [`Entry`] per resource, from the manifests and the account.

use futures::{StreamExt, TryStreamExt, stream};
use serde::Serialize;

use crate::api::{ApiError, Client};
use crate::crd::{AdoptionPolicy, ApiKey, SendingDomain, SubAccount};
use crate::engine::driver::{self, PlanError, ResourcePlan};
use crate::engine::inventory::Inventory;
use crate::engine::{FieldChange, MatchedBy, natural_key, placement};
use crate::engine::{ManagedKind, ManagedResource, Step as EngineStep};
use crate::manifest::{Loaded, Resource, Selectors};

use super::inside::{Inside, PlannedSubAccount, placed_in};

/// The plan of one resource, for people and for `--output json`.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// Kind of the resource.
    pub kind: &'static str,
    /// Namespace (`default` when unset).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// The object's name at the service ([`Resource::service_name`]).
    pub service_name: String,
    /// The account it is managed through, when not ClusterAccount `default` (see
    /// [`super::accounts`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
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
    /// The resource may write into Secret directories holding the user's files, taking them
    /// over: it is annotated `mailtarget.co/adoption-policy` (see [`super::secret_files`]).
    #[serde(skip)]
    pub takes_over_files: bool,
}

/// Counts of a plan or an apply; as JSON, see [`Summary::to_json`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Resources whose API object is (to be) created.
    pub create: usize,
    /// Resources whose API object is (to be) updated.
    pub update: usize,
    /// Resources needing no write (for `destroy`: kept or absent).
    pub unchanged: usize,
    /// Resources left alone by `mailtarget.co/paused: "true"`.
    pub paused: usize,
    /// `ObserveOnly` resources: read, never written.
    pub observe: usize,
    /// Resources that cannot be planned or failed.
    pub error: usize,
    /// Resources whose object is (to be) deleted or deactivated (`destroy`).
    pub delete: usize,
}

impl Summary {
    /// The counts a command reports, always all of them: `{"create", "update", "unchanged",
    /// "paused", "observe", "error"}` for `plan` and `apply`; `{"delete", "keep", "error"}` for
    /// `destroy` (`deletion`), where `keep` counts what is kept, absent or left alone.
    pub fn to_json(&self, deletion: bool) -> serde_json::Value {
        match deletion {
            false => serde_json::json!({
                "create": self.create,
                "update": self.update,
                "unchanged": self.unchanged,
                "paused": self.paused,
                "observe": self.observe,
                "error": self.error,
            }),
            true => serde_json::json!({
                "delete": self.delete,
                "keep": self.kept(),
                "error": self.error,
            }),
        }
    }

    /// What `destroy` keeps: objects kept or absent, and resources left alone.
    pub fn kept(&self) -> usize {
        self.unchanged + self.paused + self.observe
    }

    /// `, N paused, M observed` for the counts that are not 0 (the end of a text summary).
    pub(crate) fn left_alone(&self) -> String {
        let counts = [(self.paused, "paused"), (self.observe, "observed")];
        (counts.iter().filter(|(n, _)| *n > 0))
            .map(|(n, word)| format!(", {n} {word}"))
            .collect()
    }

    /// Counts one plan action (`create`, `keep`, ...) or apply result (`created`, `kept`, ...);
    /// anything else (`error`, `failed`, `skipped`) is an error.
    pub(crate) fn add(&mut self, word: &str) {
        match word {
            "create" | "created" => self.create += 1,
            "update" | "updated" => self.update += 1,
            "unchanged" | "keep" | "kept" | "absent" => self.unchanged += 1,
            super::guards::PAUSED => self.paused += 1,
            super::guards::OBSERVE => self.observe += 1,
            "delete" | "deleted" | "deactivate" | "deactivated" => self.delete += 1,
            _ => self.error += 1,
        }
    }
}

/// The typed plan of one resource, kept for [`crate::offline::apply`]. A resource inside a sub
/// account this apply creates is planned again once that exists (see `apply`).
#[derive(Clone, Debug)]
pub(crate) enum Step {
    SubAccount(ResourcePlan<SubAccount>),
    ApiKey(ResourcePlan<ApiKey>),
    SendingDomain(ResourcePlan<SendingDomain>),
    Invalid,
    /// Paused, or `ObserveOnly` with no object to observe: nothing to execute (see
    /// [`super::guards`]).
    Skip,
}

impl Step {
    /// Makes this the plan of an `ObserveOnly` resource: no step, so no call that writes. The
    /// plan stays when an object matched, for `apply` to read it and report what it observed
    /// (a domain's DNS records and verification) and, under the adoption annotation, export
    /// its values, as the operator does; with no object it is [`Step::Skip`].
    pub(crate) fn observe_only(&mut self) {
        fn observed<K: ManagedKind>(p: &mut ResourcePlan<K>) -> bool {
            p.planned.steps.clear();
            p.planned.found.is_some()
        }
        let found = match self {
            Step::SubAccount(p) => observed(p),
            Step::ApiKey(p) => observed(p),
            Step::SendingDomain(p) => observed(p),
            Step::Invalid | Step::Skip => return,
        };
        if !found {
            *self = Step::Skip;
        }
    }
}

/// A whole plan: entries in manifest order plus the typed steps.
#[derive(Clone, Debug, Default)]
pub struct OfflinePlan {
    /// One entry per resource.
    pub entries: Vec<Entry>,
    /// Objects of the account that no resource matched: left alone, listed for information
    /// (like a prune preview).
    pub unmanaged: Vec<Unmanaged>,
    pub(crate) steps: Vec<Step>,
    pub(crate) resources: Vec<Resource>,
    /// For each resource placed inside a sub account (`spec.subAccountRef`), where: its calls
    /// are made with that sub account's credential.
    pub(crate) inside: Vec<Option<Inside>>,
}

/// An object of the account that no manifest names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Unmanaged {
    /// Kind that would manage it.
    pub kind: &'static str,
    /// Id at the service.
    pub id: i64,
    /// Its name (sub account, key) or domain.
    pub name: String,
    /// The name of the sub account a key or domain is inside; unset at the company level.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sub_account: Option<String>,
    /// The account it is an object of, when not ClusterAccount `default`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
}

/// The objects of `inventory` whose id no entry of its kind matched; the operator's credential
/// inside a planned sub account belongs to its SubAccount.
fn unmanaged(entries: &[Entry], steps: &[Step], inventory: &Inventory) -> Vec<Unmanaged> {
    let credentials: Vec<(i64, &str)> = steps
        .iter()
        .filter_map(|s| match s {
            Step::SubAccount(p) => Some((p.planned.found?.id, p.desired.credential_key.as_str())),
            _ => None,
        })
        .collect();
    let matched = |kind: &str, id: i64| entries.iter().any(|e| e.kind == kind && e.id == Some(id));
    let credential = |k: &crate::api::ApiKeyListItem| {
        credentials.iter().any(|(sub, name)| {
            k.sub_account_id == *sub && natural_key::same_key_name(&k.name, name)
        })
    };
    let inside =
        |id: i64, name: &String| (id != crate::api::COMPANY_SUB_ACCOUNT_ID).then(|| name.clone());
    let subs = (inventory.sub_accounts.iter()).map(|s| ("SubAccount", s.id, &s.name, None));
    let keys = (inventory.api_keys.iter())
        .filter(|k| !credential(k))
        .map(|k| {
            let sub = inside(k.sub_account_id, &k.sub_account_name);
            ("ApiKey", k.id, &k.name, sub)
        });
    let domains = (inventory.sending_domains.iter()).map(|d| {
        let sub = inside(d.sub_account_id, &d.sub_account_name);
        ("SendingDomain", d.id, &d.domain, sub)
    });
    subs.chain(keys)
        .chain(domains)
        .filter(|(kind, id, _, _)| !matched(kind, *id))
        .map(|(kind, id, name, sub_account)| Unmanaged {
            kind,
            id,
            name: name.clone(),
            sub_account,
            account: None,
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

    /// Marks every entry and unmanaged object as the account `label`'s (`None`: the default
    /// account, not shown).
    pub fn label(&mut self, label: Option<String>) {
        for e in &mut self.entries {
            e.account = label.clone();
        }
        for u in &mut self.unmanaged {
            u.account = label.clone();
        }
    }

    /// The plans of several accounts as one, in the order given (for showing and counting;
    /// each account's plan is executed with its own client).
    pub fn merged(parts: Vec<OfflinePlan>) -> OfflinePlan {
        let mut all = OfflinePlan::default();
        for part in parts {
            let offset = all.resources.len();
            all.entries.extend(part.entries);
            all.unmanaged.extend(part.unmanaged);
            all.steps.extend(part.steps);
            all.resources.extend(part.resources);
            all.inside.extend(part.inside.into_iter().map(|inside| {
                inside.map(|mut i| {
                    i.sub += offset;
                    i
                })
            }));
        }
        all
    }
}

/// An entry for `loaded` with action `error` and nothing else filled in.
pub(crate) fn entry_of(loaded: &Loaded) -> Entry {
    Entry {
        kind: loaded.resource.kind(),
        namespace: loaded.resource.namespace().to_string(),
        name: loaded.resource.name().to_string(),
        service_name: loaded.resource.service_name().to_string(),
        source: loaded.source.to_string(),
        action: "error",
        takes_over_files: AdoptionPolicy::annotated(loaded.resource.meta()).is_some(),
        ..Entry::default()
    }
}

/// The step of a resource planned by the driver, filling `e` from it (`create` when no object
/// matched, `update` when fields differ, else `unchanged`; every step `apply` may take), or its
/// error in `e`.
fn planned<K: ManagedKind>(
    e: &mut Entry,
    result: Result<ResourcePlan<K>, PlanError>,
    step: impl FnOnce(ResourcePlan<K>) -> Step,
) -> Result<Step, ApiError> {
    match result {
        Ok(plan) => {
            let p = &plan.planned;
            e.action = match (p.found, p.changes.is_empty()) {
                (None, _) => "create",
                (Some(_), true) => "unchanged",
                (Some(_), false) => "update",
            };
            e.id = p.found.map(|f| f.id);
            e.matched_by = p.found.map(|f| f.matched_by);
            e.changes = p.changes.clone();
            e.notes = p.notes.clone();
            e.steps = p.shown_steps();
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
/// `selectors` are the manifests' ClusterAccount namespace selectors
/// ([`crate::manifest::ManifestSet::namespace_selectors`]): a resource its account refuses is an
/// entry with error `AccountNotAllowed`, and claims no object.
///
/// Errors: API failures while reading. Problems of single resources (ambiguous matches, keys
/// that cannot be created) are entries with action `error`.
pub async fn build(
    client: &Client,
    resources: &[Loaded],
    selectors: &Selectors,
) -> Result<OfflinePlan, ApiError> {
    let inventory = super::guards::inventory_for(client, resources, selectors).await?;
    build_with(client, resources, &inventory, selectors).await
}

/// How many detail reads planning runs at once; the client's request budget is the real limit.
const PARALLEL: usize = 64;

pub(crate) async fn build_with(
    client: &Client,
    resources: &[Loaded],
    inventory: &Inventory,
    selectors: &Selectors,
) -> Result<OfflinePlan, ApiError> {
    let mut entries = vec![Entry::default(); resources.len()];
    let mut steps = vec![Step::Invalid; resources.len()];
    let mut inside: Vec<Option<Inside>> = vec![None; resources.len()];
    let mut subs: Vec<PlannedSubAccount> = Vec::new();
    // SubAccounts first: keys refer to them. Detail reads of one pass run concurrently.
    for sub_accounts in [true, false] {
        let pass = (resources.iter().enumerate())
            .filter(|(_, l)| matches!(l.resource, Resource::SubAccount(_)) == sub_accounts);
        let subs_so_far = subs.as_slice();
        let planned: Vec<(usize, Entry, Step, Option<Inside>)> = stream::iter(pass)
            .map(|(i, loaded)| async move {
                let mut e = entry_of(loaded);
                // Refused by its account: nothing of it is planned, nothing called.
                let own = inventory.own_sub_account;
                if let Some(refused) = super::guards::refusal(loaded, selectors, own) {
                    e.error = Some(refused);
                    return Ok((i, e, Step::Invalid, None));
                }
                let at = (loaded, subs_so_far, inventory);
                let (step, placed) = match &loaded.resource {
                    Resource::SubAccount(r) => {
                        plan_placed(client, r, at, &mut e, Step::SubAccount).await?
                    }
                    Resource::ApiKey(r) => plan_placed(client, r, at, &mut e, Step::ApiKey).await?,
                    Resource::SendingDomain(r) => {
                        plan_placed(client, r, at, &mut e, Step::SendingDomain).await?
                    }
                };
                Ok::<_, ApiError>((i, e, step, placed))
            })
            .buffered(PARALLEL)
            .try_collect()
            .await?;
        for (i, mut e, step, placed) in planned {
            let sub = PlannedSubAccount::of(i, &resources[i], &step, inventory);
            e.notes
                .extend(sub.as_ref().and_then(PlannedSubAccount::credential_note));
            e.notes.extend(sub.as_ref().and_then(|s| s.pin_note(&step)));
            subs.extend(sub);
            (entries[i], steps[i], inside[i]) = (e, step, placed);
        }
    }
    let resources: Vec<Resource> = resources.iter().map(|l| l.resource.clone()).collect();
    super::guards::apply(&mut entries, &mut steps, &resources, &inside, selectors);
    Ok(OfflinePlan {
        unmanaged: unmanaged(&entries, &steps, inventory),
        entries,
        steps,
        resources,
        inside,
    })
}

/// Plans a resource inside the sub account of the SubAccount its `spec.subAccountRef` names
/// (among the manifests), or in the account itself (a SubAccount, or no reference).
///
/// Inside an existing sub account it is looked up among that sub account's objects only, and
/// its calls will use the sub account's credential; inside one this apply creates, nothing of
/// it exists yet, so it is created (a domain taken elsewhere is an error), except the key the
/// sub account is created with, which comes with it. `apply` plans these again once the sub
/// account exists.
async fn plan_placed<K: ManagedKind>(
    client: &Client,
    r: &K::Resource,
    (loaded, sub_accounts, inventory): (&Loaded, &[PlannedSubAccount], &Inventory),
    e: &mut Entry,
    step: fn(ResourcePlan<K>) -> Step,
) -> Result<(Step, Option<Inside>), ApiError> {
    let mut d = match driver::desired::<K>(r) {
        Ok(d) => d,
        Err(problem) => {
            e.error = Some(problem.to_string());
            return Ok((Step::Invalid, None));
        }
    };
    let external_id = r.external_id();
    let own = loaded.resource.namespace();
    let (sub, note) = match placed_in::<K>(r, (own, K::natural_key(&d)), sub_accounts, true) {
        Err(problem) => {
            e.error = Some(problem);
            return Ok((Step::Invalid, None));
        }
        Ok(Some(placed)) => placed,
        Ok(None) => {
            // Through a sub account's key: in that sub account, as the controller places it.
            if let Some(own) = inventory.own_sub_account {
                K::in_sub_account(&mut d, own);
            }
            let items = K::items(inventory);
            let mut result = driver::plan_desired::<K>(client, d, external_id, items).await;
            // A rename into a name another object holds fails before any write, as in a cluster,
            // where paused and ObserveOnly resources never get this far.
            if let Ok(plan) = &result
                && let Some(found) = plan.planned.found
                && r.writes()
                && !loaded.resource.is_paused()
                && let Some(taken) = driver::rename_taken::<K>(&plan.desired, found.id, items)
            {
                result = Err(driver::PlanError::Blocked(taken));
            }
            return Ok((planned(e, result, step)?, None));
        }
    };
    let inside = Some(sub.inside.clone());
    let result = match sub.inside.id {
        Some(id) => {
            K::in_sub_account(&mut d, id);
            driver::plan_desired::<K>(client, d, external_id, K::items(inventory)).await
        }
        // An external id names nothing inside a sub account not created yet: the lookup below
        // refuses it, before anything is written.
        None if K::API_KEY
            && external_id.is_none()
            && natural_key::same_key_name(K::natural_key(&d), &sub.inside.credential_key) =>
        {
            // The key the sub account is created with: no call of its own.
            let note = format!("created with {} (the key it is created with)", sub.shown());
            Ok(ResourcePlan::noting(d, external_id, note))
        }
        None => {
            K::in_sub_account(&mut d, placement::NOT_CREATED_YET);
            driver::plan_desired::<K>(client, d, external_id, K::items(inventory)).await
        }
    };
    let planned = planned(e, result, step)?;
    e.notes.extend(note);
    Ok((planned, inside))
}
