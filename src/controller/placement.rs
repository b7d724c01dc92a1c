//! Where an ApiKey or SendingDomain is placed and which credential its calls use (product
//! design, "Accounts and tenancy", the table of which credential serves which call): without
//! `spec.subAccountRef`, the account `spec.accountRef` names; with it, inside that SubAccount's
//! sub account, every call made with the sub account's credential
//! ([`crate::engine::placement::credential`]), so that nothing outside the sub account
//! can be reached whatever ids or names the resource carries. Everything here is decided
//! without a call to the service, except the company key list the credential is read from
//! (cached per account).

use std::sync::Arc;

use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;

use super::accounts::Usage;
use super::accounts::usage::account_name;
use super::cache::AccountCache;
use super::context::Context;
use super::managed::{Failure, Managed};
use crate::api::Client;
use crate::crd::{ApiKey, SubAccount, SubAccountReference};
use crate::engine::{ManagedResource, placement};

/// Where a resource's object lives.
pub enum Placement {
    /// The account itself: calls with the account's key.
    Account,
    /// The sub account `id` of a SubAccount, called with its credential `client`. `managed`
    /// when that SubAccount manages it (not only observes it): objects found there by natural
    /// key are then the referring resource's own.
    SubAccount {
        /// The sub account's id.
        id: i64,
        /// The SubAccount manages the sub account.
        managed: bool,
        /// The account's client calling as the sub account's credential.
        client: Client,
        /// The credential key (id and name) when the resource may not manage it: always, except
        /// for a resource of the SubAccount's own namespace when the SubAccount names its
        /// credential (`spec.credentialKeyName`, or release 0.1's `spec.apiKey`): whoever may
        /// change that SubAccount chose the key already. Otherwise a tenant could take the
        /// operator's full-permission key by naming it, or cut every other namespace off by
        /// changing or deleting it.
        reserved: Option<(Option<i64>, String)>,
        /// The credential key's id and name.
        credential: (i64, String),
        /// The SubAccount as messages name it: `SubAccount "namespace/name"`.
        shown: String,
    },
    /// Not known yet (the SubAccount does not exist or has no id): reason and message of the
    /// wait.
    Waiting(&'static str, String),
}

/// The SubAccount `reference` names, for a resource of namespace `own`: from the SubAccount
/// controller's cache, else read from the Kubernetes API (not created yet, another shard, the
/// cache still filling).
///
/// Errors: the read's.
pub async fn referenced(
    ctx: &Context,
    reference: &SubAccountReference,
    own: &str,
) -> Result<Option<Arc<SubAccount>>, kube::Error> {
    let namespace = reference.namespace_or(own);
    let cached = ctx
        .claims
        .sub_accounts
        .get()
        .and_then(|store| store.get(&ObjectRef::new(&reference.name).within(namespace)));
    if cached.is_some() {
        return Ok(cached);
    }
    Ok(Api::<SubAccount>::namespaced(ctx.kube.clone(), namespace)
        .get_opt(&reference.name)
        .await?
        .map(Arc::new))
}

/// Where `obj` is placed, given the account it is reconciled through (`usage`).
///
/// Errors (as a [`Failure`] keeping `old`): `Stalled` with `ReferenceNotAllowed` (the
/// SubAccount is in another namespace that its `spec.allowedNamespaces` does not select),
/// `InvalidSpec` (the SubAccount is managed through another account), `CredentialMissing` (the
/// sub account has no usable key of its credential's name, see
/// [`placement::credential`]); the Kubernetes read's or the key list's failure.
/// `CredentialReserved` is decided by the caller, once it knows what the resource names
/// ([`refuse_credential`]).
pub async fn place<K: Managed>(
    obj: &K,
    ctx: &Context,
    old: &K::Status,
    usage: &Usage,
) -> Result<Placement, Box<Failure<K::Status>>> {
    let Some(reference) = obj.sub_account_ref() else {
        return Ok(Placement::Account);
    };
    let own = obj.namespace().unwrap_or_default();
    let namespace = reference.namespace_or(&own);
    let shown = format!("SubAccount \"{namespace}/{}\"", reference.name);
    let read = referenced(ctx, reference, &own)
        .await
        .map_err(|e| Failure::kube("ReferenceNotReady", e, old))?;
    // Another namespace's SubAccounts are not told apart, missing or not allowing this
    // namespace: a tenant cannot probe another's names (it is reconciled again when such a
    // SubAccount is created or changed).
    let not_allowed = || {
        Failure::blocked(
            "ReferenceNotAllowed",
            format!(
                "{shown} does not exist, or does not allow objects of namespace \"{own}\" in its sub account (its spec.allowedNamespaces); nothing is called. Ask its owners to allow the namespace, or reference a SubAccount of this namespace"
            ),
            old,
        )
    };
    let Some(sub) = read else {
        if namespace != own {
            return Err(not_allowed());
        }
        return Ok(Placement::Waiting(
            "ReferenceNotReady",
            format!("{shown} does not exist yet; waiting for it"),
        ));
    };
    if namespace != own {
        let allowed = match &sub.spec.allowed_namespaces {
            None => Some(false),
            Some(selector) => ctx.accounts.namespace_selected(selector, &own),
        };
        match allowed {
            Some(true) => {}
            Some(false) => return Err(not_allowed()),
            None => {
                return Ok(Placement::Waiting(
                    "ReferenceNotReady",
                    format!(
                        "namespace \"{own}\" is not in the operator's cache yet, so {shown}'s spec.allowedNamespaces cannot be evaluated; nothing is called"
                    ),
                ));
            }
        }
    }
    // The sub account belongs to the account its SubAccount is managed through.
    let theirs = account_name(namespace, sub.spec.account_ref.as_ref());
    if theirs != usage.name {
        return Err(Failure::stalled(
            "InvalidSpec",
            format!(
                "spec.accountRef names {} but {shown} is managed through {theirs}: name the same account",
                usage.name
            ),
            old,
        ));
    }
    let Some(id) = sub.status.as_ref().and_then(|s| s.id) else {
        return Ok(Placement::Waiting(
            "ReferenceNotReady",
            format!("{shown} has no sub account id yet; waiting for it"),
        ));
    };
    if sub.recorded_id() != Some(id)
        && let Some((reason, message)) = refuse_observed(ctx, &sub, id, usage, &shown)
    {
        return Err(Failure::blocked(reason, message, old));
    }
    let key = find_credential(&usage.service, &sub, id)
        .await
        .map_err(|e| Failure::api(e, "listing API keys", old))?
        .map_err(|message| {
            Failure::blocked(
                super::managed::REASON_CREDENTIAL_MISSING,
                format!("{shown}: {message}"),
                old,
            )
        })?;
    let credential = (key.id, key.name);
    let reserved = placement::reserved_for(
        &sub,
        namespace,
        &own,
        (Some(credential.0), credential.1.clone()),
    );
    let client = (usage.service.client().calling_as(key.key))
        .map_err(|e| Failure::api(e, "calling as the sub account", old))?;
    // Objects inside it are this namespace's own only while the SubAccount owns it (not
    // observed, not paused with an observed id under Full).
    let managed =
        sub.writes() && !crate::crd::is_paused(sub.annotations()) && sub.recorded_id() == Some(id);
    Ok(Placement::SubAccount {
        id,
        managed,
        client,
        reserved,
        credential,
        shown,
    })
}

/// Why nothing may be placed inside sub account `id`, which `sub` observes but does not own
/// (`ObserveOnly`, or observed before a switch to `Full`): the namespace did not create it, so
/// using it is an adoption (product design, "Accounts and tenancy"), or a tenant could reach
/// into any sub account by observing it first. `ConflictingOwner` when another SubAccount of
/// the same account manages it (objects are placed through that one, whose
/// `spec.allowedNamespaces` says who may; a SubAccount its account refuses outright holds no
/// claim, as for [`super::claims`]); `AdoptionNotAllowed` when `sub`'s namespace may not adopt
/// through the account. `None`: it may be used. Makes no call.
fn refuse_observed(
    ctx: &Context,
    sub: &SubAccount,
    id: i64,
    usage: &Usage,
    shown: &str,
) -> Option<(&'static str, String)> {
    let namespace = sub.namespace().unwrap_or_default();
    let managed_elsewhere = ctx.claims.sub_accounts.get().is_some_and(|store| {
        store.state().iter().any(|other| {
            other.uid() != sub.uid()
                && other.writes()
                && other.recorded_id() == Some(id)
                && ctx
                    .accounts
                    .may_claim(other.as_ref(), ctx.claims.sub_accounts.get())
                && super::claims::account_of(other.as_ref()) == usage.name
        })
    });
    if managed_elsewhere {
        // Which SubAccount manages it is not said: it may be another namespace's.
        return Some((
            super::claims::CONFLICTING_OWNER,
            format!(
                "{shown} only observes its sub account, which another SubAccount manages: nothing is placed inside it through {shown}. Reference the SubAccount that manages it (its spec.allowedNamespaces must allow this namespace)"
            ),
        ));
    }
    if !ctx.accounts.may_adopt_through(&usage.name, &namespace) {
        return Some((
            super::accounts::usage::ADOPTION_NOT_ALLOWED,
            format!(
                "{shown} only observes its sub account, and {} does not let namespace \"{namespace}\" adopt existing objects (its spec.adoptionNamespaceSelector): nothing is placed inside it. Manage the sub account through a SubAccount that created or adopted it, or ask the platform team",
                usage.name
            ),
        ));
    }
    None
}

/// The account's client calling as the credential of `sub`'s sub account `id`, `None` when there
/// is none to be had (the list failed, no usable key, or the service refused it: see
/// [`super::cache::AccountCache::credential_refused`]).
async fn credential_client(usage: &Usage, sub: &SubAccount, id: i64) -> Option<Client> {
    let key = find_credential(&usage.service, sub, id).await.ok()?.ok()?;
    if usage.service.credential_refused(key.id) {
        return None;
    }
    usage.service.client().calling_as(key.key).ok()
}

/// The credential key of `sub`'s sub account `id` ([`placement::credential`]) in the account's
/// cached list of keys, which carries their values. A key missing from the cached list is looked
/// for once more in a list fetched after the SubAccount was applied (shared with other readers,
/// see [`super::cache::CachedList::doubt`]): a key created at the service before that (a sub
/// account adopted with its first key) is found at once; one created later, at the next list.
///
/// Errors: the list call's; inside, for people, why no key serves.
pub async fn find_credential(
    service: &AccountCache,
    sub: &SubAccount,
    id: i64,
) -> Result<Result<crate::api::ApiKeyListItem, String>, crate::api::ApiError> {
    let since = super::find::newer_than(sub, None);
    let name = placement::credential_key_name(sub);
    let find =
        |items: &[crate::api::ApiKeyListItem]| placement::credential(&name, id, items).cloned();
    let keys = service.confirmed::<ApiKey>(since, |items| find(items).is_err());
    Ok(keys.await?.read(find))
}

/// The client and sub account for the cleanup of `obj`: its sub account's credential when it can
/// be had, else the account's own key, which reaches the objects of all its sub accounts
/// (product design: the cleanup of objects inside a sub account falls back to the company
/// credential, so that deleting a namespace with its SubAccount leaves no finalizer stuck).
/// The sub account's id is `None` when `obj` is not placed in one, or its SubAccount is gone or
/// has no id. The cleanup acts on the object the resource owns, never one found elsewhere.
pub async fn for_cleanup<K: Managed>(
    obj: &K,
    ctx: &Context,
    usage: &Usage,
) -> (Client, Option<i64>) {
    let company = usage.service.client().clone();
    let Some(reference) = obj.sub_account_ref() else {
        return (company, None);
    };
    let own = obj.namespace().unwrap_or_default();
    let sub = referenced(ctx, reference, &own).await.ok().flatten();
    let Some((sub, id)) = sub.and_then(|s| s.status.as_ref()?.id.map(|id| (s, id))) else {
        return (company, None);
    };
    // A credential the service refused is no use for a cleanup either.
    match credential_client(usage, &sub, id).await {
        Some(client) => (client, Some(id)),
        None => (company, Some(id)),
    }
}

pub use crate::engine::placement::{REASON_CREDENTIAL_RESERVED, refuse_credential};
