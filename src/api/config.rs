//! Configuration of the API client: addresses, credentials, timeouts, retries and the request
//! budget.

use std::fmt;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use secrecy::SecretString;
use url::Url;

/// Receives one call per HTTP attempt (retries included), e.g. to count requests by endpoint and
/// status code for Prometheus.
pub trait RequestObserver: Send + Sync {
    /// Called when an attempt ends.
    ///
    /// - `endpoint`: method and path template, e.g. `"POST /api-key"` or
    ///   `"GET /api-key/{id}"` (never an id, so it is safe as a metric label);
    /// - `status`: the HTTP status, or `None` when no answer arrived (timeout, transport error);
    /// - `elapsed`: time from sending the request to the end of the body (or the failure).
    fn on_response(&self, endpoint: &'static str, status: Option<u16>, elapsed: Duration);

    /// The observer for the clients of one account, `account` naming it (e.g.
    /// `ClusterAccount/default`, `Account/team-a/billing`): an observer that tells accounts apart
    /// returns one that reports under that name. `None` (the default): this observer serves
    /// every account as it is.
    fn for_account(&self, account: &str) -> Option<Arc<dyn RequestObserver>> {
        let _ = account;
        None
    }
}

/// Decides whether the client may send a write (POST, PUT, DELETE) now, and until when: the
/// operator's leader election ([`crate::controller::leader`]) lets only the Lease holder write,
/// and only until its renew deadline. Asked before each attempt, after the request budget let it
/// go; the attempt's time limit is cut to that instant, so no write is in flight past it. A
/// refused write fails with [`ApiError::NotWritable`](crate::api::ApiError::NotWritable)
/// without being sent. Reads are never gated.
pub trait WriteGate: Send + Sync {
    /// The instant until which writes may be sent (by the monotonic clock), or `None` when they
    /// may not be sent at all.
    fn writable_until(&self) -> Option<std::time::Instant>;

    /// The time a write may still take now, or `None` when it may not be sent (no deadline, or
    /// the deadline has passed).
    fn time_left(&self) -> Option<Duration> {
        self.writable_until()
            .and_then(|until| until.checked_duration_since(std::time::Instant::now()))
            .filter(|left| !left.is_zero())
    }
}

/// Retry policy for idempotent calls (GET, PUT, DELETE) on 429, 5xx, timeouts and transport
/// errors: exponential backoff with jitter, honouring `Retry-After` on 429.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 disables retries). Default 4.
    pub max_retries: usize,
    /// Delay before the first retry, doubled on each further retry (plus jitter). Default 200 ms.
    pub initial_backoff: Duration,
    /// Upper bound of any single delay, `Retry-After` included. Default 10 s.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 4,
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn none() -> Self {
        Self {
            max_retries: 0,
            ..Self::default()
        }
    }
}

/// Configuration of a [`Client`](crate::api::Client). Build it with [`ClientConfig::new`] and
/// adjust the public fields.
///
/// `Debug` never shows the API key.
#[derive(Clone)]
pub struct ClientConfig {
    /// Base URL of the management API (API keys, sub accounts, sending domains, analytics).
    pub api_url: Url,
    /// Base URL of the transmission API, version segment included (e.g. `.../v1`).
    pub transmission_url: Url,
    /// Company API key, sent as `Authorization: Bearer <key>`. With `api_key_file` set, the
    /// key as last read from that file.
    pub api_key: SecretString,
    /// A file holding the company API key (surrounding whitespace ignored), read again before
    /// a request whenever the file changed, so that a rotated key (a mounted Kubernetes Secret
    /// the kubelet updates) is used without a restart. Set with [`Self::from_key_file`].
    pub api_key_file: Option<PathBuf>,
    /// PEM certificates (one or more `CERTIFICATE` blocks) trusted as roots in addition to the
    /// system's, e.g. the CA of a TLS-inspecting proxy in front of the API.
    pub ca_bundle_pem: Option<Vec<u8>>,
    /// Time limit of one attempt, from sending the request to the end of the answer body.
    /// Default 30 s.
    pub timeout: Duration,
    /// `User-Agent` header. Default `mailtarget-operator/<crate version>`.
    pub user_agent: String,
    /// Retry policy of idempotent calls.
    pub retry: RetryPolicy,
    /// Most requests in flight at once for this client (= this account). Default 8; 0 counts
    /// as 1.
    pub max_concurrency: usize,
    /// Most requests started per second for this client, when set. Retries count too.
    pub requests_per_second: Option<NonZeroU32>,
    /// Largest accepted answer body, in bytes; larger bodies fail with
    /// [`ApiError::TooLarge`](crate::api::ApiError::TooLarge). Default 8 MiB.
    pub max_response_bytes: usize,
    /// Receives one call per attempt, for metrics.
    pub observer: Option<Arc<dyn RequestObserver>>,
    /// Gates every write (`None`: writes always allowed). See [`WriteGate`].
    pub write_gate: Option<Arc<dyn WriteGate>>,
    /// Least time between two checks of [`Self::api_key_file`] for a change (one `stat` each):
    /// a rotated key is used at most this long after the file changed. Default 1 s.
    pub key_file_check_interval: Duration,
}

impl ClientConfig {
    /// Default management API address (the product design, section "Configuration").
    pub const DEFAULT_API_URL: &str = "https://apiconfig.mailtarget.co";
    /// Default transmission API address, version segment included.
    pub const DEFAULT_TRANSMISSION_URL: &str = "https://transmission.mailtarget.co/v1";
    /// Default time limit of one attempt.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
    /// Default cap of answer bodies: 8 MiB.
    pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;
    /// Default least time between two checks of the key file.
    pub const DEFAULT_KEY_FILE_CHECK_INTERVAL: Duration = Duration::from_secs(1);
    /// Default number of requests in flight.
    pub const DEFAULT_MAX_CONCURRENCY: usize = 8;

    /// A configuration with the given addresses and key and every other setting at its default.
    pub fn new(api_url: Url, transmission_url: Url, api_key: SecretString) -> Self {
        Self {
            api_url,
            transmission_url,
            api_key,
            api_key_file: None,
            ca_bundle_pem: None,
            timeout: Self::DEFAULT_TIMEOUT,
            user_agent: concat!("mailtarget-operator/", env!("CARGO_PKG_VERSION")).to_owned(),
            retry: RetryPolicy::default(),
            max_concurrency: Self::DEFAULT_MAX_CONCURRENCY,
            requests_per_second: None,
            max_response_bytes: Self::DEFAULT_MAX_RESPONSE_BYTES,
            observer: None,
            write_gate: None,
            key_file_check_interval: Self::DEFAULT_KEY_FILE_CHECK_INTERVAL,
        }
    }

    /// A configuration for Mailtarget's public addresses ([`Self::DEFAULT_API_URL`] and
    /// [`Self::DEFAULT_TRANSMISSION_URL`]).
    ///
    /// # Panics
    /// Never: both addresses are constants, checked by a unit test.
    pub fn with_default_urls(api_key: SecretString) -> Self {
        // Both are compile-time constants checked by a unit test; not outside data.
        let parse = |s: &str| Url::parse(s).expect("default URL constants are valid");
        Self::new(
            parse(Self::DEFAULT_API_URL),
            parse(Self::DEFAULT_TRANSMISSION_URL),
            api_key,
        )
    }

    /// A configuration whose key is read from `path` now and again whenever the file changes
    /// (see [`Self::api_key_file`]), every other setting at its default.
    ///
    /// # Errors
    /// [`ApiError::Config`](crate::api::ApiError::Config) naming the file when it cannot be
    /// read or is empty.
    pub fn from_key_file(
        api_url: Url,
        transmission_url: Url,
        path: PathBuf,
    ) -> crate::api::Result<Self> {
        let key = super::credential::read_key_file(&path)?;
        let mut config = Self::new(api_url, transmission_url, key);
        config.api_key_file = Some(path);
        Ok(config)
    }

    /// Sets the observer (builder style).
    pub fn with_observer(mut self, observer: Arc<dyn RequestObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Sets the write gate (builder style).
    pub fn with_write_gate(mut self, gate: Arc<dyn WriteGate>) -> Self {
        self.write_gate = Some(gate);
        self
    }
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientConfig")
            .field("api_url", &self.api_url.as_str())
            .field("transmission_url", &self.transmission_url.as_str())
            .field("api_key", &"[REDACTED]")
            .field("api_key_file", &self.api_key_file)
            .field("ca_bundle_pem", &self.ca_bundle_pem.as_ref().map(Vec::len))
            .field("timeout", &self.timeout)
            .field("user_agent", &self.user_agent)
            .field("retry", &self.retry)
            .field("max_concurrency", &self.max_concurrency)
            .field("requests_per_second", &self.requests_per_second)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("observer", &self.observer.as_ref().map(|_| "set"))
            .field("write_gate", &self.write_gate.as_ref().map(|_| "set"))
            .field("key_file_check_interval", &self.key_file_check_interval)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default addresses parse and the key never shows in Debug.
    #[test]
    fn defaults_and_redaction() {
        let config = ClientConfig::with_default_urls(SecretString::from("sk-very-secret"));
        assert_eq!(config.api_url.as_str(), "https://apiconfig.mailtarget.co/");
        assert_eq!(
            config.transmission_url.as_str(),
            "https://transmission.mailtarget.co/v1"
        );
        assert_eq!(config.timeout, Duration::from_secs(30));
        assert_eq!(config.retry, RetryPolicy::default());
        assert_eq!(config.max_concurrency, 8);
        assert_eq!(config.max_response_bytes, 8 * 1024 * 1024);
        assert!(config.user_agent.starts_with("mailtarget-operator/"));
        let debug = format!("{config:?}");
        assert!(!debug.contains("sk-very-secret"), "{debug}");
        assert!(debug.contains("REDACTED"));
    }
}
