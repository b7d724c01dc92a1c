//! The test API server's behaviour, checked through raw HTTP, kube-rs and the real kubectl. One
//! test binary (one link, one build shared by every module); `cluster.rs` stays apart because it
//! sets a process-wide environment variable.
//!
//! Run one part with `cargo test -p mailtarget-test-apiserver --test api <module>::`, e.g.
//! `watch::`.

mod common;

mod cluster_scoped;
mod discovery;
mod finalizers_gc;
mod kube_runtime;
mod kubectl;
mod kubectl_protobuf;
mod lists_tables_faults;
mod objects;
mod patch;
mod schema;
mod stored_kinds;
mod watch;
