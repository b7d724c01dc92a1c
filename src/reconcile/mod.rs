//! The reconcile engine shared by the controller and by `plan`/`apply`.
//!
//! Each kind is a pipeline: validate the spec into a `Desired` value (pure), find the matching
//! API object in an [`inventory::Inventory`] (by `mailtarget.co/external-id`, then `status.id`,
//! then the natural key), compute a [`plan::Plan`] (pure: create, update with the field diff, or
//! nothing), and execute it through the API client.

pub mod plan;
pub mod subaccount;

pub use plan::{Action, Plan};
