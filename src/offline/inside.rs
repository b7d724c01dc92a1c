//! Resources placed inside a sub account (`spec.subAccountRef`) that a SubAccount among the
//! manifests manages (product design, "Accounts and tenancy"): how `plan`, `apply` and
//! `destroy` find that sub account, and what they refuse there before any call, as a cluster
//! refuses it.

use super::guards::reference_allowed;
use super::plan::Step;
use crate::crd::{ANNOTATION_EXTERNAL_ID, SubAccount};
use crate::engine::inventory::Inventory;
use crate::engine::lookup::MatchedBy;
use crate::engine::{ManagedKind, ManagedResource, placement};
use crate::manifest::{Loaded, Resource};

/// Where a resource inside a sub account is placed.
#[derive(Clone, Debug)]
pub(crate) struct Inside {
    /// Manifest index of its SubAccount.
    pub sub: usize,
    /// The sub account's id, `None` when no sub account matched (`apply` creates it).
    pub id: Option<i64>,
    /// The operator's credential in an existing sub account, from the company's key list
    /// ([`placement::credential`]); for a new one it comes from the create answer.
    pub credential: Option<secrecy::SecretString>,
    /// Name of the credential key ([`placement::credential_key_name`]).
    pub credential_key: String,
    /// Its SubAccount as messages name it: `SubAccount "namespace/name"`.
    pub shown: String,
}

impl Inside {
    /// What a 401 answered to the credential means, and what to do
    /// ([`placement::credential_refused`]).
    pub fn refused(&self) -> String {
        format!(
            "{}: restore it at the service, or name another key of the sub account in spec.credentialKeyName of {}",
            placement::credential_refused(None, &self.credential_key, &self.shown, "this machine"),
            self.shown
        )
    }
}

/// A planned SubAccount, as the resources placed inside it see it.
#[derive(Clone, Debug)]
pub(crate) struct PlannedSubAccount {
    /// The SubAccount.
    resource: SubAccount,
    /// Its namespace and name.
    at: (String, String),
    /// Where the resources inside it find it.
    pub inside: Inside,
    /// Its credential key's id, when it exists.
    credential_id: Option<i64>,
    /// Why its credential cannot be had (an existing sub account without a usable key).
    credential_problem: Option<String>,
}

impl PlannedSubAccount {
    /// The SubAccount `loaded` (at manifest index `index`) with its planned `step`, matched to
    /// the sub account its plan found (or none), its credential looked up in `inventory`'s key
    /// list; `None` for another kind or a resource without a plan (an error, paused).
    pub fn of(index: usize, loaded: &Loaded, step: &Step, inventory: &Inventory) -> Option<Self> {
        let (Resource::SubAccount(r), Step::SubAccount(p)) = (&loaded.resource, step) else {
            return None;
        };
        let id = p.planned.found.map(|f| f.id);
        let credential_key = placement::credential_key_name(r);
        let found = id.map(|id| placement::credential(&credential_key, id, &inventory.api_keys));
        let key = found.as_ref().and_then(|f| f.as_ref().ok());
        let at: (String, String) = (
            loaded.resource.namespace().into(),
            loaded.resource.name().into(),
        );
        Some(Self {
            resource: r.clone(),
            inside: Inside {
                sub: index,
                id,
                credential: key.map(|k| k.key.clone()),
                credential_key,
                shown: format!("SubAccount \"{}/{}\"", at.0, at.1),
            },
            at,
            credential_id: key.map(|k| k.id),
            credential_problem: found.as_ref().and_then(|f| f.as_ref().err().cloned()),
        })
    }

    /// The note for a SubAccount whose existing sub account has no usable credential, as the
    /// operator reports it on the SubAccount ([`placement::REASON_CREDENTIAL_MISSING`]) before
    /// anything is placed inside; `None` when it has one, or its sub account is still to be
    /// created.
    pub fn credential_note(&self) -> Option<String> {
        let problem = self.credential_problem.as_ref()?;
        let at_create = match self.resource.spec.api_key {
            Some(_) => " (spec.apiKey is used at create only: changing it later changes no key)",
            None => "",
        };
        Some(format!(
            "{} (in a cluster, Ready=False): {problem}; nothing can be placed inside it until then{at_create}",
            placement::REASON_CREDENTIAL_MISSING
        ))
    }

    /// True when the API key `id` is the operator's credential inside this sub account.
    pub fn is_credential(&self, id: i64) -> bool {
        self.credential_id == Some(id)
    }

    /// The note for a SubAccount that other namespaces place objects inside
    /// (`spec.allowedNamespaces`) and that matched its sub account by name only: whoever holds
    /// a key of a sub account may rename it at the service, so a sub account renamed to this
    /// name would be taken for it, and the other namespaces' objects placed inside one that is
    /// not the platform's. Pinning the id (the external-id annotation) makes a rename drift
    /// that `apply` corrects instead. `None` otherwise.
    pub fn pin_note(&self, step: &Step) -> Option<String> {
        let Step::SubAccount(p) = step else {
            return None;
        };
        let found = p.planned.found?;
        let hosts_others = self.resource.spec.allowed_namespaces.is_some();
        (hosts_others && found.matched_by == MatchedBy::NaturalKey).then(|| {
            format!(
                "matched by name only, and other namespaces place objects inside it: whoever holds a key of a sub account may rename it at the service, and a sub account renamed to this name would be taken for this one; check that sub account {id} is the one you created (a name taken before the first apply may be another tenant's), then pin it with the annotation {ANNOTATION_EXTERNAL_ID}: \"{id}\"",
                id = found.id
            )
        })
    }

    /// `SubAccount "namespace/name"`, as messages name it.
    pub fn shown(&self) -> String {
        self.inside.shown.clone()
    }
}

/// The SubAccount among `subs` in whose sub account `r` (of namespace `own`, natural key
/// `name`) is placed by its `spec.subAccountRef`, with a note when only a cluster can tell
/// whether `own` may place objects there (see [`reference_allowed`]); `None` when `r` names no
/// SubAccount.
///
/// Errors, for people: the SubAccount is not among `subs` (not among the manifests, or its own
/// plan failed); it does not let `own` place objects inside (`ReferenceNotAllowed`); it only
/// observes its sub account, which another SubAccount among `subs` manages (`ConflictingOwner`,
/// as a cluster refuses it: reaching a sub account by observing it is no way around the
/// manager's `allowedNamespaces`); with
/// `calls` (the resource's calls are to be made inside), its credential cannot be had; `r` is,
/// or names, the operator's credential there (`CredentialReserved`, see
/// [`placement::refuse_credential`]).
pub(crate) fn placed_in<'a, K: ManagedKind>(
    r: &K::Resource,
    (own, name): (&str, &str),
    subs: &'a [PlannedSubAccount],
    calls: bool,
) -> Result<Option<(&'a PlannedSubAccount, Option<String>)>, String> {
    let Some(reference) = r.sub_account_ref() else {
        return Ok(None);
    };
    let namespace = reference.namespace_or(own);
    let Some(sub) = subs
        .iter()
        .find(|s| s.at.0 == namespace && s.at.1 == reference.name)
    else {
        return Err(format!(
            "SubAccount \"{namespace}/{}\" is not among the manifests or cannot be planned, so the {} inside it cannot be found",
            reference.name,
            K::NOUN
        ));
    };
    let selector = sub.resource.spec.allowed_namespaces.as_ref();
    let note = reference_allowed((namespace, &reference.name), selector, own)
        .map_err(|problem| format!("{}: {problem}", sub.shown()))?;
    let managed_elsewhere = !sub.resource.writes()
        && sub.inside.id.is_some()
        && (subs.iter())
            .any(|o| o.at != sub.at && o.resource.writes() && o.inside.id == sub.inside.id);
    if managed_elsewhere {
        return Err(format!(
            "ConflictingOwner: {}: it only observes its sub account, which another SubAccount among the manifests manages; reference that SubAccount (its spec.allowedNamespaces must allow namespace \"{own}\")",
            sub.shown()
        ));
    }
    if let Some(problem) = sub.credential_problem.as_ref().filter(|_| calls) {
        return Err(format!("{}: {problem}", sub.shown()));
    }
    let credential = (sub.credential_id, sub.inside.credential_key.clone());
    let reserved = placement::reserved_for(&sub.resource, namespace, own, credential);
    if let Some(why) = placement::refuse_credential::<K>(reserved.as_ref(), name, r.external_id()) {
        return Err(format!("{}: {why}", placement::REASON_CREDENTIAL_RESERVED));
    }
    Ok(Some((sub, note)))
}
