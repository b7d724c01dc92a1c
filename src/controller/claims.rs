//! Two resources must never manage one API object. When two resources of a kind claim the same
//! API object (the same natural key, the same `mailtarget.co/external-id`, or a lookup that
//! lands on an object whose id another resource records in `status.id`), one of them owns it and
//! the other is reported `Stalled` with reason `ConflictingOwner` and makes no API call of its
//! own (it may share the account's list reads).
//!
//! The owner is decided the same way by every reconcile, from the objects in the controller's
//! cache, so it never flips back and forth:
//! 1. a resource that already records the object's id in `status.id` precedes one that does not
//!    (an established owner is never displaced by a newcomer);
//! 2. then the older `metadata.creationTimestamp`;
//! 3. then namespace and name, in alphabetical order.
//!
//! A loser stays `Stalled` while the owner holds its claim, and is checked again at each resync
//! (from the controller's cache and the shared lists, no per-object API call): once the owner is deleted or
//! changes its claim, the loser takes over at its next resync. Deleting a loser never touches
//! the owner's API object. `ObserveOnly` resources never write, so they take part in
//! none of this: any number of them may observe an object, managed or not. Resources outside the operator's watch (another namespace
//! when `--namespace` is set, another shard's label selector) are not compared.

use std::sync::{Arc, OnceLock};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{Resource, ResourceExt};

use super::accounts::AccountRegistry;
use crate::crd::{ANNOTATION_EXTERNAL_ID, ApiKey, SendingDomain, SubAccount};
use crate::engine::natural_key;
use crate::engine::{ManagedKind, ManagedResource};
use kube::runtime::reflector::Store;

/// The controllers' caches of the three kinds, set by [`super::Operator::run`].
#[derive(Default)]
pub struct Claims {
    /// SubAccounts.
    pub sub_accounts: OnceLock<Store<SubAccount>>,
    /// ApiKeys.
    pub api_keys: OnceLock<Store<ApiKey>>,
    /// SendingDomains.
    pub sending_domains: OnceLock<Store<SendingDomain>>,
}

impl std::fmt::Debug for Claims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claims").finish_non_exhaustive()
    }
}

/// A kind whose resources claim API objects.
pub trait Claimant:
    ManagedKind<Resource = Self>
    + ManagedResource
    + Resource<DynamicType = ()>
    + Clone
    + Send
    + Sync
    + 'static
{
    /// The spec field that names the natural key, for messages.
    const KEY_FIELD: &'static str;
    /// The controller's cache of this kind, once the operator runs.
    fn store(claims: &Claims) -> Option<&Store<Self>>;
    /// True when `self` and `other` name the same API object by its natural key, compared as
    /// the service compares it ([`natural_key`]): sub account name or sending domain (ASCII
    /// case ignored), or key name within the same sub account
    /// reference (or both without one). Compared against every cached resource of the kind at
    /// each reconcile, so it borrows and never allocates.
    fn same_natural_key(&self, other: &Self) -> bool;
}

/// True when `a` and `b` claim the same API object: the same `mailtarget.co/external-id`
/// annotation, or, when neither carries one, the same natural key.
fn same_claim<K: Claimant>(a: &K, b: &K) -> bool {
    match (a.external_id(), b.external_id()) {
        (Some(x), Some(y)) => x == y,
        (None, None) => a.same_natural_key(b),
        _ => false,
    }
}

impl Claimant for SubAccount {
    const KEY_FIELD: &'static str = "spec.name";
    fn store(claims: &Claims) -> Option<&Store<Self>> {
        claims.sub_accounts.get()
    }
    fn same_natural_key(&self, other: &Self) -> bool {
        natural_key::same_ignoring_case(self.service_name(), other.service_name())
    }
}

impl Claimant for ApiKey {
    const KEY_FIELD: &'static str = "spec.name";
    fn store(claims: &Claims) -> Option<&Store<Self>> {
        claims.api_keys.get()
    }
    fn same_natural_key(&self, other: &Self) -> bool {
        natural_key::same_key_name(self.service_name(), other.service_name())
            && match (&self.spec.sub_account_ref, &other.spec.sub_account_ref) {
                (None, None) => true,
                (Some(a), Some(b)) => {
                    let (mine, theirs) = (self.namespace(), other.namespace());
                    let (mine, theirs) = (mine.unwrap_or_default(), theirs.unwrap_or_default());
                    a.name == b.name && a.namespace_or(&mine) == b.namespace_or(&theirs)
                }
                _ => false,
            }
    }
}

impl Claimant for SendingDomain {
    const KEY_FIELD: &'static str = "spec.domain";
    fn store(claims: &Claims) -> Option<&Store<Self>> {
        claims.sending_domains.get()
    }
    fn same_natural_key(&self, other: &Self) -> bool {
        natural_key::same_ignoring_case(&self.spec.domain, &other.spec.domain)
    }
}

/// The account a resource is managed through: ids and names are compared within one account
/// only (two accounts' objects are different objects, whatever their ids).
pub(super) fn account_of<K: Claimant>(obj: &K) -> super::accounts::AccountName {
    super::accounts::usage::account_name(
        obj.meta().namespace.as_deref().unwrap_or_default(),
        obj.account_ref(),
    )
}

/// The SubAccount (namespace, name) whose sub account `obj` is placed in, `None` for the account
/// itself.
fn placement_of<K: Claimant>(obj: &K) -> Option<(String, String)> {
    let own = obj.meta().namespace.as_deref().unwrap_or_default();
    obj.sub_account_ref()
        .map(|r| (r.namespace_or(own).to_string(), r.name.clone()))
}

/// True when two resources are placed inside two different SubAccounts' sub accounts: each
/// looks only inside its own, so their claims (an external id, a name) never reach one object.
/// A resource of the account itself reaches every sub account's objects, so it is compared
/// with all.
fn placed_apart(a: &Option<(String, String)>, b: &Option<(String, String)>) -> bool {
    matches!((a, b), (Some(a), Some(b)) if a != b)
}

/// The precedence of a resource (smaller goes first); `contested` is the id in dispute, if any.
fn rank<K: Claimant>(obj: &K, contested: Option<i64>) -> (bool, Option<Time>, String, String) {
    let holds = match contested {
        Some(id) => obj.recorded_id() == Some(id),
        None => obj.recorded_id().is_some(),
    };
    (
        !holds,
        obj.meta().creation_timestamp.clone(),
        obj.namespace().unwrap_or_default(),
        obj.name_any(),
    )
}

/// Among `others` that are `eligible`, the resource that owns what `obj` claims, when it is not
/// `obj`.
///
/// Rivals are the resources managed through the same account, not placed inside two different
/// sub accounts, with the same claim (external-id annotation, else natural key)
/// unless both record different ids (each already manages its own object), and, when `id` is
/// given, those recording `id` in `status.id`. The rival that ranks first (see the module
/// documentation) owns, if it ranks before `obj`. `ObserveOnly` resources are neither owners
/// nor rivals. Eligibility is asked last, of the rivals that claim what `obj` claims only.
fn owner_among<K: Claimant>(
    obj: &K,
    id: Option<i64>,
    others: impl IntoIterator<Item = Arc<K>>,
    eligible: impl Fn(&K) -> bool,
) -> Option<Arc<K>> {
    if !obj.writes() {
        return None;
    }
    let uid = &obj.meta().uid;
    let mine = obj.recorded_id();
    let my_account = account_of(obj);
    let my_placement = placement_of(obj);
    let by_claim = id.is_none();
    let my_rank = rank(obj, id);
    others
        .into_iter()
        .filter(|o| &o.meta().uid != uid && o.writes())
        .filter(|o| {
            if by_claim {
                let both_differ = matches!((mine, o.recorded_id()), (Some(a), Some(b)) if a != b);
                !both_differ && same_claim(obj, o.as_ref())
            } else {
                o.recorded_id() == id
            }
        })
        .filter(|o| account_of(o.as_ref()) == my_account)
        .filter(|o| !by_claim || !placed_apart(&my_placement, &placement_of(o.as_ref())))
        .filter(|o| rank(o.as_ref(), id) < my_rank)
        .filter(|o| eligible(o.as_ref()))
        .min_by(|a, b| rank(a.as_ref(), id).cmp(&rank(b.as_ref(), id)))
}

impl Claims {
    /// The other resource of `obj`'s kind that owns what `obj` claims: by its spec when `id`
    /// is `None`, or the API object `id` that `obj`'s lookup found. `None` when `obj` may
    /// manage it, or before the operator runs.
    /// Resources their account refuses outright ([`AccountRegistry::may_claim`]) are no rivals.
    pub fn owner<K: Claimant>(
        &self,
        accounts: &AccountRegistry,
        obj: &K,
        id: Option<i64>,
    ) -> Option<Arc<K>> {
        // Called in reconciles of `K` only, which kube starts once this store holds its first
        // list.
        let store = K::store(self)?;
        let subs = self.sub_accounts.get();
        owner_among(obj, id, store.state(), |o| accounts.may_claim(o, subs))
    }
}

/// Reason of the `Stalled` condition of a resource whose claim another resource holds.
pub const CONFLICTING_OWNER: &str = "ConflictingOwner";

/// The `ConflictingOwner` message for `obj`, whose claim `owner` holds. An owner of another
/// namespace is not named, nor the id of its object: the message is read by `obj`'s namespace,
/// which learns only that the object is taken (product design, "Accounts and tenancy": a
/// tenant learns nothing of another tenant's objects).
pub fn conflict_message<K: Claimant>(obj: &K, owner: &K) -> String {
    let theirs = owner.namespace() != obj.namespace();
    let owner_name = match theirs {
        true => "of another namespace".to_owned(),
        false => format!(
            "{}/{}",
            owner.namespace().unwrap_or_default(),
            owner.name_any()
        ),
    };
    let what = match owner.recorded_id() {
        Some(id) if !theirs => format!("{} {id}", K::NOUN),
        _ => format!("the same {}", K::NOUN),
    };
    let me = format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any());
    format!(
        "{kind} {owner_name} already manages {what}, which this {kind} ({me}) also claims; two resources must not manage one {noun}: delete this {kind}, or change its {field} or its {ANNOTATION_EXTERNAL_ID} annotation",
        kind = K::kind(&()),
        noun = K::NOUN,
        field = K::KEY_FIELD,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preceding_owner<K: Claimant>(
        obj: &K,
        id: Option<i64>,
        others: impl IntoIterator<Item = Arc<K>>,
    ) -> Option<Arc<K>> {
        owner_among(obj, id, others, |_| true)
    }

    fn key(name: &str, spec_name: &str, created: i64, id: Option<i64>) -> Arc<ApiKey> {
        let mut k = ApiKey::new(
            name,
            crate::crd::ApiKeySpec {
                name: Some(spec_name.into()),
                secret_name: format!("{name}-key"),
                ..Default::default()
            },
        );
        k.metadata.namespace = Some("default".into());
        k.metadata.uid = Some(format!("uid-{name}"));
        k.metadata.creation_timestamp = Some(Time(
            k8s_openapi::jiff::Timestamp::from_second(created).unwrap(),
        ));
        k.status = id.map(|id| crate::crd::ApiKeyStatus {
            id: Some(id),
            ..Default::default()
        });
        Arc::new(k)
    }

    /// The same natural key: the older resource owns; a recorded id beats age; resources that
    /// each manage their own object do not conflict.
    #[test]
    fn owner_by_claim() {
        let a = key("a", "ci", 100, None);
        let b = key("b", "ci", 200, None);
        let other = key("c", "other", 50, None);
        let all = vec![a.clone(), b.clone(), other];
        assert!(preceding_owner(a.as_ref(), None, all.clone()).is_none());
        assert_eq!(
            preceding_owner(b.as_ref(), None, all.clone()).map(|o| o.name_any()),
            Some("a".into())
        );
        // b already manages id 7: b owns, a (older, no id) is the loser.
        let b7 = key("b", "ci", 200, Some(7));
        let all = vec![a.clone(), b7.clone()];
        assert!(preceding_owner(b7.as_ref(), None, all.clone()).is_none());
        assert_eq!(
            preceding_owner(a.as_ref(), None, all).map(|o| o.name_any()),
            Some("b".into())
        );
        // Each manages its own key: no conflict.
        let a3 = key("a", "ci", 100, Some(3));
        assert!(preceding_owner(b7.as_ref(), None, vec![a3.clone(), b7.clone()]).is_none());
        assert!(preceding_owner(a3.as_ref(), None, vec![a3.clone(), b7.clone()]).is_none());
        // Same age: by name.
        let x = key("x", "ci", 100, None);
        assert_eq!(
            preceding_owner(x.as_ref(), None, vec![a.clone(), x.clone()]).map(|o| o.name_any()),
            Some("a".into())
        );
    }

    /// ObserveOnly resources neither own nor lose.
    #[test]
    fn observe_only_takes_no_part() {
        let a = key("a", "ci", 100, None);
        let mut b = (*key("b", "ci", 200, None)).clone();
        b.spec.management_policy = crate::crd::ManagementPolicy::ObserveOnly;
        let b = Arc::new(b);
        assert!(preceding_owner(b.as_ref(), None, vec![a.clone(), b.clone()]).is_none());
        let c = key("c", "ci", 300, None);
        assert_eq!(
            preceding_owner(c.as_ref(), None, vec![a.clone(), b.clone(), c.clone()])
                .map(|o| o.name_any()),
            Some("a".into())
        );
        let c_early = key("c", "ci", 50, None);
        assert!(
            preceding_owner(c_early.as_ref(), None, vec![b.clone(), c_early.clone()]).is_none()
        );
    }

    /// A lookup landing on an id another resource records: that resource owns it.
    #[test]
    fn owner_by_found_id() {
        let a = key("a", "ci", 300, Some(9));
        let b = key("b", "renamed", 100, None);
        let all = vec![a.clone(), b.clone()];
        assert_eq!(
            preceding_owner(b.as_ref(), Some(9), all.clone()).map(|o| o.name_any()),
            Some("a".into())
        );
        assert!(preceding_owner(a.as_ref(), Some(9), all.clone()).is_none());
        assert!(preceding_owner(b.as_ref(), Some(10), all).is_none());
    }

    /// One external id claimed from inside two different sub accounts is no conflict (each
    /// looks only inside its own); from the account itself and from inside a sub account it
    /// is, and so is a found id another resource records, wherever it is placed.
    #[test]
    fn placement_and_claims() {
        let placed = |name: &str, created: i64, sub: Option<&str>, recorded: Option<i64>| {
            let mut k = (*key(name, name, created, recorded)).clone();
            k.metadata.annotations =
                Some([(ANNOTATION_EXTERNAL_ID.to_string(), "5".to_string())].into());
            k.spec.sub_account_ref = sub.map(|s| crate::crd::SubAccountReference {
                name: s.into(),
                namespace: None,
            });
            Arc::new(k)
        };
        let a = placed("a", 100, Some("s1"), None);
        let b = placed("b", 200, Some("s2"), None);
        let top = placed("c", 200, None, None);
        assert!(preceding_owner(b.as_ref(), None, vec![a.clone(), b.clone()]).is_none());
        let owner = preceding_owner(top.as_ref(), None, vec![a.clone(), top.clone()]);
        assert_eq!(owner.map(|o| o.name_any()), Some("a".into()));
        let holder = placed("h", 300, Some("s1"), Some(9));
        let owner = preceding_owner(b.as_ref(), Some(9), vec![holder, b.clone()]);
        assert_eq!(owner.map(|o| o.name_any()), Some("h".into()));
    }

    /// What counts as the same claim, kind by kind: the external-id annotation wins over the
    /// natural key; a key's natural key includes its sub account reference and namespace; a
    /// domain ignores ASCII case.
    #[test]
    fn same_claim_by_kind() {
        let annotated = |k: &Arc<ApiKey>, id: &str| {
            let mut k = (**k).clone();
            k.metadata.annotations =
                Some([(ANNOTATION_EXTERNAL_ID.to_string(), id.to_string())].into());
            k
        };
        let in_sub = |k: &Arc<ApiKey>, ns: &str, sub: &str| {
            let mut k = (**k).clone();
            k.metadata.namespace = Some(ns.into());
            k.spec.sub_account_ref = Some(crate::crd::SubAccountReference {
                name: sub.into(),
                namespace: None,
            });
            k
        };
        let a = key("a", "ci", 100, None);
        let b = key("b", "ci", 200, None);
        let other = key("c", "other", 300, None);
        assert!(same_claim(a.as_ref(), b.as_ref()));
        assert!(!same_claim(a.as_ref(), other.as_ref()));
        // The annotation decides, whatever the names.
        assert!(same_claim(&annotated(&a, "5"), &annotated(&other, " 5")));
        assert!(!same_claim(&annotated(&a, "5"), &annotated(&b, "6")));
        assert!(!same_claim(&annotated(&a, "5"), b.as_ref()));
        // Keys of different sub accounts, or of the account and a sub account, differ.
        assert!(same_claim(&in_sub(&a, "t", "s1"), &in_sub(&b, "t", "s1")));
        assert!(!same_claim(&in_sub(&a, "t", "s1"), &in_sub(&b, "t", "s2")));
        assert!(!same_claim(&in_sub(&a, "t", "s1"), &in_sub(&b, "u", "s1")));
        assert!(!same_claim(&in_sub(&a, "t", "s1"), b.as_ref()));
        // Without spec.name the resource name is the key name.
        let mut unnamed = (*b).clone();
        unnamed.spec.name = None;
        unnamed.metadata.name = Some("ci".into());
        assert!(same_claim(a.as_ref(), &unnamed));

        let domain = |d: &str| {
            SendingDomain::new(
                "d",
                crate::crd::SendingDomainSpec {
                    domain: d.into(),
                    ..Default::default()
                },
            )
        };
        assert!(same_claim(
            &domain("Mail.Example.com"),
            &domain("mail.example.com")
        ));
        assert!(!same_claim(
            &domain("mail.example.com"),
            &domain("example.com")
        ));

        let sub = |name: Option<&str>, resource: &str| {
            SubAccount::new(
                resource,
                crate::crd::SubAccountSpec {
                    name: name.map(Into::into),
                    ..Default::default()
                },
            )
        };
        assert!(same_claim(&sub(Some("team"), "x"), &sub(None, "team")));
        // The service keeps sub account names unique regardless of ASCII case.
        assert!(same_claim(&sub(Some("team"), "x"), &sub(Some("Team"), "y")));
        assert!(!same_claim(
            &sub(Some("team"), "x"),
            &sub(Some("team-b"), "y")
        ));
    }

    /// The message names the owner and what to change.
    #[test]
    fn message_says_what_to_fix() {
        let a = key("a", "ci", 100, Some(7));
        let b = key("b", "ci", 200, None);
        let m = conflict_message(b.as_ref(), a.as_ref());
        assert!(
            m.contains("ApiKey default/a already manages API key 7"),
            "{m}"
        );
        assert!(m.contains("spec.name"), "{m}");
        assert!(m.contains("default/b"), "{m}");
    }

    /// An owner of another namespace is neither named nor given away by its object's id.
    #[test]
    fn another_namespace_owner_is_not_named() {
        let a = key("a", "ci", 100, Some(7));
        let mut b = key("b", "ci", 200, None).as_ref().clone();
        b.metadata.namespace = Some("team-b".into());
        let m = conflict_message(&b, a.as_ref());
        assert!(
            m.contains("ApiKey of another namespace already manages the same API key"),
            "{m}"
        );
        assert!(!m.contains("default/a") && !m.contains('7'), "{m}");
    }
}
