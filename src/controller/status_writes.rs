//! What this process last wrote to each object's status, so that a reconcile can tell whether
//! the controller's cached copy of the object already holds that write (see
//! [`super::managed`]): the cache is filled by a watch, which can deliver the operator's own
//! writes after the next reconcile has started.

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

/// What one status write of an object produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusWrite {
    /// `metadata.resourceVersion` of the written object.
    pub resource_version: Option<String>,
    /// [`status_digest`] of the status the server stored.
    pub digest: u64,
}

/// A digest of a status's JSON form, to tell whether a cached copy of an object carries the
/// status this operator last wrote (two equal statuses serialize identically: fields are in
/// declaration order). Not a security measure; a collision would only skip one re-read.
pub fn status_digest<S: serde::Serialize>(status: &S) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_vec(status).unwrap_or_default().hash(&mut h);
    h.finish()
}

/// How many resource versions of earlier status writes are remembered per object.
const EARLIER_WRITES: usize = 4;

#[derive(Clone, Debug)]
struct Writes {
    last: StatusWrite,
    earlier: VecDeque<String>,
}

/// The status writes of this process, by object key (`namespace/name`): the last one, and the
/// resource versions of a few before it.
#[derive(Debug, Default)]
pub struct StatusLedger {
    writes: Mutex<HashMap<String, Writes>>,
}

impl StatusLedger {
    /// Records the latest status write of `key`, or a fresh read of `key` (which holds every
    /// write before it); `None` forgets `key`, e.g. once it is deleted. The previous entry
    /// becomes an earlier write.
    pub fn record(&self, key: &str, write: Option<StatusWrite>) {
        let Ok(mut m) = self.writes.lock() else {
            return;
        };
        let Some(write) = write else {
            m.remove(key);
            return;
        };
        match m.get_mut(key) {
            Some(w) => {
                let previous = std::mem::replace(&mut w.last, write);
                if let Some(rv) = previous.resource_version {
                    if w.earlier.len() == EARLIER_WRITES {
                        w.earlier.pop_front();
                    }
                    w.earlier.push_back(rv);
                }
            }
            None => {
                m.insert(
                    key.to_string(),
                    Writes {
                        last: write,
                        earlier: VecDeque::new(),
                    },
                );
            }
        }
    }

    /// True when a copy of `key` at `resource_version` whose status has digest `digest()` holds
    /// everything the last status write of `key` wrote: it is the very version that write
    /// produced, or its status is identical to the one that write stored (its spec may be
    /// newer). False when this process never wrote `key`'s status. Resource versions are
    /// opaque (Kubernetes API conventions): only equality is used. `digest` runs only when the
    /// version differs (it serialises the status: kept off the resync path).
    pub fn holds_last(
        &self,
        key: &str,
        resource_version: Option<&str>,
        digest: impl FnOnce() -> u64,
    ) -> bool {
        self.writes
            .lock()
            .map(|m| {
                m.get(key).is_some_and(|w| {
                    (resource_version.is_some()
                        && w.last.resource_version.as_deref() == resource_version)
                        || w.last.digest == digest()
                })
            })
            .unwrap_or(false)
    }

    /// True when `resource_version` is the version an earlier status write of `key` produced,
    /// not the last one: a newer version exists, and its watch event, still to come, starts
    /// another reconcile, so a reconcile of this copy can leave the work to that one.
    pub fn is_earlier(&self, key: &str, resource_version: Option<&str>) -> bool {
        let Some(rv) = resource_version else {
            return false;
        };
        self.writes
            .lock()
            .map(|m| {
                m.get(key).is_some_and(|w| {
                    w.last.resource_version.as_deref() != Some(rv)
                        && w.earlier.iter().any(|e| e == rv)
                })
            })
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(rv: &str, digest: u64) -> Option<StatusWrite> {
        Some(StatusWrite {
            resource_version: Some(rv.into()),
            digest,
        })
    }

    /// The copy a write produced, or any copy with the same status, holds that write; a copy
    /// of an earlier write does not, and is recognised as earlier.
    #[test]
    fn last_and_earlier_writes() {
        let l = StatusLedger::default();
        assert!(!l.holds_last("ns/a", Some("1"), || 7), "never written");
        assert!(!l.is_earlier("ns/a", Some("1")));
        l.record("ns/a", write("10", 1));
        l.record("ns/a", write("11", 2));
        assert!(l.holds_last("ns/a", Some("11"), || 0));
        assert!(
            l.holds_last("ns/a", Some("15"), || 2),
            "a later spec change, same status"
        );
        assert!(!l.holds_last("ns/a", Some("10"), || 1));
        assert!(l.is_earlier("ns/a", Some("10")));
        assert!(
            !l.is_earlier("ns/a", Some("11")),
            "the last write is not earlier"
        );
        assert!(
            !l.is_earlier("ns/a", Some("9")),
            "not a write of this process"
        );
        assert!(!l.is_earlier("ns/b", Some("10")), "another object");
    }

    /// Only a few earlier versions are kept; forgetting a key forgets all of them.
    #[test]
    fn bounded_and_forgotten() {
        let l = StatusLedger::default();
        for rv in 1..=10 {
            l.record("ns/a", write(&rv.to_string(), rv));
        }
        assert!(l.is_earlier("ns/a", Some("9")));
        assert!(l.is_earlier("ns/a", Some("6")));
        assert!(!l.is_earlier("ns/a", Some("5")), "older than the last four");
        l.record("ns/a", None);
        assert!(!l.is_earlier("ns/a", Some("9")));
        assert!(!l.holds_last("ns/a", Some("10"), || 10));
    }

    /// Equal statuses have equal digests; a changed field changes the digest.
    #[test]
    fn digest_follows_content() {
        let a = serde_json::json!({"id": 3, "conditions": []});
        let b = serde_json::json!({"id": 3, "conditions": []});
        let c = serde_json::json!({"id": 4, "conditions": []});
        assert_eq!(status_digest(&a), status_digest(&b));
        assert_ne!(status_digest(&a), status_digest(&c));
    }
}
