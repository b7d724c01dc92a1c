//! Test-only Kubernetes API server emulator.
//!
//! [`TestApiServer`] serves the Kubernetes REST API on `127.0.0.1` over plain HTTP, faithfully
//! enough that kubectl 1.32 and kube-rs (`Api`, `watcher`, `reflector`, `Controller`) behave as
//! against a real cluster: discovery, OpenAPI v3 for kubectl, built-in kinds (Namespace, Secret,
//! ConfigMap, Event, Lease, CustomResourceDefinition; Deployment, ServiceAccount, Service, RBAC
//! kinds, PodDisruptionBudget and NetworkPolicy stored only), custom resources served from CRDs created
//! through the API, resourceVersions, watches, finalizers, garbage collection, server-side apply,
//! tables. What it does not simulate it refuses with 501 `not implemented by the test API server`.
//! [`TestCluster`] gives tests one entry point that targets a real cluster when `E2E_KUBECONFIG`
//! is set and an emulator otherwise. See README.md beside Cargo.toml for the full list.

pub mod patch;
pub mod protobuf;
pub mod schema;

mod admission;
mod cluster;
mod convert;
mod crd;
mod discovery;
mod faults;
mod gc;
mod handlers;
mod kubeconfig;
mod names;
mod openapi;
mod ops;
mod resources;
mod selectors;
mod server;
mod status;
mod store;
mod table;
mod watch;

pub use cluster::{KUBECTL_TIMEOUT, KubectlChild, TestCluster};
pub use faults::{Faults, LoggedRequest, RequestFilter};
pub use kubeconfig::kubeconfig_yaml;
pub use server::{ServerOptions, TestApiServer};
