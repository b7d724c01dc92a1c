//! In-memory object store: objects per resource bucket, one global monotonic resourceVersion, and
//! a bounded history of change events used to serve watches from a resourceVersion (Kubernetes API
//! concepts, "Resource versions" and "Efficient detection of changes").

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::resources::{Registry, StoreKey};

/// Kind of change, as named in watch events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Object created.
    Added,
    /// Object changed.
    Modified,
    /// Object removed.
    Deleted,
}

/// One committed change.
#[derive(Clone, Debug)]
pub struct ChangeEvent {
    /// resourceVersion this change produced.
    pub rv: u64,
    /// Store bucket.
    pub key: StoreKey,
    /// Namespace (`""` for cluster-scoped).
    pub namespace: String,
    /// Object name.
    pub name: String,
    /// Change kind.
    pub etype: EventType,
    /// The object after the change (for DELETED: its last state, with the new resourceVersion).
    pub object: Value,
    /// The object before the change (`None` for ADDED).
    pub prev: Option<Value>,
}

/// Object map of one bucket, keyed by (namespace, name), ordered as kube-apiserver lists them.
pub type Bucket = BTreeMap<(String, String), Value>;

/// The whole mutable state of the server, guarded by one mutex.
pub struct Store {
    /// Served resource types.
    pub registry: Registry,
    objects: BTreeMap<StoreKey, Bucket>,
    rv: u64,
    history: VecDeque<Arc<ChangeEvent>>,
    /// Every event with `rv > history_floor` is retained.
    history_floor: u64,
    window: usize,
    tx: broadcast::Sender<Arc<ChangeEvent>>,
    /// Set by a change that can give the garbage collector work (a removal, an object being
    /// deleted, ownerReferences naming a missing owner); cleared by [`crate::gc::sweep`] once it
    /// is stable.
    gc_dirty: bool,
    /// `metadata.uid` of every stored object.
    uids: HashSet<String>,
}

/// RFC 3339 UTC timestamp with second precision, as in `metadata.creationTimestamp`.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Reads `metadata.<field>` as a string.
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

/// Ensures `obj.metadata` is an object and returns it.
pub fn meta_mut(obj: &mut Value) -> &mut serde_json::Map<String, Value> {
    if !obj.is_object() {
        *obj = json!({});
    }
    let map = obj.as_object_mut().expect("made an object above");
    let m = map.entry("metadata").or_insert_with(|| json!({}));
    if !m.is_object() {
        *m = json!({});
    }
    m.as_object_mut().expect("made an object above")
}

/// `metadata.finalizers` as strings.
pub fn finalizers(obj: &Value) -> Vec<String> {
    obj["metadata"]["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Replaces `metadata.finalizers` (removing the field when empty).
pub fn set_finalizers(obj: &mut Value, fins: &[String]) {
    let m = meta_mut(obj);
    if fins.is_empty() {
        m.remove("finalizers");
    } else {
        m.insert("finalizers".into(), json!(fins));
    }
}

/// Whether `metadata.deletionTimestamp` is set.
pub fn is_deleting(obj: &Value) -> bool {
    meta_str(obj, "deletionTimestamp").is_some()
}

impl Store {
    /// An empty store with the built-in registry; `window` is the number of change events kept
    /// for watches from an older resourceVersion.
    pub fn new(window: usize) -> Store {
        let (tx, _) = broadcast::channel(16384);
        Store {
            registry: Registry::new(),
            objects: BTreeMap::new(),
            rv: 1,
            history: VecDeque::new(),
            history_floor: 1,
            window: window.max(1),
            tx,
            gc_dirty: false,
            uids: HashSet::new(),
        }
    }

    /// True when `obj`'s `metadata.ownerReferences` name an owner uid that no stored object
    /// has (the garbage collector's cue to delete or orphan it).
    pub fn names_missing_owner(&self, obj: &Value) -> bool {
        obj["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|refs| {
                refs.iter()
                    .any(|r| r["uid"].as_str().is_none_or(|u| !self.uids.contains(u)))
            })
    }

    /// True when a change since the last stable garbage collection can give it work.
    pub fn gc_dirty(&self) -> bool {
        self.gc_dirty
    }

    /// Records that garbage collection found nothing to do.
    pub fn set_gc_clean(&mut self) {
        self.gc_dirty = false;
    }

    /// The latest resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.rv
    }

    /// The oldest resourceVersion a watch can start from (older ones are answered 410 Expired).
    pub fn oldest_watchable_rv(&self) -> u64 {
        self.history_floor
    }

    /// Subscribes to future change events.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<ChangeEvent>> {
        self.tx.subscribe()
    }

    /// Retained events with `rv > since`, oldest first; `None` when `since` is older than the
    /// retained window.
    pub fn events_since(&self, since: u64) -> Option<Vec<Arc<ChangeEvent>>> {
        if since < self.history_floor {
            return None;
        }
        Some(
            self.history
                .iter()
                .filter(|e| e.rv > since)
                .cloned()
                .collect(),
        )
    }

    /// The objects of a bucket.
    pub fn bucket(&self, key: &StoreKey) -> Option<&Bucket> {
        self.objects.get(key)
    }

    /// One object.
    pub fn get(&self, key: &StoreKey, ns: &str, name: &str) -> Option<&Value> {
        self.objects
            .get(key)?
            .get(&(ns.to_string(), name.to_string()))
    }

    /// Every stored object, bucket by bucket.
    pub fn objects(&self) -> impl Iterator<Item = &Value> {
        self.objects.values().flat_map(|b| b.values())
    }

    /// All (bucket, namespace, name) triples currently stored.
    pub fn all_keys(&self) -> Vec<(StoreKey, String, String)> {
        self.objects
            .iter()
            .flat_map(|(k, b)| {
                b.keys()
                    .map(move |(ns, n)| (k.clone(), ns.clone(), n.clone()))
            })
            .collect()
    }

    /// The bucket as it was at resourceVersion `rv`, rebuilt by undoing retained events; `None`
    /// when `rv` is older than the retained window.
    pub fn snapshot_at(&self, key: &StoreKey, rv: u64) -> Option<Bucket> {
        if rv < self.history_floor {
            return None;
        }
        let mut b = self.objects.get(key).cloned().unwrap_or_default();
        for e in self.history.iter().rev() {
            if e.rv <= rv {
                break;
            }
            if &e.key != key {
                continue;
            }
            let k = (e.namespace.clone(), e.name.clone());
            match (&e.etype, &e.prev) {
                (EventType::Added, _) => {
                    b.remove(&k);
                }
                (_, Some(prev)) => {
                    b.insert(k, prev.clone());
                }
                (_, None) => {}
            }
        }
        Some(b)
    }

    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn record(&mut self, ev: ChangeEvent) {
        let ev = Arc::new(ev);
        self.history.push_back(ev.clone());
        while self.history.len() > self.window {
            if let Some(old) = self.history.pop_front() {
                self.history_floor = old.rv;
            }
        }
        // No receivers is fine: nobody watches.
        let _ = self.tx.send(ev);
    }

    /// Stores `obj` (created when absent, replaced otherwise), giving it a new resourceVersion,
    /// and records the change. Returns the stored object.
    pub fn put(&mut self, key: &StoreKey, mut obj: Value) -> Value {
        let rv = self.next_rv();
        let ns = meta_str(&obj, "namespace").unwrap_or_default().to_string();
        let name = meta_str(&obj, "name").unwrap_or_default().to_string();
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
        let prev = self
            .objects
            .entry(key.clone())
            .or_default()
            .insert((ns.clone(), name.clone()), obj.clone());
        if let Some(uid) = meta_str(&obj, "uid") {
            self.uids.insert(uid.to_string());
        }
        let refs = &obj["metadata"]["ownerReferences"];
        let gc_work = is_deleting(&obj)
            || (prev
                .as_ref()
                .map_or(&Value::Null, |p| &p["metadata"]["ownerReferences"])
                != refs
                && self.names_missing_owner(&obj));
        self.gc_dirty |= gc_work;
        let etype = if prev.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.record(ChangeEvent {
            rv,
            key: key.clone(),
            namespace: ns,
            name,
            etype,
            object: obj.clone(),
            prev,
        });
        obj
    }

    /// Removes an object, recording a DELETED event whose object is `last` (the state at removal,
    /// given a new resourceVersion). Returns that final state, or `None` if it was absent.
    pub fn remove(
        &mut self,
        key: &StoreKey,
        ns: &str,
        name: &str,
        last: Option<Value>,
    ) -> Option<Value> {
        let prev = self
            .objects
            .get_mut(key)?
            .remove(&(ns.to_string(), name.to_string()))?;
        self.gc_dirty = true;
        if let Some(uid) = meta_str(&prev, "uid") {
            self.uids.remove(uid);
        }
        let rv = self.next_rv();
        let mut obj = last.unwrap_or_else(|| prev.clone());
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
        self.record(ChangeEvent {
            rv,
            key: key.clone(),
            namespace: ns.to_string(),
            name: name.to_string(),
            etype: EventType::Deleted,
            object: obj.clone(),
            prev: Some(prev),
        });
        Some(obj)
    }

    /// Drops a whole bucket's objects, recording a DELETED event for each.
    pub fn remove_all(&mut self, key: &StoreKey) {
        let keys: Vec<(String, String)> = self
            .objects
            .get(key)
            .map(|b| b.keys().cloned().collect())
            .unwrap_or_default();
        for (ns, name) in keys {
            self.remove(key, &ns, &name, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> StoreKey {
        StoreKey {
            group: "".into(),
            plural: "configmaps".into(),
        }
    }

    fn cm(name: &str, v: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "default"}, "data": {"v": v}})
    }

    #[test]
    fn resource_versions_are_monotonic_strings() {
        let mut s = Store::new(10);
        let a = s.put(&key(), cm("a", "1"));
        let b = s.put(&key(), cm("b", "1"));
        let ra: u64 = meta_str(&a, "resourceVersion").unwrap().parse().unwrap();
        let rb: u64 = meta_str(&b, "resourceVersion").unwrap().parse().unwrap();
        assert!(rb > ra);
        assert_eq!(s.current_rv(), rb);
    }

    #[test]
    fn snapshot_undoes_later_changes() {
        let mut s = Store::new(10);
        s.put(&key(), cm("a", "1"));
        let at = s.current_rv();
        s.put(&key(), cm("a", "2"));
        s.put(&key(), cm("b", "1"));
        s.remove(&key(), "default", "a", None);
        let snap = s.snapshot_at(&key(), at).unwrap();
        assert_eq!(snap.len(), 1);
        assert_eq!(snap[&("default".into(), "a".into())]["data"]["v"], "1");
    }

    #[test]
    fn window_bounds_history() {
        let mut s = Store::new(2);
        let first = s.current_rv();
        for i in 0..5 {
            s.put(&key(), cm(&format!("o{i}"), "1"));
        }
        assert!(s.events_since(first).is_none());
        assert!(s.snapshot_at(&key(), first).is_none());
        let recent = s.events_since(s.current_rv() - 2).unwrap();
        assert_eq!(recent.len(), 2);
    }
}
