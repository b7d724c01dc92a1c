//! Fail points between the steps of a reconcile, for crash testing (the `fail` crate; active
//! only with the `failpoints` feature, compiled to nothing otherwise). A test configures one
//! with `fail::cfg(NAME, "panic")` to kill the operator exactly there, then starts a new one
//! and checks that the result is the same as without the crash.
//!
//! The points of a create, in order:
//! 1. [`AFTER_CREATE_PENDING`]: the pending-create marker is written, the POST not sent;
//! 2. [`AFTER_CONVERGE`]: the service answered (the object exists), nothing records its id;
//! 3. [`AFTER_STATUS`]: `status.id` holds the id, the `external-id` annotation does not.

/// After `mailtarget.co/create-pending` is written, before the create call.
pub const AFTER_CREATE_PENDING: &str = "after-create-pending";
/// After a kind's converge step returned (its API calls made), before the status write.
pub const AFTER_CONVERGE: &str = "after-converge";
/// After the status write, before the identity is recorded in metadata.
pub const AFTER_STATUS: &str = "after-status";

/// Every fail point, in the order a create passes them.
pub const ALL: [&str; 3] = [AFTER_CREATE_PENDING, AFTER_CONVERGE, AFTER_STATUS];
