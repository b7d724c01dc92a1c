//! Where an ApiKey or SendingDomain is placed and which credential its calls use (product
//! design, "Accounts and tenancy", the table of which credential serves which call): without
//! `spec.subAccountRef`, the account `spec.accountRef` names; with it, inside that SubAccount's
//! sub account, every call made with the sub account's credential
//! ([`crate::engine::kinds::sub_account::credential`]), so that nothing outside the sub account
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
use super::claims::Claimant;
use super::common::is_paused;
use super::context::Context;
use super::managed::{Failure, Managed};
use crate::api::Client;
use crate::crd::{ApiKey, SubAccount, SubAccountReference};
use crate::engine::kinds::sub_account;

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
/// [`sub_account::credential`]); the Kubernetes read's or the key list's failure.
pub async fn place<K: Managed>(
    obj: &K,
    ctx: &Context,
    old: &K::Status,
    usage: &Usage,
) -> Result<Placement, Box<Failure<K::Status>>> {
    let Some(reference) = K::sub_account_ref(obj) else {
        return Ok(Placement::Account);
    };
    let own = obj.namespace().unwrap_or_default();
    let namespace = reference.namespace_or(&own);
    let shown = format!("SubAccount \"{namespace}/{}\"", reference.name);
    let read = referenced(ctx, reference, &own)
        .await
        .map_err(|e| Failure::kube("ReferenceNotReady", e, old))?;
    let Some(sub) = read else {
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
            Some(false) => {
                return Err(Failure::blocked(
                    "ReferenceNotAllowed",
                    format!(
                        "{shown} does not allow objects of namespace \"{own}\" in its sub account (its spec.allowedNamespaces); nothing is called. Ask its owners to allow the namespace, or reference a SubAccount of this namespace"
                    ),
                    old,
                ));
            }
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
    let client = credential_client(usage, &sub, id)
        .await
        .map_err(|e| match e {
            CredentialError::Api(e) => Failure::api(e, "listing API keys", old),
            CredentialError::Missing(message) => Failure::blocked(
                super::managed::REASON_CREDENTIAL_MISSING,
                format!("{shown}: {message}"),
                old,
            ),
        })?;
    // Objects inside it are this namespace's own only while the SubAccount owns it (not
    // observed, not paused with an observed id under Full).
    let managed = sub.writes() && !is_paused(sub.as_ref()) && sub.recorded_id() == Some(id);
    Ok(Placement::SubAccount {
        id,
        managed,
        client,
    })
}

/// Why a sub account's credential is not available.
pub enum CredentialError {
    /// The company key list could not be read.
    Api(crate::api::ApiError),
    /// No usable key (for people).
    Missing(String),
}

/// The account's client calling as the credential of `sub`'s sub account `id`.
///
/// Errors: the list call's, or why no key serves.
pub async fn credential_client(
    usage: &Usage,
    sub: &SubAccount,
    id: i64,
) -> Result<Client, CredentialError> {
    let key = find_credential(&usage.service, sub, id)
        .await
        .map_err(CredentialError::Api)?
        .map_err(CredentialError::Missing)?;
    usage
        .service
        .client()
        .calling_as(key.key)
        .map_err(CredentialError::Api)
}

/// The credential key of `sub`'s sub account `id` ([`sub_account::credential`]) in the account's
/// cached list of keys, which carries their values. A key missing from the cached list is looked
/// for once more in a list fetched after this call began (shared with other readers, see
/// [`super::cache::CachedList::doubt`]): a key created at the service since the list was cached
/// (a sub account adopted with its first key) is found at once.
///
/// Errors: the list call's; inside, for people, why no key serves.
pub async fn find_credential(
    service: &AccountCache,
    sub: &SubAccount,
    id: i64,
) -> Result<Result<crate::api::ApiKeyListItem, String>, crate::api::ApiError> {
    let began = std::time::Instant::now();
    let name = sub_account::credential_key_name(sub);
    let find =
        |items: &[crate::api::ApiKeyListItem]| sub_account::credential(&name, id, items).cloned();
    let keys = service.fresh::<ApiKey>().await?;
    let keys = if keys.doubt(began, |items| find(items).is_err()) {
        service.fresh::<ApiKey>().await?
    } else {
        keys
    };
    Ok(keys.read(find))
}

/// The client and sub account for the cleanup of `obj`: its sub account's credential when it can
/// be had, else the account's own key, which reaches the objects of all its sub accounts
/// (product design: the cleanup of objects inside a sub account falls back to the company
/// credential, so that deleting a namespace with its SubAccount leaves no finalizer stuck).
/// The cleanup acts on the object the resource owns, never one found elsewhere.
pub async fn for_cleanup<K: Managed>(
    obj: &K,
    ctx: &Context,
    usage: &Usage,
) -> (Client, Option<i64>) {
    let status = K::status(obj);
    match place(obj, ctx, &status, usage).await {
        Ok(Placement::SubAccount { id, client, .. }) => (client, Some(id)),
        _ => {
            let id = match K::sub_account_ref(obj) {
                Some(reference) => {
                    let own = obj.namespace().unwrap_or_default();
                    referenced(ctx, reference, &own)
                        .await
                        .ok()
                        .flatten()
                        .and_then(|s| s.status.as_ref()?.id)
                }
                None => None,
            };
            (usage.service.client().clone(), id)
        }
    }
}
