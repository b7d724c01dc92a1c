//! What stands between a computed plan and the writes of `apply`, as in the controller:
//! a paused resource (`mailtarget.co/paused: "true"`) is left alone, an `ObserveOnly` resource
//! reports what differs and never writes, a resource whose adoption policy is `Adopt` never
//! creates, and two resources claiming one API object (by external id, by name, or one of each)
//! fail the run before any write (`ConflictingOwner`).
//!
//! The caller of the CLI holds the account's key, so adoption is its own: an existing object
//! with the resource's natural key is adopted (`AdoptOrCreate`) unless the resource says
//! `Adopt`, and the plan says `adopted by name` or `adopted by external-id`.

use std::collections::HashMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{Selector, SelectorExt};

use super::inside::Inside;
use super::plan::{Entry, Step};
use crate::crd::{ANNOTATION_ADOPTION_POLICY, AdoptionPolicy};
use crate::engine::inventory::Inventory;
use crate::manifest::{Loaded, Resource, Selectors};

/// Plan action of a paused resource.
pub const PAUSED: &str = "paused";
/// Plan action of an `ObserveOnly` resource.
pub const OBSERVE: &str = "observe";

/// Turns the plans of paused and `ObserveOnly` resources into reports that write nothing, then
/// fails every resource whose matched API object another writing resource of the same kind also
/// matched; every entry with an error ends with action `error` (counted as one). `entries`,
/// `steps` and `resources` are parallel (one slot per resource).
/// `inside` says which resources are placed inside a sub account (empty: none); `selectors`
/// are the manifests' ClusterAccount namespace selectors, whose undecidable requirements give
/// notes (a resource its account refuses was planned so already, with an error, and claims
/// nothing: see [`refused`]).
pub(crate) fn apply(
    entries: &mut [Entry],
    steps: &mut [Step],
    resources: &[Resource],
    inside: &[Option<Inside>],
    selectors: &Selectors,
) {
    for ((e, step), r) in entries.iter_mut().zip(steps.iter_mut()).zip(resources) {
        if e.error.is_some() {
            continue;
        }
        if r.is_paused() {
            e.action = PAUSED;
            e.changes.clear();
            e.steps.clear();
            e.notes = vec![format!(
                "{} is \"true\": left alone",
                crate::crd::ANNOTATION_PAUSED
            )];
            *step = Step::Skip;
        } else if !r.management_policy().may_write() {
            observe(e);
            step.observe_only();
        } else if e.action == "create"
            && AdoptionPolicy::annotated(r.meta()) == Some(AdoptionPolicy::Adopt)
        {
            e.error = Some(format!(
                "{ANNOTATION_ADOPTION_POLICY} is Adopt and no API object matches to adopt; create it at the service or use AdoptOrCreate"
            ));
            // Nothing is created: the plan lists no call.
            e.steps.clear();
            *step = Step::Invalid;
        }
    }
    nothing_inside_skipped_sub_accounts(entries, steps, resources, inside);
    selector_notes(entries, resources, selectors);
    conflicts(entries, resources);
    for e in entries.iter_mut().filter(|e| e.error.is_some()) {
        e.action = "error";
    }
}

/// An `ObserveOnly` entry: the differences become notes, nothing is written.
fn observe(e: &mut Entry) {
    let mut notes: Vec<String> = (e.changes.drain(..))
        .map(|c| format!("{}: not corrected (ObserveOnly)", c.drift()))
        .collect();
    if e.action == "create" {
        notes.push("no API object matches; nothing is created (ObserveOnly)".into());
    }
    notes.append(&mut e.notes);
    e.notes = notes;
    e.steps.clear();
    e.action = OBSERVE;
}

/// Nothing can be created inside a SubAccount that is paused or `ObserveOnly` and does not exist
/// (so is never created), nor be called inside one without its credential.
fn nothing_inside_skipped_sub_accounts(
    entries: &mut [Entry],
    steps: &mut [Step],
    resources: &[Resource],
    inside: &[Option<Inside>],
) {
    for (i, placed) in inside.iter().enumerate() {
        let Some(Inside { sub, id: None, .. }) = placed else {
            continue;
        };
        let left_alone = matches!(steps[i], Step::Skip) || entries[i].action == OBSERVE;
        if !matches!(steps[*sub], Step::Skip) || left_alone {
            continue;
        }
        entries[i].error = Some(format!(
            "it is placed in SubAccount \"{}/{}\", which is paused or ObserveOnly and does not exist",
            resources[*sub].namespace(),
            resources[*sub].name()
        ));
        steps[i] = Step::Invalid;
    }
}

/// Marks every writing entry whose matched id another writing entry of its kind matched too.
fn conflicts(entries: &mut [Entry], resources: &[Resource]) {
    let mut by_object: HashMap<(&'static str, i64), Vec<usize>> = HashMap::new();
    for (i, e) in entries.iter().enumerate() {
        if let Some(id) = e.id
            && e.error.is_none()
            && e.action != PAUSED
            && resources[i].management_policy().may_write()
        {
            by_object.entry((e.kind, id)).or_default().push(i);
        }
    }
    for ((_, id), claimants) in by_object {
        if claimants.len() < 2 {
            continue;
        }
        for &i in &claimants {
            let others: Vec<String> = claimants
                .iter()
                .filter(|&&j| j != i)
                .map(|&j| {
                    let o = &entries[j];
                    format!("{} {}/{} at {}", o.kind, o.namespace, o.name, o.source)
                })
                .collect();
            entries[i].error = Some(format!(
                "ConflictingOwner: the API object {id} it matched is also claimed by {}; two resources cannot manage one API object: remove one or point it at another object",
                others.join(", ")
            ));
        }
    }
}

/// The label every Namespace carries, holding its name (Kubernetes sets it): all the CLI knows
/// of a namespace's labels.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// What a selector on namespaces says of namespace `own`, knowing of it only its name label
/// (requirements on that label are decided, requirements on other labels cannot be).
#[derive(Debug, PartialEq, Eq)]
enum Selected {
    /// Selected, whatever its other labels.
    Yes,
    /// Not selected, whatever its other labels.
    No,
    /// Selected only if its other labels match.
    IfLabelsMatch,
}

fn selects(selector: &LabelSelector, own: &str) -> Selected {
    let on_name = |key: &String| key == NAMESPACE_NAME_LABEL;
    let labels = selector.match_labels.iter().flatten();
    let expressions = selector.match_expressions.iter().flatten();
    let on_name_only = LabelSelector {
        match_labels: Some(
            labels
                .clone()
                .filter(|(k, _)| on_name(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        match_expressions: Some(
            expressions
                .clone()
                .filter(|r| on_name(&r.key))
                .cloned()
                .collect(),
        ),
    };
    let known = [(NAMESPACE_NAME_LABEL.to_string(), own.to_string())].into();
    if !Selector::try_from(on_name_only).is_ok_and(|s| s.matches(&known)) {
        return Selected::No;
    }
    let mut others = labels.map(|(k, _)| k).chain(expressions.map(|r| &r.key));
    match others.any(|k| !on_name(k)) {
        true => Selected::IfLabelsMatch,
        false => Selected::Yes,
    }
}

/// Whether a resource of namespace `own` may be placed inside the sub account of SubAccount
/// `(namespace, name)`, as a cluster decides with its `spec.allowedNamespaces` (`selector`;
/// product design, "Accounts and tenancy"), knowing of the namespace only its name label
/// ([`selects`]). `Ok(None)`: allowed; `Ok(Some(note))`: allowed in a cluster only if the
/// namespace's other labels match.
///
/// Errors: for people, why a cluster refuses it whatever the other labels
/// (`ReferenceNotAllowed`: the selector is unset, or its requirements on the name label exclude
/// `own`).
pub(crate) fn reference_allowed(
    (namespace, name): (&str, &str),
    selector: Option<&LabelSelector>,
    own: &str,
) -> Result<Option<String>, String> {
    if own == namespace {
        return Ok(None);
    }
    let refused = |why: &str| {
        format!(
            "ReferenceNotAllowed: it does not allow objects of namespace \"{own}\" in its sub account ({why}): in a cluster nothing would be called. Allow the namespace there, or reference a SubAccount of namespace \"{own}\""
        )
    };
    let Some(selector) = selector else {
        return Err(refused("its spec.allowedNamespaces is unset"));
    };
    match selects(selector, own) {
        Selected::Yes => Ok(None),
        Selected::No => Err(refused(
            "its spec.allowedNamespaces does not select it by name",
        )),
        Selected::IfLabelsMatch => Ok(Some(format!(
            "in a cluster, placed inside SubAccount \"{namespace}/{name}\" only if the labels of namespace \"{own}\" match its spec.allowedNamespaces (the CLI knows a namespace by its {NAMESPACE_NAME_LABEL} label only)"
        ))),
    }
}

/// Whether `r` may use its ClusterAccount, as a cluster decides it with the account's
/// `spec.namespaceSelector` (product design, "Accounts and tenancy": unset selects every
/// namespace), among the manifests' selectors (`selectors`), knowing of a namespace only its
/// name label ([`selects`]): the selector must select `r`'s namespace, or that of a SubAccount
/// of the manifests hosting it ([`crate::engine::placement::host_namespace`]: one of another
/// namespace whose `spec.allowedNamespaces` lets `r`'s namespace in, as
/// [`reference_allowed`] decides it). `Ok(None)`: it may; `Ok(Some(note))`: only if the
/// namespaces' other labels match. A resource refused so holds no claim on any object.
///
/// Errors: for people, why a cluster refuses it (`AccountNotAllowed`, naming `r`'s namespace
/// only, as a cluster does).
pub(crate) fn account_allows(
    r: &Resource,
    selectors: &Selectors,
) -> Result<Option<String>, String> {
    // An Account (named `namespace/name`) serves its namespace only: no selector names it.
    let account = super::accounts::of(r);
    let Some((_, selector)) = (selectors.accounts.iter()).find(|(n, _)| *n == account) else {
        return Ok(None);
    };
    let own = r.namespace();
    let lets_in = |namespace: &str, name: &str| {
        let at = (namespace, name);
        (selectors.allowed_namespaces(at)).is_some_and(|s| reference_allowed(at, s, own).is_ok())
    };
    let host = crate::engine::placement::host_namespace(own, r.sub_account_ref(), lets_in);
    let by_own = selects(selector, own);
    let by_host = host.map(|h| selects(selector, h));
    match (by_own, by_host) {
        (Selected::Yes, _) | (_, Some(Selected::Yes)) => Ok(None),
        (Selected::No, None | Some(Selected::No)) => Err(format!(
            "AccountNotAllowed: ClusterAccount \"{account}\" does not let namespace \"{own}\" use it (its spec.namespaceSelector does not select it by name): in a cluster nothing would be called. Use another account, or select the namespace there"
        )),
        _ => Ok(Some(format!(
            "in a cluster, ClusterAccount \"{account}\" is usable only if the labels of namespace \"{}\" match its spec.namespaceSelector (the CLI knows a namespace by its {NAMESPACE_NAME_LABEL} label only)",
            host.unwrap_or(own)
        ))),
    }
}

/// Why `loaded` is refused outright, before anything of its account is read: its ClusterAccount
/// does not let its namespace use it ([`account_allows`]), and it is not paused (a paused
/// resource is left alone before any account is used, as in a cluster). `None`: it is planned.
pub(crate) fn refused(loaded: &Loaded, selectors: &Selectors) -> Option<String> {
    let r = &loaded.resource;
    (!r.is_paused())
        .then(|| account_allows(r, selectors).err())
        .flatten()
}

/// Why the SubAccount `loaded` cannot be managed through an account whose key is a sub
/// account's (`own_sub_account`, from the key's own entry in its key list): a sub account key
/// creates and changes no sub account (`AccountScopeInsufficient`, as the operator refuses it
/// before any call). `None` for another kind, a company key, or a paused resource (left alone
/// before any account is used).
pub(crate) fn scope_refusal(loaded: &Loaded, own_sub_account: Option<i64>) -> Option<String> {
    let (Resource::SubAccount(_), Some(id)) = (&loaded.resource, own_sub_account) else {
        return None;
    };
    if loaded.resource.is_paused() {
        return None;
    }
    Some(format!(
        "AccountScopeInsufficient: the account's key is a key of sub account {id}; a SubAccount needs a company account's key. Name a company account in spec.accountRef"
    ))
}

/// Why `loaded` is planned with no call, once its account's objects are read: [`refused`] by
/// its account, or [`scope_refusal`] through a sub account's key (`own_sub_account`).
pub(crate) fn refusal(
    loaded: &Loaded,
    selectors: &Selectors,
    own_sub_account: Option<i64>,
) -> Option<String> {
    refused(loaded, selectors).or_else(|| scope_refusal(loaded, own_sub_account))
}

/// The account's objects, read only when some of `resources` is not [`refused`] (or none is
/// given: the account's objects are still listed): a group of refused resources calls nothing.
///
/// Errors: the lists'.
pub(crate) async fn inventory_for(
    client: &crate::api::Client,
    resources: &[Loaded],
    selectors: &Selectors,
) -> Result<Inventory, crate::api::ApiError> {
    let all_refused =
        !resources.is_empty() && (resources.iter()).all(|l| refused(l, selectors).is_some());
    match all_refused {
        true => Ok(Inventory::default()),
        false => Inventory::load(client).await,
    }
}

/// Notes each resource whose account's selector the CLI cannot decide ([`account_allows`]).
/// Refused resources were planned as such, with no call ([`refused`]); a paused resource is
/// left alone before any account is used, as in a cluster.
fn selector_notes(entries: &mut [Entry], resources: &[Resource], selectors: &Selectors) {
    let rows = entries.iter_mut().zip(resources);
    for (e, r) in rows.filter(|(e, _)| e.action != PAUSED) {
        e.notes.extend(account_allows(r, selectors).ok().flatten());
    }
}
