//! An in-memory, interface-faithful stand-in for the Mailtarget service.
//!
//! [`Simulator::start`] runs an HTTP server that implements every endpoint of the interface
//! document (API keys, sub accounts, transmission, sending domains, analytics) with its exact
//! paths, field names, quirks and status codes, keeping all objects in memory. Where the
//! interface says "not shown", the simulator follows the project's design decisions and the
//! rules documented in `docs/simulator.md` (deterministic event rules, 400 `NOT_FOUND` for
//! unknown ids, `size` capped at 100, ...).
//!
//! The management API is served under `/` ([`Simulator::base_url`]); the transmission
//! endpoint is served both at `/layang/transmissions` and `/v1/layang/transmissions`
//! ([`Simulator::transmission_url`] ends in `/v1`). Control endpoints under `/_simulator`
//! (fault injection, request log) are documented in [`admin`]'s module docs.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use mailtarget_operator::simulator::{Simulator, SimulatorConfig};
//! let sim = Simulator::start(SimulatorConfig::new("company-key")).await?;
//! println!("management API at {}", sim.base_url());
//! sim.shutdown().await;
//! # Ok(()) }
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub mod admin;
mod analytics;
mod api_keys;
mod auth;
mod body;
pub mod cli;
mod config;
mod dkim;
pub mod errors;
mod events;
mod faults;
pub mod paging;
mod record;
mod request_log;
mod sending_domains;
mod server;
mod state;
mod sub_accounts;
mod tls;
mod transmission;
mod validate;

pub use api_keys::{PERMISSIONS, Permission};
pub use body::{MAX_CONTROL_BODY_BYTES, MAX_MANAGEMENT_BODY_BYTES, MAX_TRANSMISSION_BODY_BYTES};
pub use config::{SimulatorConfig, TlsIdentity};
pub use events::{BOUNCE_REASON, SUPPRESSED_REASON, USER_AGENT};
pub use faults::{FaultConfig, FaultHandle};
pub use record::{
    Event, EventKind, MAX_ADDRESS_BYTES, MAX_RECIPIENTS, MAX_SENDER_NAME_CHARS,
    MAX_STORED_TRANSMISSION_BYTES, MAX_SUBJECT_CHARS, MAX_TRACKED_URL_BYTES, RecordedEvent,
    Transmission,
};
pub use request_log::RequestRecord;
pub use sending_domains::{CNAME_VALUE, DKIM_SELECTOR, SPF_VALUE};
pub use state::{
    API_KEY_LENGTH, ApiKey, COMPANY_ID, COMPANY_NAME, COMPANY_SUB_ACCOUNT_ID, SendingDomain,
    SimulatorState, SubAccount,
};
pub use validate::MAX_NAME_CHARS;

use server::Shared;

/// How long [`Simulator::shutdown`] waits for open requests before stopping hard.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// A running simulator. Dropping it (or [`shutdown`](Self::shutdown)) stops the server.
pub struct Simulator {
    addr: SocketAddr,
    /// `https` when serving TLS, else `http`.
    scheme: &'static str,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Simulator {
    /// Binds `config.listen` and starts serving in a background task of the current Tokio
    /// runtime: HTTPS (rustls, through axum-server) when `config.tls` is set, else HTTP.
    ///
    /// # Errors
    /// The bind error when the address cannot be used; `InvalidInput` when the TLS
    /// certificate or key cannot be used.
    pub async fn start(config: SimulatorConfig) -> std::io::Result<Simulator> {
        let listener = tokio::net::TcpListener::bind(config.listen).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::new(&config));
        let app = server::router(shared.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        // Either an explicit stop or the Simulator being dropped.
        let stopped = async move {
            let _ = stopped.await;
        };
        let (task, scheme) = match &config.tls {
            None => {
                let serve = axum::serve(
                    listener,
                    app.into_make_service_with_connect_info::<SocketAddr>(),
                )
                .with_graceful_shutdown(stopped);
                let task = tokio::spawn(async move {
                    if let Err(error) = serve.await {
                        tracing::warn!(%error, "simulator server stopped with an error");
                    }
                });
                (task, "http")
            }
            Some(identity) => (tls::serve(listener, identity, app, stopped).await?, "https"),
        };
        Ok(Simulator {
            addr,
            scheme,
            shared,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The bound address (with the real port when `listen` used port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Base URL of the management API: `http://ADDR` (`https://ADDR` with TLS).
    pub fn base_url(&self) -> String {
        format!("{}://{}", self.scheme, self.addr)
    }

    /// Base URL of the transmission API: `http://ADDR/v1` (`https://` with TLS; the interface
    /// document, section "Versioning").
    pub fn transmission_url(&self) -> String {
        format!("{}://{}/v1", self.scheme, self.addr)
    }

    /// Every interface request so far, in arrival order (control requests are not logged).
    pub fn request_log(&self) -> Vec<RequestRecord> {
        self.shared.log.records()
    }

    /// Empties the request log.
    pub fn clear_request_log(&self) {
        self.shared.log.clear();
    }

    /// The highest number of interface requests that were in flight at the same time
    /// (counting simulated latency).
    pub fn max_concurrent_requests(&self) -> usize {
        self.shared.log.max_concurrent()
    }

    /// A copy of every stored object, for assertions.
    pub fn snapshot(&self) -> SimulatorState {
        self.shared.store().state.clone()
    }

    /// A handle to change fault injection while the simulator runs.
    pub fn faults(&self) -> FaultHandle {
        self.shared.faults.clone()
    }

    /// Stops accepting connections, lets open requests finish (up to 5 seconds) and returns.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(SHUTDOWN_GRACE, &mut task)
                .await
                .is_err()
        {
            task.abort();
        }
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl std::fmt::Debug for Simulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulator")
            .field("addr", &self.addr)
            .finish()
    }
}
