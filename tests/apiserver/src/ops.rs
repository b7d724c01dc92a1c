//! Committed store operations shared by request handlers and the garbage collector, with the
//! side effects kube-apiserver attaches to them: a stored CRD (re)starts serving its kinds, a
//! removed CRD stops serving them; deletion honours finalizers, `deletionTimestamp` and the
//! propagation policy (Kubernetes "Finalizers" and "Garbage Collection").

use serde_json::{Value, json};

use crate::resources::StoreKey;
use crate::store::{Store, finalizers, is_deleting, meta_mut, now_rfc3339, set_finalizers};

/// Finalizer the garbage collector honours for `propagationPolicy: Orphan`.
pub const ORPHAN_FINALIZER: &str = "orphan";
/// Finalizer the garbage collector honours for `propagationPolicy: Foreground`.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

fn crd_key() -> StoreKey {
    StoreKey {
        group: "apiextensions.k8s.io".into(),
        plural: "customresourcedefinitions".into(),
    }
}

fn ns_key() -> StoreKey {
    StoreKey {
        group: "".into(),
        plural: "namespaces".into(),
    }
}

/// Stores an object (create or replace) and applies side effects. Returns the stored object.
pub fn commit_put(st: &mut Store, key: &StoreKey, obj: Value) -> Value {
    let stored = st.put(key, obj);
    if *key == crd_key() {
        st.registry.set_crd(&stored);
    }
    stored
}

/// Removes an object and applies side effects (a removed CRD stops serving and its remaining
/// objects are dropped). Returns the final state.
pub fn commit_remove(
    st: &mut Store,
    key: &StoreKey,
    ns: &str,
    name: &str,
    last: Option<Value>,
) -> Option<Value> {
    let removed = st.remove(key, ns, name, last)?;
    if *key == crd_key() {
        st.registry.remove_crd(name);
        let group = removed["spec"]["group"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let plural = removed["spec"]["names"]["plural"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        st.remove_all(&StoreKey { group, plural });
    }
    Some(removed)
}

/// `propagationPolicy` of DeleteOptions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Propagation {
    /// Dependents are deleted by the garbage collector after the owner is gone (default).
    Background,
    /// The owner stays (finalizer `foregroundDeletion`) until blocking dependents are gone.
    Foreground,
    /// Dependents lose their ownerReference (finalizer `orphan` until done).
    Orphan,
}

/// What a delete did.
#[derive(Clone, Debug)]
pub enum DeleteOutcome {
    /// The object is gone; its final state.
    Removed(Value),
    /// The object stays with `deletionTimestamp` set until its finalizers are removed.
    Pending(Value),
}

/// Deletes one object (which must exist) following `policy`; with `dry_run` nothing is stored.
/// Objects with finalizers (after adding the policy's) get `deletionTimestamp`,
/// `deletionGracePeriodSeconds: 0` and, the first time, `generation` + 1; namespaces and CRDs go through their own cleanup first.
pub fn begin_delete(
    st: &mut Store,
    key: &StoreKey,
    ns: &str,
    name: &str,
    policy: Propagation,
    dry_run: bool,
) -> Option<DeleteOutcome> {
    let current = st.get(key, ns, name)?.clone();
    let mut obj = current.clone();
    let mut fins = finalizers(&obj);
    let had = fins.clone();
    match policy {
        Propagation::Orphan => {
            fins.retain(|f| f != FOREGROUND_FINALIZER);
            if !fins.iter().any(|f| f == ORPHAN_FINALIZER) {
                fins.push(ORPHAN_FINALIZER.into());
            }
        }
        Propagation::Foreground => {
            fins.retain(|f| f != ORPHAN_FINALIZER);
            if !fins.iter().any(|f| f == FOREGROUND_FINALIZER) {
                fins.push(FOREGROUND_FINALIZER.into());
            }
        }
        Propagation::Background => {
            fins.retain(|f| f != ORPHAN_FINALIZER && f != FOREGROUND_FINALIZER);
        }
    }
    // Already being deleted: only the policy's finalizers may change.
    if is_deleting(&obj) {
        if fins != had && !dry_run {
            set_finalizers(&mut obj, &fins);
            if fins.is_empty() && !held_by_builtin_cleanup(key, &obj) {
                return commit_remove(st, key, ns, name, Some(obj)).map(DeleteOutcome::Removed);
            }
            return Some(DeleteOutcome::Pending(commit_put(st, key, obj)));
        }
        return Some(DeleteOutcome::Pending(current));
    }
    set_finalizers(&mut obj, &fins);
    let is_namespace = *key == ns_key();
    if *key == crd_key() {
        crate::crd::mark_terminating(&mut obj);
    }
    if is_namespace {
        obj["status"]["phase"] = json!("Terminating");
    }
    if fins.is_empty() && !held_by_builtin_cleanup(key, &obj) {
        if dry_run {
            return Some(DeleteOutcome::Removed(current));
        }
        return commit_remove(st, key, ns, name, None).map(DeleteOutcome::Removed);
    }
    let m = meta_mut(&mut obj);
    // kube-apiserver bumps `generation` when a deletion starts (registry/generic/registry/
    // store.go, markAsDeleting), so that controllers filtering on generation see it.
    if let Some(g) = m
        .get("generation")
        .and_then(Value::as_i64)
        .filter(|g| *g > 0)
    {
        m.insert("generation".into(), json!(g + 1));
    }
    m.insert("deletionTimestamp".into(), json!(now_rfc3339()));
    m.insert("deletionGracePeriodSeconds".into(), json!(0));
    if dry_run {
        return Some(DeleteOutcome::Pending(obj));
    }
    Some(DeleteOutcome::Pending(commit_put(st, key, obj)))
}

/// Namespaces hold on `spec.finalizers` (the namespace controller's `kubernetes`) until emptied.
fn held_by_builtin_cleanup(key: &StoreKey, obj: &Value) -> bool {
    *key == ns_key()
        && obj["spec"]["finalizers"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
}
