//! Reliability of the operator under injected faults: the service failing and losing answers,
//! the operator crashing and restarting, the Kubernetes API failing, stalling or missing the
//! CRDs, a leader cut off from it, changes made behind the operator's back, invalid manifests
//! and hostile answers. Each test is bounded in time and
//! checks the simulator's objects and request log: nothing duplicated, nothing lost.
//!
//! The promises these tests prove are listed in `docs/guarantees.md`.

mod common;

#[path = "reliability/harness.rs"]
mod harness;

#[path = "reliability/chaos.rs"]
mod chaos;

#[path = "reliability/restarts.rs"]
mod restarts;

#[path = "reliability/kube_faults.rs"]
mod kube_faults;

#[path = "reliability/drift.rs"]
mod drift;

#[path = "reliability/bad_manifests.rs"]
mod bad_manifests;

#[path = "reliability/hostile.rs"]
mod hostile;

#[path = "reliability/stalls.rs"]
mod stalls;

#[path = "reliability/identity.rs"]
mod identity;

#[path = "reliability/leader.rs"]
mod leader;

#[path = "reliability/lifecycle.rs"]
mod lifecycle;
