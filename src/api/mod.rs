//! Typed async client of the service's REST interface (the interface document: API keys, sub
//! accounts, transmission, sending domains, analytics).
//!
//! - [`Client`]: one per account; shares a connection pool and a request budget across clones.
//! - [`ClientConfig`]: addresses, key, timeout, retries, budget, body cap, observer.
//! - [`types`]: the wire types, field for field as the interface document names them.
//! - [`ApiError`]: what can go wrong, with a fixed [`ApiError::category`] label for metrics.
//!
//! ```no_run
//! # async fn demo() -> mailtarget_operator::api::Result<()> {
//! use mailtarget_operator::api::{Client, ClientConfig, ListSubAccountsQuery};
//! let config = ClientConfig::with_default_urls("sk-...".to_owned().into());
//! let client = Client::new(config)?;
//! let all = client.list_all_sub_accounts(&ListSubAccountsQuery::default()).await?;
//! # let _ = all;
//! # Ok(()) }
//! ```

mod budget;
mod client;
mod config;
mod credential;
mod decode;
mod endpoint;
mod error;
mod object;
mod ops;
mod retry_after;
pub mod types;

pub use client::Client;
pub(crate) use client::describe as describe_error;
pub use config::{ClientConfig, RequestObserver, RetryPolicy, WriteGate};
pub use credential::read_key_file;
pub use error::{ApiError, Result};
pub use object::ApiObject;
pub use ops::LIST_ALL_PAGE_SIZE;
pub use types::*;
