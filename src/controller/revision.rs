//! Optimistic concurrency for one reconcile's writes to its resource (Kubernetes API
//! conventions, "Concurrency Control and Consistency").
//!
//! A reconcile decides from the controller's cached copy of its resource, which a watch fills and
//! which can be older than the operator's own last write to it: the watch may deliver that write
//! after the next reconcile started (a Secret's change, a requeue). So every write a reconcile
//! makes to its resource (the status, the identity annotations of [`super::identity`]) carries
//! the `metadata.resourceVersion` of that copy, or of the reconcile's own previous write, as a
//! precondition: the API server answers 409 Conflict when it is not the stored version, and
//! writes nothing. A status built from a stale copy therefore never replaces a newer one (server-side
//! apply would remove the fields the operator stops sending, `status.id` among them). And as each
//! write to the service follows such a write or check in the same reconcile (the pending marker
//! before a create, [`Revision::confirm`] before other steps), a stale copy never causes a write
//! to the service either, a second create least of all. A conflict is retried shortly (see
//! [`super::common::error_policy`]), once the watch has delivered the newer copy.

use std::sync::Mutex;

use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::context::FIELD_MANAGER;
use crate::controller::common::Locked;

/// The version of its resource a reconcile writes over: the cached copy's, then each of its own
/// writes'.
#[derive(Debug)]
pub struct Revision {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// `metadata.resourceVersion` the next write must find (`None`: unconditional; objects from
    /// the API server always have one).
    version: Option<String>,
    /// A write of this reconcile succeeded: the copy it decided from was current then.
    confirmed: bool,
}

impl Revision {
    /// The revision of `obj`, the copy a reconcile starts from.
    pub fn of<K: Resource>(obj: &K) -> Self {
        Revision {
            state: Mutex::new(State {
                version: obj.meta().resource_version.clone(),
                confirmed: false,
            }),
        }
    }

    /// Sets the precondition in `body`, a patch of the resource: its `metadata.resourceVersion`.
    pub fn stamp(&self, body: &mut Value) {
        if let (Some(version), Some(object)) =
            (self.state.locked().version.clone(), body.as_object_mut())
        {
            let metadata = object.entry("metadata").or_insert_with(|| json!({}));
            if let Some(metadata) = metadata.as_object_mut() {
                metadata.insert("resourceVersion".into(), json!(version));
            }
        }
    }

    /// Takes the version `written` has: a write stamped by [`Self::stamp`] succeeded.
    pub fn advance<K: Resource>(&self, written: &K) {
        let mut state = self.state.locked();
        state.version = written.meta().resource_version.clone();
        state.confirmed = true;
    }

    /// Confirms, before a write to the service, that the copy the reconcile decided from is
    /// the stored version, unless a write of this reconcile did already: one merge patch that
    /// changes nothing but carries the version. The API server stores nothing for it (no new
    /// resourceVersion, no watch event), or answers 409 Conflict.
    ///
    /// Errors: the Kubernetes API's (409 Conflict for a stale copy); the service write must then
    /// not be made.
    pub async fn confirm<K>(&self, api: &Api<K>, name: &str) -> Result<(), kube::Error>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    {
        if self.state.locked().confirmed {
            return Ok(());
        }
        self.merge(api, name, json!({})).await
    }

    /// Merge-patches `body` (the fields to change; `{}` for none) into the resource `name` as the
    /// operator's field manager, over the version this holds, and takes the version written.
    ///
    /// Errors: the Kubernetes API's (409 Conflict when the resource changed since that version:
    /// nothing is written).
    pub async fn merge<K>(
        &self,
        api: &Api<K>,
        name: &str,
        mut body: Value,
    ) -> Result<(), kube::Error>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    {
        if let Some(object) = body.as_object_mut() {
            object.insert("apiVersion".into(), json!(K::api_version(&())));
            object.insert("kind".into(), json!(K::kind(&())));
        }
        self.stamp(&mut body);
        // A merge patch: `apply` only names the field manager here.
        let params = PatchParams::apply(FIELD_MANAGER);
        let written = api.patch(name, &params, &Patch::Merge(body)).await?;
        self.advance(&written);
        Ok(())
    }
}

/// True for 409 Conflict (a precondition failed), not for `AlreadyExists`.
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_conflict())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::ApiKey;

    fn key(version: Option<&str>) -> ApiKey {
        let mut k: ApiKey = serde_json::from_value(json!({
            "apiVersion": "mailtarget.co/v1alpha1", "kind": "ApiKey",
            "metadata": {"name": "k", "namespace": "ns"},
            "spec": {"name": "k", "secretName": "s"},
        }))
        .unwrap();
        k.metadata.resource_version = version.map(str::to_owned);
        k
    }

    /// A patch carries the copy's version, then the version of the reconcile's last write; a
    /// copy without one leaves patches unconditional.
    #[test]
    fn patches_carry_the_latest_version() {
        let revision = Revision::of(&key(Some("7")));
        let mut body = json!({"status": {}});
        revision.stamp(&mut body);
        assert_eq!(body["metadata"]["resourceVersion"], "7");
        revision.advance(&key(Some("9")));
        let mut body = json!({"metadata": {"annotations": {}}});
        revision.stamp(&mut body);
        assert_eq!(
            body,
            json!({"metadata": {"annotations": {}, "resourceVersion": "9"}})
        );
        let mut body = json!({"status": {}});
        Revision::of(&key(None)).stamp(&mut body);
        assert_eq!(body, json!({"status": {}}));
    }

    /// Only 409 Conflict is a conflict; `AlreadyExists` shares the code, not the meaning.
    #[test]
    fn conflicts_are_told_apart() {
        let status = |code, reason: &str| {
            kube::Error::Api(Box::new(kube::core::Status {
                code,
                reason: reason.into(),
                ..Default::default()
            }))
        };
        assert!(is_conflict(&status(409, "Conflict")));
        assert!(!is_conflict(&status(409, "AlreadyExists")));
        assert!(!is_conflict(&status(500, "InternalError")));
    }
}
