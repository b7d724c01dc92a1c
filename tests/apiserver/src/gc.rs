//! The controllers kube-controller-manager and kube-apiserver run in the background, run here
//! synchronously after every write until nothing changes: the garbage collector (ownerReferences:
//! background, foreground and orphan propagation; Kubernetes "Garbage Collection"), the namespace
//! controller (a terminating namespace is emptied, then removed) and the CRD finalizer (a
//! terminating CRD's objects are deleted, then the CRD is removed).

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::crd::CLEANUP_FINALIZER;
use crate::ops::{
    FOREGROUND_FINALIZER, ORPHAN_FINALIZER, Propagation, begin_delete, commit_put, commit_remove,
};
use crate::resources::StoreKey;
use crate::store::{Store, finalizers, is_deleting, meta_str, set_finalizers};

type Key = (StoreKey, String, String);

fn uid(o: &Value) -> Option<String> {
    meta_str(o, "uid").map(str::to_string)
}

fn owner_uids(o: &Value) -> Vec<(String, bool)> {
    o["metadata"]["ownerReferences"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| {
                    Some((
                        r["uid"].as_str()?.to_string(),
                        r["blockOwnerDeletion"].as_bool() == Some(true),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn remove_finalizer(st: &mut Store, k: &Key, obj: &Value, fin: &str) {
    let mut o = obj.clone();
    let mut fins = finalizers(&o);
    fins.retain(|f| f != fin);
    set_finalizers(&mut o, &fins);
    finish(st, k, o);
}

/// Stores `o`, or removes it when it is being deleted and nothing holds it any more.
fn finish(st: &mut Store, k: &Key, mut o: Value) {
    let ns_held = k.0.plural == "namespaces"
        && k.0.group.is_empty()
        && o["spec"]["finalizers"]
            .as_array()
            .is_some_and(|a| !a.is_empty());
    if is_deleting(&o) && finalizers(&o).is_empty() && !ns_held {
        commit_remove(st, &k.0, &k.1, &k.2, Some(o));
    } else {
        if o["metadata"]["finalizers"].is_null()
            && let Some(m) = o["metadata"].as_object_mut()
        {
            m.remove("finalizers");
        }
        commit_put(st, &k.0, o);
    }
}

/// True when a pass can change something: an object is being deleted, or names an owner that
/// no longer exists. Checked without copying objects, since it runs after every write.
fn needs_pass(st: &Store) -> bool {
    st.objects()
        .any(|o| is_deleting(o) || st.names_missing_owner(o))
}

/// One pass; returns whether anything changed.
fn pass(st: &mut Store) -> bool {
    // Nothing to do unless something is being deleted or has lost an owner.
    if !needs_pass(st) {
        return false;
    }
    let keys = st.all_keys();
    let objects: Vec<(Key, Value)> = keys
        .into_iter()
        .filter_map(|k| {
            let o = st.get(&k.0, &k.1, &k.2)?.clone();
            Some((k, o))
        })
        .collect();
    let uids: HashSet<String> = objects.iter().filter_map(|(_, o)| uid(o)).collect();

    for (k, o) in &objects {
        let is_ns = k.0.group.is_empty() && k.0.plural == "namespaces";
        let is_crd =
            k.0.group == "apiextensions.k8s.io" && k.0.plural == "customresourcedefinitions";

        // Namespace controller.
        if is_ns && is_deleting(o) {
            let name = &k.2;
            let content: Vec<&(Key, Value)> = objects
                .iter()
                .filter(|(ck, _)| &ck.1 == name && !ck.1.is_empty())
                .collect();
            if content.is_empty() {
                if o["spec"]["finalizers"]
                    .as_array()
                    .is_some_and(|a| !a.is_empty())
                {
                    let mut n = o.clone();
                    n["spec"]["finalizers"] = json!([]);
                    finish(st, k, n);
                    return true;
                }
            } else {
                let mut changed = false;
                for (ck, co) in content {
                    if !is_deleting(co) {
                        begin_delete(st, &ck.0, &ck.1, &ck.2, Propagation::Background, false);
                        changed = true;
                    }
                }
                if changed {
                    return true;
                }
            }
        }

        // CRD instance cleanup.
        if is_crd && is_deleting(o) && finalizers(o).iter().any(|f| f == CLEANUP_FINALIZER) {
            let bucket = StoreKey {
                group: o["spec"]["group"].as_str().unwrap_or_default().to_string(),
                plural: o["spec"]["names"]["plural"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            };
            let instances: Vec<&(Key, Value)> =
                objects.iter().filter(|(ck, _)| ck.0 == bucket).collect();
            if instances.is_empty() {
                remove_finalizer(st, k, o, CLEANUP_FINALIZER);
                return true;
            }
            let mut changed = false;
            for (ck, co) in instances {
                if !is_deleting(co) {
                    begin_delete(st, &ck.0, &ck.1, &ck.2, Propagation::Background, false);
                    changed = true;
                }
            }
            if changed {
                return true;
            }
        }

        let Some(my_uid) = uid(o) else { continue };
        let dependents = || {
            objects
                .iter()
                .filter(|(_, d)| owner_uids(d).iter().any(|(u, _)| *u == my_uid))
        };

        // Orphan propagation: drop our ownerReference from every dependent.
        if is_deleting(o) && finalizers(o).iter().any(|f| f == ORPHAN_FINALIZER) {
            for (dk, d) in dependents() {
                let mut nd = d.clone();
                if let Some(refs) = nd["metadata"]["ownerReferences"].as_array_mut() {
                    refs.retain(|r| r["uid"].as_str() != Some(my_uid.as_str()));
                    if refs.is_empty()
                        && let Some(m) = nd["metadata"].as_object_mut()
                    {
                        m.remove("ownerReferences");
                    }
                }
                finish(st, dk, nd);
            }
            remove_finalizer(st, k, o, ORPHAN_FINALIZER);
            return true;
        }

        // Foreground propagation: delete dependents, wait for the blocking ones.
        if is_deleting(o) && finalizers(o).iter().any(|f| f == FOREGROUND_FINALIZER) {
            let mut changed = false;
            let mut blocking = false;
            for (dk, d) in dependents() {
                if owner_uids(d).iter().any(|(u, b)| *u == my_uid && *b) {
                    blocking = true;
                }
                if !is_deleting(d) {
                    begin_delete(st, &dk.0, &dk.1, &dk.2, Propagation::Foreground, false);
                    changed = true;
                }
            }
            if changed {
                return true;
            }
            if !blocking {
                remove_finalizer(st, k, o, FOREGROUND_FINALIZER);
                return true;
            }
        }

        // Dependents whose owners are gone.
        let owners = owner_uids(o);
        if !owners.is_empty() && !is_deleting(o) {
            let present: Vec<&(String, bool)> =
                owners.iter().filter(|(u, _)| uids.contains(u)).collect();
            if present.is_empty() {
                begin_delete(st, &k.0, &k.1, &k.2, Propagation::Background, false);
                return true;
            }
            if present.len() != owners.len() {
                let mut n = o.clone();
                if let Some(refs) = n["metadata"]["ownerReferences"].as_array_mut() {
                    refs.retain(|r| r["uid"].as_str().is_some_and(|u| uids.contains(u)));
                }
                finish(st, k, n);
                return true;
            }
        }
    }
    false
}

/// Runs the background controllers until the store is stable (bounded, so a pathological cycle
/// cannot hang a request).
pub fn sweep(st: &mut Store) {
    // Most writes (status updates, new objects without owners) cannot give it work.
    if !st.gc_dirty() {
        return;
    }
    for _ in 0..10_000 {
        if !pass(st) {
            st.set_gc_clean();
            return;
        }
    }
    tracing::warn!("test API server: garbage collection did not settle");
}
