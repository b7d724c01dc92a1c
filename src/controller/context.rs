//! State shared by every reconcile: clients, cache, metrics, event recorder, settings.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Resource, ResourceExt};

use super::cache::AccountCache;
use super::detail::DetailSchedule;
use super::metrics::Metrics;

/// Longest Event note kube-apiserver accepts, in bytes: `NoteLengthLimit` of k8s.io/kubernetes
/// `pkg/apis/core/validation/events.go`, checked on every Event with an `eventTime` (all
/// events.k8s.io/v1 Events); a longer note gets the whole Event refused with 422.
pub const MAX_EVENT_NOTE_BYTES: usize = 1024;

/// `note` cut to at most [`MAX_EVENT_NOTE_BYTES`] bytes at a character boundary, ending with `…`
/// when cut.
pub fn event_note(note: &str) -> String {
    if note.len() <= MAX_EVENT_NOTE_BYTES {
        return note.to_owned();
    }
    let mut end = MAX_EVENT_NOTE_BYTES - '…'.len_utf8();
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &note[..end])
}

/// Field manager of every write the operator makes to Kubernetes (server-side apply).
pub const FIELD_MANAGER: &str = "mailtarget-operator";

/// Settings of the reconcilers.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Period of the drift check of each object (jittered by up to 10%). A resync compares
    /// the object with the service's list items (`ceil(N / 100)` page reads per kind).
    pub resync_interval: Duration,
    /// Period of the check of the fields only the detail endpoints return (an API key's
    /// `permissions` and `allowedIp`, a sub account's `ipPoolId`): one `GET` per object whose
    /// spec sets them, made by the first resync at least `detail_resync_interval -
    /// resync_interval / 2` after the previous read. Never shorter than `resync_interval`
    /// (equal: every resync reads them).
    pub detail_resync_interval: Duration,
    /// Wait before the first `verify-txt` call after a domain is created; doubled per call.
    pub verify_first_interval: Duration,
    /// Longest wait between two `verify-txt` calls for an unverified domain.
    pub verify_max_interval: Duration,
    /// Longest wait before retrying an object after a retryable error.
    pub max_error_backoff: Duration,
    /// Adoption policy of resources without the `mailtarget.co/adoption-policy` annotation
    /// (`None`: existing objects and Secrets are never taken over without it). Setting it lets
    /// any resource take over any object of the account: unsafe in a shared cluster.
    pub default_adoption_policy: Option<crate::crd::AdoptionPolicy>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            resync_interval: Duration::from_secs(300),
            detail_resync_interval: Duration::from_secs(3600),
            verify_first_interval: Duration::from_secs(5),
            verify_max_interval: Duration::from_secs(600),
            max_error_backoff: Duration::from_secs(300),
            default_adoption_policy: None,
        }
    }
}

/// Everything a reconcile needs.
pub struct Context {
    /// Kubernetes client.
    pub kube: kube::Client,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Event recorder.
    pub recorder: Recorder,
    /// Settings.
    pub settings: Settings,
    failures: Mutex<HashMap<String, u32>>,
    stalled: Mutex<HashMap<String, Option<i64>>>,
    /// When each object's detail-only fields are due for a read.
    pub details: DetailSchedule,
    /// The controllers' caches, to find resources that claim the same API object.
    pub claims: super::claims::Claims,
    /// The managed Secrets (label `app.kubernetes.io/managed-by=mailtarget-operator`), cached
    /// by a watch once the operator runs, so that a reconcile finds an intact Secret without a
    /// GET (see [`super::secrets`]).
    pub secret_cache:
        std::sync::OnceLock<kube::runtime::reflector::Store<k8s_openapi::api::core::v1::Secret>>,
    /// The keyed digest written beside every Secret value (see [`super::secrets`]).
    pub digest: super::secrets::ValueDigest,
    /// The MAC of create-pending markers (see [`super::identity::pending_is_ours`]), keyed apart
    /// from [`Self::digest`]: a Secret value is chosen by whoever answers the create (a tenant's
    /// Account may name any service), so its digest must never pass for a marker's MAC.
    pub markers: super::secrets::ValueDigest,
    /// The accounts by name, with their clients (see [`super::accounts`]); `default` is the
    /// client of the operator's flags while no ClusterAccount `default` exists.
    pub accounts: Arc<super::accounts::AccountRegistry>,
}

impl Context {
    /// A context for `kube`, with `api` (the operator's flags) as the `default` account while
    /// no ClusterAccount `default` exists; the keys of Secret value digests and of pending-create
    /// markers are derived from `api`'s key, one for each.
    pub fn new(
        kube: kube::Client,
        api: crate::api::Client,
        metrics: Arc<Metrics>,
        settings: Settings,
        reporter: Reporter,
    ) -> Self {
        // Lists are read again once per resync interval: each object resyncs at least an
        // interval after its previous resync, so it always sees a list read after that one
        // (drift made at the service is seen within a resync), while a resync of N objects
        // reads each list once, `ceil(N / 100)` pages, rather than twice.
        let flags = Arc::new(AccountCache::new(api.clone(), settings.resync_interval));
        let recorder = Recorder::new(kube.clone(), reporter);
        let digest = super::secrets::ValueDigest::new(
            &api.derived_key("mailtarget-operator/secret-digest/v1"),
        );
        let markers = super::secrets::ValueDigest::new(
            &api.derived_key("mailtarget-operator/create-pending-mac/v1"),
        );
        let details =
            DetailSchedule::new(settings.resync_interval, settings.detail_resync_interval);
        let accounts = Arc::new(super::accounts::AccountRegistry::new(
            Some(flags),
            settings.resync_interval,
        ));
        Context {
            kube,
            metrics,
            recorder,
            settings,
            failures: Mutex::default(),
            stalled: Mutex::default(),
            details,
            claims: super::claims::Claims::default(),
            secret_cache: std::sync::OnceLock::new(),
            digest,
            markers,
            accounts,
        }
    }

    /// The delay before the next periodic resync: the interval, jittered by up to 10% so that
    /// objects created together do not resync together.
    pub fn resync_delay(&self) -> Duration {
        let jitter = rand::random::<f64>() * 0.1;
        self.settings.resync_interval.mul_f64(1.0 + jitter)
    }

    /// Records a failure of `key` and returns how long to wait: 1 s doubled per consecutive
    /// failure (or conflict), capped at `max_error_backoff`, with up to 20% jitter.
    pub fn failure_backoff(&self, key: &str) -> Duration {
        self.backoff(key, Duration::from_secs(1))
    }

    /// Records a 409 Conflict of `key` (its cached copy was stale, see [`super::revision`]) and
    /// returns how long to wait for the watch to deliver the newer copy: 100 ms doubled per
    /// consecutive conflict (or failure), capped and jittered as failures are.
    pub fn conflict_backoff(&self, key: &str) -> Duration {
        self.backoff(key, Duration::from_millis(100))
    }

    fn backoff(&self, key: &str, first: Duration) -> Duration {
        let n = match self.failures.lock() {
            Ok(mut m) => {
                let n = m.entry(key.to_string()).or_insert(0);
                *n = n.saturating_add(1);
                *n
            }
            Err(_) => 1,
        };
        crate::engine::Pacing::backoff(n - 1, first, self.settings.max_error_backoff)
            .mul_f64(1.0 + rand::random::<f64>() * 0.2)
    }

    /// Remembers that the object with UID `key` stalled at `generation` (a 400 from the API or
    /// an invalid spec): it is not reconciled again until its generation changes. A 401 is not
    /// recorded here: it is checked again at the next resync.
    pub fn mark_stalled(&self, key: &str, generation: Option<i64>) {
        if let Ok(mut m) = self.stalled.lock() {
            m.insert(key.to_string(), generation);
        }
    }

    /// True when `key` stalled at this same `generation`.
    pub fn is_stalled(&self, key: &str, generation: Option<i64>) -> bool {
        self.stalled
            .lock()
            .map(|m| m.get(key) == Some(&generation))
            .unwrap_or(false)
    }

    /// Forgets that `key` stalled.
    pub fn clear_stalled(&self, key: &str) {
        if let Ok(mut m) = self.stalled.lock() {
            m.remove(key);
        }
    }

    /// Forgets all runtime state of `obj`, all of it keyed by UID (stall, failure and conflict
    /// count, detail schedule): called when its deletion is handled, so nothing of it outlives
    /// the object, and an object created again under the same name starts afresh.
    pub fn forget<K: Resource>(&self, obj: &K) {
        let uid = object_uid(obj);
        self.clear_stalled(&uid);
        self.reset_failures(&uid);
        self.details.forget(&uid);
    }

    /// Forgets the failures of `key` after a success.
    pub fn reset_failures(&self, key: &str) {
        if let Ok(mut m) = self.failures.lock() {
            m.remove(key);
        }
    }

    /// Publishes a Kubernetes Event about `obj`, its note cut to [`MAX_EVENT_NOTE_BYTES`], and
    /// logs it as one line: a Normal Event (created, updated, adopted, deleted...) at info level,
    /// a Warning (a stall, a failure) at warn level, inside the reconcile's span (kind,
    /// namespace, name, uid). Failures to publish are logged, never fatal. `note` must not
    /// contain secrets (callers pass ids, names and API messages only).
    pub async fn event<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let note = event_note(&note);
        match type_ {
            EventType::Normal => tracing::info!(reason, "{note}"),
            EventType::Warning => tracing::warn!(reason, "{note}"),
        }
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: action.into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &obj.object_ref(&())).await {
            tracing::warn!(object = %obj.name_any(), error = %e, "cannot publish event");
        }
    }
}

/// `namespace/name` of an object, for logs, metrics and Events.
pub fn object_key<K: Resource>(obj: &K) -> String {
    format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any())
}

/// The UID of an object (`namespace/name` for an object without one, which the API server
/// never serves): the key of per-object runtime state, so that an object deleted and created
/// again under the same name starts afresh.
pub fn object_uid<K: Resource>(obj: &K) -> String {
    obj.meta().uid.clone().unwrap_or_else(|| object_key(obj))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A note of 1024 bytes is kept; a longer one is cut to at most 1024 bytes at a character
    /// boundary.
    #[test]
    fn event_notes_fit_the_api_limit() {
        let fits = "é".repeat(MAX_EVENT_NOTE_BYTES / 2);
        assert_eq!(event_note(&fits), fits);
        let cut = event_note(&format!("{fits}x"));
        assert!(cut.len() <= MAX_EVENT_NOTE_BYTES, "{}", cut.len());
        assert!(cut.len() > MAX_EVENT_NOTE_BYTES - 6, "{}", cut.len());
        assert!(cut.ends_with("é…"), "{cut}");
    }
}
