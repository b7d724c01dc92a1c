//! The identity of a resource's API object, kept in the resource's metadata (as Crossplane's
//! `external-name`): `mailtarget.co/external-id` holds the id once the operator owns the
//! object, and `mailtarget.co/create-pending` marks a create in flight. Status is a projection
//! and never the only record of which object a resource owns.
//!
//! Ownership and adoption (design: "The managed-resource model"):
//! - the object whose id the resource records (`status.id`, written together with
//!   `external-id`) is its own;
//! - an object found by natural key right after a create that may have happened (the pending
//!   marker is set) is its own too: the create's answer was lost, or the process died;
//! - any other existing object, found by natural key or named by an `external-id` the operator
//!   did not write, is an adoption, allowed only by `mailtarget.co/adoption-policy` (or the
//!   operator's `--default-adoption-policy`).

use kube::ResourceExt;
use kube::api::Api;
use serde_json::json;

use super::context::Context;
use super::find::Query;
use super::namespaces::Watchable;
use super::revision::Revision;
use crate::crd::{
    ANNOTATION_ADOPTION_POLICY, ANNOTATION_CREATE_PENDING, ANNOTATION_EXTERNAL_ID, AdoptionPolicy,
};
use crate::engine::{Found, MatchedBy};

/// The adoption policy in force for `obj`: its annotation, else the operator's default. An
/// invalid annotation counts as none (validation reports it as `InvalidSpec` first).
pub fn adoption_policy<K: ResourceExt>(ctx: &Context, obj: &K) -> Option<AdoptionPolicy> {
    AdoptionPolicy::annotated(obj.meta()).or(ctx.settings.default_adoption_policy)
}

/// True when `obj` carries a pending-create marker, whoever wrote it (for list freshness
/// only: trust needs [`pending_is_ours`]).
pub fn is_pending<K: ResourceExt>(obj: &K) -> bool {
    obj.annotations().contains_key(ANNOTATION_CREATE_PENDING)
}

/// True when a create of `obj` may have happened without its id being recorded: the
/// pending-create marker is there and the operator wrote it. The marker is `<RFC 3339 time>
/// <MAC>`, the MAC an HMAC-SHA256 of the resource's UID and that time keyed with the operator's
/// marker key ([`Context::markers`]: not the key of Secret value digests, which sign values a
/// service of a tenant's choosing may pick), so a marker written by a user (to pass an
/// existing object off as one the operator created) is not trusted: finding an object by name
/// then needs the adoption policy. A marker written under another credential (the operator's
/// key rotated between a create and its record) is not trusted either: the object created then
/// shows `AlreadyExists`, and the adoption policy takes it back.
pub fn pending_is_ours<K: ResourceExt>(ctx: &Context, obj: &K) -> bool {
    let Some(value) = obj.annotations().get(ANNOTATION_CREATE_PENDING) else {
        return false;
    };
    let Some((time, mac)) = value.split_once(' ') else {
        return false;
    };
    ctx.markers.verifies(&pending_message(obj, time), mac)
}

/// The MAC of a pending-create marker written at `time` for `obj` (see [`pending_is_ours`]).
fn pending_mac<K: ResourceExt>(ctx: &Context, obj: &K, time: &str) -> String {
    ctx.markers.of(&pending_message(obj, time))
}

/// What the MAC of a pending-create marker covers: the resource's UID and the marker's time.
fn pending_message<K: ResourceExt>(obj: &K, time: &str) -> Vec<u8> {
    let uid = obj.meta().uid.as_deref().unwrap_or_default();
    format!("mailtarget-operator/create-pending/v1\0{uid}\0{time}").into_bytes()
}

/// Why `found` may not be managed by the resource, for people (`None`: it may). `owned` is the
/// id the resource records as its own; `query` carries the adoption policy in force and whether an
/// object found by natural key is this resource's by construction (a key inside a sub account
/// this namespace manages).
pub fn refuse_adoption(
    owned: Option<i64>,
    found: Found,
    query: Query<'_>,
    noun: &str,
) -> Option<String> {
    if owned == Some(found.id) || query.adoption.is_some() {
        return None;
    }
    let by_name = found.matched_by == MatchedBy::NaturalKey;
    if by_name && (query.by_name_is_own || query.pending_is_ours) {
        return None;
    }
    let how = match found.matched_by {
        MatchedBy::NaturalKey => "with the same name".to_string(),
        MatchedBy::ExternalId => format!("named by the {ANNOTATION_EXTERNAL_ID} annotation"),
        MatchedBy::StatusId => "that status.id records from an ObserveOnly reconcile".to_string(),
    };
    // An object found by name is not identified: it may be another tenant's, whose id this
    // resource's namespace has no business learning.
    let which = match found.matched_by {
        MatchedBy::NaturalKey => String::new(),
        _ => format!(" {}", found.id),
    };
    Some(format!(
        "{noun}{which} {how} already exists and this resource did not create it; to manage it, set the annotation {ANNOTATION_ADOPTION_POLICY}: Adopt (or AdoptOrCreate)"
    ))
}

/// Merge-patches the identity annotations of `obj` to `annotations` as the operator's field
/// manager, over the version `revision` holds (see [`super::revision`]).
async fn patch_annotations<K: Watchable>(
    ctx: &Context,
    obj: &K,
    annotations: serde_json::Value,
    revision: &Revision,
) -> Result<(), kube::Error> {
    let api = Api::<K>::namespaced(ctx.kube.clone(), &obj.namespace().unwrap_or_default());
    let body = json!({ "metadata": { "annotations": annotations } });
    revision.merge(&api, &obj.name_any(), body).await
}

/// Marks a create of `obj`'s API object as in flight (before the POST), and forgets the
/// external id of an object that is gone (a create replaces it): until the new id is recorded,
/// the resource is known by the pending marker, then by `status.id`, never by a stale id. The
/// write carries the version of the copy the create was decided from: a stale copy gets 409
/// Conflict here, before any create.
///
/// Errors: the Kubernetes API's (409 Conflict for a stale copy); the create must then not be
/// sent.
pub async fn mark_pending<K: Watchable>(
    ctx: &Context,
    obj: &K,
    revision: &Revision,
) -> Result<(), kube::Error> {
    let now = crate::crd::conditions::now_rfc3339();
    let marker = format!("{now} {}", pending_mac(ctx, obj, &now));
    let annotations = json!({
        ANNOTATION_CREATE_PENDING: marker,
        ANNOTATION_EXTERNAL_ID: null,
    });
    patch_annotations(ctx, obj, annotations, revision).await?;
    fail::fail_point!(crate::failpoints::AFTER_CREATE_PENDING);
    Ok(())
}

/// Clears the pending-create marker of `obj` after a create the service refused for certain
/// (nothing was created): a later object with the same natural key is then not taken for the
/// resource's own.
///
/// Errors: the Kubernetes API's (409 Conflict when the object changed since `revision`).
pub async fn clear_pending<K: Watchable>(
    ctx: &Context,
    obj: &K,
    revision: &Revision,
) -> Result<(), kube::Error> {
    let annotations = json!({ ANNOTATION_CREATE_PENDING: null });
    patch_annotations(ctx, obj, annotations, revision).await
}

/// Records `id` as `obj`'s API object in its metadata (and clears a pending create), unless it
/// is recorded already: no request then. This is also the upgrade path of resources that
/// recorded their id in `status.id` only.
///
/// Errors: the Kubernetes API's (409 Conflict when the object changed since `revision`).
pub async fn record<K: Watchable>(
    ctx: &Context,
    obj: &K,
    id: i64,
    revision: &Revision,
) -> Result<(), kube::Error> {
    let id = id.to_string();
    if obj.annotations().get(ANNOTATION_EXTERNAL_ID) == Some(&id) && !is_pending(obj) {
        return Ok(());
    }
    let annotations = json!({
        ANNOTATION_EXTERNAL_ID: id,
        ANNOTATION_CREATE_PENDING: null,
    });
    patch_annotations(ctx, obj, annotations, revision).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An object found by name is refused without its id (it may be another tenant's); one the
    /// resource named by id is refused naming it.
    #[test]
    fn a_refused_object_found_by_name_is_not_identified() {
        let query = Query {
            key: "mail.example.com",
            by_name_is_own: false,
            adoption: None,
            pending_is_ours: false,
        };
        let found = |matched_by| Found {
            id: 4242,
            matched_by,
        };
        let by_name = refuse_adoption(None, found(MatchedBy::NaturalKey), query, "sending domain");
        let by_name = by_name.expect("refused");
        assert!(
            by_name.starts_with("sending domain with the same name"),
            "{by_name}"
        );
        assert!(!by_name.contains("4242"), "{by_name}");
        let named = refuse_adoption(None, found(MatchedBy::ExternalId), query, "sending domain");
        assert!(
            named
                .expect("refused")
                .contains("sending domain 4242 named by")
        );
    }
}
