//! `plan` and `apply` of manifest files without a cluster.
//!
//! [`plan::build`] reads the account once with the list endpoints (see
//! [`crate::engine::inventory`]), matches every manifest to its API object and computes what
//! to do; [`apply::run`] executes that plan in dependency order (sub accounts, then API keys,
//! then sending domains) and reports IDs, DNS records and verification flags. Secret material
//! is never printed; `--secrets-dir` writes it to files readable only by the owner (see
//! `secret_files`).

pub mod accounts;
pub mod apply;
pub mod cli;
pub mod destroy;
pub mod guards;
mod inside;
pub mod plan;
pub mod render;
mod secret_files;
mod twins;

pub use apply::{ApplyReport, Outcome};
pub use plan::{Entry, OfflinePlan, Summary};
