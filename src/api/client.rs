//! The HTTP machinery of the API client: authentication headers, the request budget, timeouts,
//! bounded body reading, retries of idempotent calls, tracing and the request observer.
//!
//! The endpoint methods live in [`super::ops`], one module per resource.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use backon::{ExponentialBuilder, Retryable};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use secrecy::ExposeSecret;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::Instrument;
use url::Url;

use super::budget::Budget;
use super::config::{ClientConfig, RequestObserver, RetryPolicy, WriteGate};
use super::credential::{Bearer, Credential};
use super::decode;
use super::endpoint::{Endpoint, Host, Verb};
use super::error::{ApiError, Result};
use super::retry_after;

/// Largest error body read to extract `error` and `message`, in bytes.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// Typed async client of the service's interface (every endpoint of the interface document,
/// section "Endpoints").
///
/// Cheap to clone: clones share one connection pool and one request budget (at most
/// `max_concurrency` requests in flight and `requests_per_second` started per second, retries
/// included). Every request carries `Authorization: Bearer <key>`, `Content-Type` and `Accept`
/// `application/json`. `Debug` never shows the key.
///
/// GET, PUT and DELETE calls are retried on 429 (honouring `Retry-After`), 5xx, timeouts and
/// transport errors, with exponential backoff and jitter. POST calls are never retried: a lost
/// answer may mean the object was created, which the caller resolves by looking it up by its
/// natural key.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    api_url: Url,
    transmission_url: Url,
    timeout: Duration,
    retry: RetryPolicy,
    max_response_bytes: usize,
    /// Shared with the clients [`Client::calling_as`] makes: one budget per company.
    budget: Arc<Budget>,
    observer: Option<Arc<dyn RequestObserver>>,
    write_gate: Option<Arc<dyn WriteGate>>,
    /// The key the client sends (fixed, or read from a file again when it changes); also
    /// scrubbed from anything the service answers.
    credential: Credential,
}

impl Client {
    /// True when `self` and `other` are clones of one client (same key, addresses and request
    /// budget, built once).
    pub fn same_as(&self, other: &Client) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Builds a client.
    ///
    /// Installs the `ring` rustls crypto provider as process default if none is installed yet.
    ///
    /// Trusts the system's root certificates plus those of `config.ca_bundle_pem`.
    ///
    /// # Errors
    /// [`ApiError::Config`] when a base URL is not an `http`/`https` URL that can hold a path,
    /// the API key holds characters not allowed in an HTTP header, or the CA bundle holds no
    /// readable certificate.
    pub fn new(config: ClientConfig) -> Result<Client> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        check_base_url("api_url", &config.api_url)?;
        check_base_url("transmission_url", &config.transmission_url)?;

        let credential = match config.api_key_file {
            Some(path) => Credential::file(path, config.api_key, config.key_file_check_interval)?,
            None => Credential::fixed(config.api_key)?,
        };
        let mut builder = reqwest::Client::builder();
        if let Some(pem) = &config.ca_bundle_pem {
            builder = builder.tls_certs_merge(ca_certificates(pem)?);
        }
        let http = builder
            .default_headers(default_headers())
            .user_agent(config.user_agent.as_str())
            .connect_timeout(config.timeout)
            // The management API has no reason to redirect; following one could send the
            // request (and its answer) somewhere unexpected.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|err| ApiError::Config {
                message: describe(&err),
            })?;

        Ok(Client {
            inner: Arc::new(Inner {
                http,
                api_url: config.api_url,
                transmission_url: config.transmission_url,
                timeout: config.timeout,
                retry: config.retry,
                max_response_bytes: config.max_response_bytes,
                budget: Arc::new(Budget::new(
                    config.max_concurrency,
                    config.requests_per_second,
                )),
                observer: config.observer,
                write_gate: config.write_gate,
                credential,
            }),
        })
    }

    /// This account's client calling with `key`, a sub account's credential (product design,
    /// decision "Scope of a key": a call made with a sub account's key acts within that sub
    /// account: what it creates lands there, its lists show only that sub account). The one
    /// place that decides how a call acts as a sub account, so that another mechanism (a
    /// request header) can replace the key without touching the callers.
    ///
    /// The new client shares this one's connection pool, addresses, timeouts, retry policy,
    /// observer, write gate and request budget (one budget per company: calls as any of its
    /// sub accounts take from it); only the key differs.
    ///
    /// # Errors
    /// [`ApiError::Config`] when `key` holds characters not allowed in an HTTP header (the
    /// message never shows the key).
    pub fn calling_as(&self, key: secrecy::SecretString) -> Result<Client> {
        let inner = &self.inner;
        Ok(Client {
            inner: Arc::new(Inner {
                http: inner.http.clone(),
                api_url: inner.api_url.clone(),
                transmission_url: inner.transmission_url.clone(),
                timeout: inner.timeout,
                retry: inner.retry.clone(),
                max_response_bytes: inner.max_response_bytes,
                budget: inner.budget.clone(),
                observer: inner.observer.clone(),
                write_gate: inner.write_gate.clone(),
                credential: Credential::fixed(key)?,
            }),
        })
    }

    /// A 32-byte key derived from the client's credential for `purpose` (SHA-256 of the purpose,
    /// a zero byte and the credential): lets the operator key a digest with something only it
    /// holds, without handing out the credential itself.
    pub fn derived_key(&self, purpose: &str) -> [u8; 32] {
        let mut input = purpose.as_bytes().to_vec();
        input.push(0);
        let bearer = self.inner.credential.current();
        input.extend_from_slice(bearer.key.expose_secret().as_bytes());
        let digest = ring::digest::digest(&ring::digest::SHA256, &input);
        let mut key = [0u8; 32];
        key.copy_from_slice(digest.as_ref());
        key
    }

    /// The entry of `keys` (a key list, which holds the values) whose value is the key this
    /// client calls with now, `None` when the list does not show it: how the account check and
    /// the front ends learn the key's scope (its `subAccountId`).
    pub fn own_entry<'a>(
        &self,
        keys: &'a [crate::api::ApiKeyListItem],
    ) -> Option<&'a crate::api::ApiKeyListItem> {
        let current = self.inner.credential.current();
        let own = current.key.expose_secret();
        keys.iter().find(|k| k.key.expose_secret() == own)
    }

    /// Base URL of the management API.
    pub fn api_url(&self) -> &Url {
        &self.inner.api_url
    }

    /// Base URL of the transmission API.
    pub fn transmission_url(&self) -> &Url {
        &self.inner.transmission_url
    }

    /// A request builder for `endpoint` with the given path segments appended to its base URL
    /// (each segment percent-encoded, `/` included).
    pub(crate) fn request(
        &self,
        endpoint: Endpoint,
        segments: &[&str],
    ) -> Result<reqwest::RequestBuilder> {
        let url = self.url(endpoint, segments)?;
        Ok(self.inner.http.request(endpoint.verb.method(), url))
    }

    /// Adds a JSON body to a request builder.
    pub(crate) fn with_json<B: Serialize + ?Sized>(
        endpoint: Endpoint,
        builder: reqwest::RequestBuilder,
        body: &B,
    ) -> Result<reqwest::RequestBuilder> {
        let bytes = serde_json::to_vec(body).map_err(|err| ApiError::InvalidRequest {
            endpoint: endpoint.label,
            message: format!("cannot encode the body: {err}"),
        })?;
        Ok(builder.body(bytes))
    }

    /// Sends a request (with retries when idempotent) and decodes the JSON answer into `T`.
    pub(crate) async fn call<T: DeserializeOwned>(
        &self,
        endpoint: Endpoint,
        builder: reqwest::RequestBuilder,
    ) -> Result<T> {
        let body = self.execute(endpoint, builder).await?;
        decode::decode(endpoint.label, &body)
    }

    /// Sends a request (with retries when idempotent) and returns the raw body of the 2xx
    /// answer.
    pub(crate) async fn execute(
        &self,
        endpoint: Endpoint,
        builder: reqwest::RequestBuilder,
    ) -> Result<Vec<u8>> {
        let request = builder.build().map_err(|err| ApiError::InvalidRequest {
            endpoint: endpoint.label,
            message: describe(&err),
        })?;
        let attempts = AtomicUsize::new(0);
        let run = || {
            let attempt = attempts.fetch_add(1, Ordering::Relaxed) + 1;
            let request = request.try_clone();
            async move {
                let request = request.ok_or_else(|| ApiError::InvalidRequest {
                    endpoint: endpoint.label,
                    message: "the request body cannot be sent again".to_owned(),
                })?;
                self.attempt(endpoint, request, attempt).await
            }
        };
        let policy = &self.inner.retry;
        if !endpoint.verb.is_idempotent() || policy.max_retries == 0 {
            return run().await;
        }
        let max_backoff = policy.max_backoff;
        let backoff = ExponentialBuilder::new()
            .with_min_delay(policy.initial_backoff)
            .with_max_delay(policy.max_backoff)
            .with_max_times(policy.max_retries)
            .with_jitter();
        run.retry(backoff)
            .sleep(tokio::time::sleep)
            .when(ApiError::is_retryable)
            .adjust(move |err, delay| retry_delay(err, delay, max_backoff))
            .notify(|err, delay| {
                tracing::debug!(
                    endpoint = endpoint.label,
                    error = err.category(),
                    delay_ms = millis(delay),
                    "retrying"
                );
            })
            .await
    }

    /// One attempt: takes from the budget, sends with the current key, reads the body within
    /// the timeout, reports to the observer and traces the outcome.
    async fn attempt(
        &self,
        endpoint: Endpoint,
        mut request: reqwest::Request,
        attempt: usize,
    ) -> Result<Vec<u8>> {
        // Taken per attempt: a key file rotated between two attempts is used by the next one.
        let bearer = self.inner.credential.current();
        request
            .headers_mut()
            .insert(AUTHORIZATION, bearer.header.clone());
        let span = tracing::debug_span!("mailtarget_api", endpoint = endpoint.label, attempt);
        async move {
            let _slot = self.inner.budget.acquire().await;
            let time_limit = self.time_limit(endpoint)?;
            let started = Instant::now();
            let mut status = None;
            let outcome = tokio::time::timeout(
                time_limit,
                self.exchange(endpoint, request, &bearer, &mut status),
            )
            .await;
            let result = outcome.unwrap_or(Err(ApiError::Timeout {
                endpoint: endpoint.label,
                after: time_limit,
            }));
            let elapsed = started.elapsed();
            if let Some(observer) = &self.inner.observer {
                observer.on_response(endpoint.label, status, elapsed);
            }
            let elapsed_ms = millis(elapsed);
            match &result {
                Ok(_) => tracing::debug!(status, elapsed_ms, "request succeeded"),
                Err(err) => tracing::debug!(
                    status,
                    elapsed_ms,
                    error = err.category(),
                    detail = %err,
                    "request failed"
                ),
            }
            result
        }
        .instrument(span)
        .await
    }

    /// The time limit of an attempt now: the configured timeout, cut to the write gate's
    /// deadline for a write.
    ///
    /// Errors: [`ApiError::NotWritable`] when the gate refuses the write.
    fn time_limit(&self, endpoint: Endpoint) -> Result<Duration> {
        let timeout = self.inner.timeout;
        let Some(gate) = self
            .inner
            .write_gate
            .as_ref()
            .filter(|_| endpoint.verb != Verb::Get)
        else {
            return Ok(timeout);
        };
        match gate.time_left() {
            Some(left) => Ok(timeout.min(left)),
            None => {
                tracing::debug!(endpoint = endpoint.label, "write refused by the write gate");
                Err(ApiError::NotWritable {
                    endpoint: endpoint.label,
                })
            }
        }
    }

    /// Sends the request and reads the answer; records the status as soon as it is known.
    /// `bearer` is the key the request carries, scrubbed from error answers.
    async fn exchange(
        &self,
        endpoint: Endpoint,
        request: reqwest::Request,
        bearer: &Bearer,
        status: &mut Option<u16>,
    ) -> Result<Vec<u8>> {
        let response = self
            .inner
            .http
            .execute(request)
            .await
            .map_err(|err| self.transport_error(endpoint, err))?;
        let code = response.status().as_u16();
        *status = Some(code);
        if response.status().is_success() {
            if code != endpoint.success {
                tracing::debug!(
                    expected = endpoint.success,
                    got = code,
                    "success status differs from the documented one"
                );
            }
            let limit = self.inner.max_response_bytes;
            let body = decode::read_capped(response, limit)
                .await
                .map_err(|err| self.transport_error(endpoint, err))?;
            if body.truncated {
                return Err(ApiError::TooLarge {
                    endpoint: endpoint.label,
                    limit,
                });
            }
            Ok(body.bytes)
        } else {
            let retry_after = retry_after::from_headers(response.headers(), SystemTime::now());
            let limit = MAX_ERROR_BODY_BYTES.min(self.inner.max_response_bytes);
            // The status decides the error; a body that cannot be read only loses the message.
            let body = decode::read_capped(response, limit)
                .await
                .map(|body| body.bytes)
                .unwrap_or_default();
            // Redacted in the whole body before it is parsed and cut, then in the parsed texts.
            let credential = bearer.key.expose_secret();
            let body = if credential.is_empty() {
                body
            } else {
                String::from_utf8_lossy(&body)
                    .replace(credential, "[REDACTED]")
                    .into_bytes()
            };
            Err(
                ApiError::from_status(endpoint.label, code, retry_after, &body)
                    .scrubbed(credential),
            )
        }
    }

    /// Maps a reqwest failure to a timeout, an invalid request or a transport error.
    fn transport_error(&self, endpoint: Endpoint, err: reqwest::Error) -> ApiError {
        if err.is_timeout() {
            ApiError::Timeout {
                endpoint: endpoint.label,
                after: self.inner.timeout,
            }
        } else if err.is_builder() {
            ApiError::InvalidRequest {
                endpoint: endpoint.label,
                message: describe(&err.without_url()),
            }
        } else {
            let err = err.without_url();
            // Where it tried, without the URL's user information or path.
            let origin = match endpoint.host {
                Host::Api => self.inner.api_url.origin(),
                Host::Transmission => self.inner.transmission_url.origin(),
            };
            let at = format!(" (reaching {})", origin.ascii_serialization());
            let message = match untrusted_certificate(&err) {
                Some(problem) => format!(
                    "the server's TLS certificate is not trusted ({problem}); if the API is reached through a proxy or gateway with its own certificate authority, give that CA's certificate with --ca-bundle (MAILTARGET_CA_BUNDLE)"
                ),
                None => describe(&err),
            };
            ApiError::Transport {
                endpoint: endpoint.label,
                message: message + &at,
            }
        }
    }

    /// The base URL of the endpoint with `segments` appended.
    fn url(&self, endpoint: Endpoint, segments: &[&str]) -> Result<Url> {
        let mut url = match endpoint.host {
            Host::Api => self.inner.api_url.clone(),
            Host::Transmission => self.inner.transmission_url.clone(),
        };
        url.path_segments_mut()
            .map_err(|()| ApiError::InvalidRequest {
                endpoint: endpoint.label,
                message: "the base URL cannot hold a path".to_owned(),
            })?
            .pop_if_empty()
            .extend(segments);
        Ok(url)
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("api_url", &self.inner.api_url.as_str())
            .field("transmission_url", &self.inner.transmission_url.as_str())
            .field("api_key", &"[REDACTED]")
            .field("timeout", &self.inner.timeout)
            .field("retry", &self.inner.retry)
            .field("max_response_bytes", &self.inner.max_response_bytes)
            .finish_non_exhaustive()
    }
}

/// A duration in whole milliseconds, for logs.
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The delay before the next retry: backon's `delay` (`None` when the retries are used up,
/// which stays `None`), replaced by the `Retry-After` of a 429, and capped by `max_backoff`.
fn retry_delay(err: &ApiError, delay: Option<Duration>, max_backoff: Duration) -> Option<Duration> {
    let delay = match err {
        ApiError::RateLimited {
            retry_after: Some(retry_after),
            ..
        } => delay.map(|_| *retry_after),
        _ => delay,
    };
    delay.map(|delay| delay.min(max_backoff))
}

/// The fixed headers of every request: `Content-Type` and `Accept` `application/json` (the
/// interface document, section "Authentication"). `Authorization: Bearer <key>` is added per
/// attempt, from [`Credential::current`].
fn default_headers() -> HeaderMap {
    let json = HeaderValue::from_static("application/json");
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, json.clone());
    headers.insert(ACCEPT, json);
    headers
}

/// The certificates of a PEM bundle.
///
/// # Errors
/// [`ApiError::Config`] when the PEM cannot be parsed or holds no `CERTIFICATE` block.
fn ca_certificates(pem: &[u8]) -> Result<Vec<reqwest::Certificate>> {
    let certs = reqwest::Certificate::from_pem_bundle(pem).map_err(|err| ApiError::Config {
        message: format!("the CA bundle cannot be read: {}", describe(&err)),
    })?;
    if certs.is_empty() {
        return Err(ApiError::Config {
            message: "the CA bundle holds no PEM CERTIFICATE block".to_owned(),
        });
    }
    Ok(certs)
}

/// The rustls certificate error somewhere in `err`'s sources, described, when the connection
/// failed because the server's certificate was refused. rustls errors travel inside (nested)
/// `std::io::Error`s, whose `source` skips the error they wrap, so those are unwrapped with
/// `get_ref` instead.
fn untrusted_certificate(err: &(dyn StdError + 'static)) -> Option<String> {
    if let Some(tls @ rustls::Error::InvalidCertificate(_)) = err.downcast_ref::<rustls::Error>() {
        return Some(tls.to_string());
    }
    let wrapped = err
        .downcast_ref::<std::io::Error>()
        .and_then(|io| io.get_ref())
        .map(|inner| inner as &(dyn StdError + 'static));
    wrapped
        .or_else(|| err.source())
        .and_then(untrusted_certificate)
}

/// Checks that a base URL is `http`/`https` and can hold a path.
fn check_base_url(name: &str, url: &Url) -> Result<()> {
    if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() {
        return Err(ApiError::Config {
            message: format!(
                "{name} must be an http or https URL, got scheme {:?}",
                url.scheme()
            ),
        });
    }
    Ok(())
}

/// An error and its sources, joined with `: `, skipping repeats.
pub(crate) fn describe(err: &(dyn StdError + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut current = Some(err);
    while let Some(err) = current {
        let text = err.to_string();
        if !parts.iter().any(|part| part.contains(&text)) {
            parts.push(text);
        }
        current = err.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::endpoint::{
        GET_API_KEY, LIST_API_KEYS, SEND_TRANSMISSION, TRANSMISSION_STATUS,
    };
    use secrecy::SecretString;

    fn client(api: &str, transmission: &str) -> Client {
        let config = ClientConfig::new(
            Url::parse(api).unwrap(),
            Url::parse(transmission).unwrap(),
            SecretString::from("sk-test-SECRET"),
        );
        Client::new(config).unwrap()
    }

    /// Paths are appended to the base, with or without a trailing slash, and ids are encoded.
    #[test]
    fn urls_are_built_from_segments() {
        let c = client("https://api.example/", "https://tx.example/v1");
        let url = c.url(GET_API_KEY, &["api-key", "42"]).unwrap();
        assert_eq!(url.as_str(), "https://api.example/api-key/42");
        let url = c
            .url(SEND_TRANSMISSION, &["layang", "transmissions"])
            .unwrap();
        assert_eq!(url.as_str(), "https://tx.example/v1/layang/transmissions");
        let url = c
            .url(
                TRANSMISSION_STATUS,
                &["analytic", "transmission", "a/b?c#d e%"],
            )
            .unwrap();
        assert_eq!(
            url.as_str(),
            "https://api.example/analytic/transmission/a%2Fb%3Fc%23d%20e%25"
        );
        let c = client("http://127.0.0.1:8080/prefix/", "https://tx.example/v1/");
        let url = c.url(LIST_API_KEYS, &["api-key"]).unwrap();
        assert_eq!(url.as_str(), "http://127.0.0.1:8080/prefix/api-key");
        let url = c
            .url(SEND_TRANSMISSION, &["layang", "transmissions"])
            .unwrap();
        assert_eq!(url.as_str(), "https://tx.example/v1/layang/transmissions");
    }

    /// Requests carry the documented JSON headers (the key is added per attempt).
    #[test]
    fn default_headers_are_json() {
        let headers = default_headers();
        assert_eq!(headers.get(CONTENT_TYPE).unwrap(), "application/json");
        assert_eq!(headers.get(ACCEPT).unwrap(), "application/json");
        assert!(headers.get(AUTHORIZATION).is_none());
    }

    /// A CA bundle without a certificate is refused with a message saying so.
    #[test]
    fn empty_ca_bundle_is_refused() {
        let mut config = ClientConfig::new(
            Url::parse("https://api.example").unwrap(),
            Url::parse("https://tx.example").unwrap(),
            SecretString::from("k"),
        );
        config.ca_bundle_pem = Some(b"not a certificate\n".to_vec());
        let err = Client::new(config).unwrap_err();
        assert_eq!(err.category(), "config");
        assert!(err.to_string().contains("CA bundle"), "{err}");
    }

    /// Unusable configurations are refused without echoing the key.
    #[test]
    fn bad_configuration_is_refused() {
        let bad_scheme = ClientConfig::new(
            Url::parse("ftp://api.example").unwrap(),
            Url::parse("https://tx.example").unwrap(),
            SecretString::from("k"),
        );
        assert_eq!(Client::new(bad_scheme).unwrap_err().category(), "config");
        let bad_key = ClientConfig::new(
            Url::parse("https://api.example").unwrap(),
            Url::parse("https://tx.example").unwrap(),
            SecretString::from("sk-SECRET\nInjected: yes"),
        );
        let err = Client::new(bad_key).unwrap_err();
        assert_eq!(err.category(), "config");
        assert!(!err.to_string().contains("SECRET"));
    }

    /// Retry-After replaces the backoff delay, within `max_backoff`; exhausted retries stay
    /// exhausted.
    #[test]
    fn retry_delay_honours_retry_after_within_cap() {
        let cap = Duration::from_secs(10);
        let limited = |secs| ApiError::RateLimited {
            endpoint: "GET /x",
            retry_after: Some(Duration::from_secs(secs)),
        };
        let backoff = Some(Duration::from_millis(200));
        assert_eq!(
            retry_delay(&limited(3), backoff, cap),
            Some(Duration::from_secs(3))
        );
        assert_eq!(retry_delay(&limited(60), backoff, cap), Some(cap));
        assert_eq!(retry_delay(&limited(3), None, cap), None);
        let no_header = ApiError::RateLimited {
            endpoint: "GET /x",
            retry_after: None,
        };
        assert_eq!(retry_delay(&no_header, backoff, cap), backoff);
        let server = ApiError::from_status("GET /x", 503, None, b"");
        assert_eq!(
            retry_delay(&server, Some(Duration::from_secs(30)), cap),
            Some(cap)
        );
    }

    /// Debug output of the client never contains the key.
    #[test]
    fn debug_is_redacted() {
        let c = client("https://api.example", "https://tx.example/v1");
        let debug = format!("{c:?}");
        assert!(!debug.contains("SECRET"), "{debug}");
        assert!(debug.contains("api.example"), "{debug}");
    }
}
