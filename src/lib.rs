#![warn(missing_docs)]
//! mailtarget-operator: makes a Mailtarget email-delivery account declarative.
//!
//! The crate is organised by concern:
//! - [`api`]: typed async client for the service's REST interface.
//! - [`simulator`]: an in-memory, interface-faithful stand-in for the service.
//! - [`crd`]: the custom resource types (SubAccount, ApiKey, SendingDomain).
//! - [`manifest`]: reading and validating manifest files.
//! - [`engine`]: the managed-resource engine: one implementation per kind, one driver.
//! - [`offline`]: `plan`/`apply`/`destroy` of manifest files without a cluster.
//! - [`files`]: the one file writer (no symbolic link followed, temp file then rename).
//! - [`text`]: text from outside (manifests, file names, the service) made safe to print.

pub mod api;
pub mod cli;
pub mod controller;
pub mod crd;
pub mod engine;
pub mod failpoints;
pub mod files;
pub mod manifest;
pub mod offline;
pub mod simulator;
pub mod text;
