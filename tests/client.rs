//! The API client against the simulator (every endpoint, paging, errors, retries, the request
//! budget, a rotated key file, TLS with a private CA) and against a hostile raw TCP server
//! (oversized, malformed, truncated and never-ending answers).

use std::future::Future;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::join_all;
use mailtarget_operator::api::{
    AnalyticsQuery, ApiError, BreakdownQuery, Client, ClientConfig, CreateApiKey,
    CreateSendingDomain, CreateSubAccount, EmailAddress, ListApiKeysQuery, ListSendingDomainsQuery,
    ListSubAccountsQuery, OptionsAttributes, RequestObserver, RetryPolicy, Transmission,
    UpdateApiKey, UpdateSubAccount,
};
use mailtarget_operator::simulator::{FaultConfig, RequestRecord, Simulator, SimulatorConfig};
use secrecy::{ExposeSecret, SecretString};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use url::Url;

#[path = "client/key_file.rs"]
mod key_file;
#[path = "client/tls.rs"]
mod tls;

/// The simulator's company key.
const COMPANY_KEY: &str = "company-key-SECRET-0123456789";

/// Upper bound of every test body.
const TEST_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs a test body with a time limit, so a hang fails instead of blocking the suite.
async fn bounded<F: Future<Output = ()>>(body: F) {
    tokio::time::timeout(TEST_TIMEOUT, body)
        .await
        .expect("test finished within its time limit");
}

/// A client configuration for `sim` with fast retries.
fn config_for(sim: &Simulator, key: &str) -> ClientConfig {
    let mut config = ClientConfig::new(
        Url::parse(&sim.base_url()).unwrap(),
        Url::parse(&sim.transmission_url()).unwrap(),
        SecretString::from(key.to_owned()),
    );
    config.timeout = Duration::from_secs(10);
    config.retry = RetryPolicy {
        max_retries: 4,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(20),
    };
    config
}

/// A simulator and a company client for it.
async fn start() -> (Simulator, Client) {
    let sim = Simulator::start(SimulatorConfig::new(COMPANY_KEY))
        .await
        .expect("simulator starts");
    let client = Client::new(config_for(&sim, COMPANY_KEY)).expect("client builds");
    (sim, client)
}

/// The log records of one method and path.
fn records(sim: &Simulator, method: &str, path: &str) -> Vec<RequestRecord> {
    sim.request_log()
        .into_iter()
        .filter(|r| r.method == method && r.path == path)
        .collect()
}

fn statuses(records: &[RequestRecord]) -> Vec<u16> {
    records.iter().map(|r| r.status).collect()
}

/// Counts attempts by endpoint template and status.
#[derive(Default)]
struct Recorder(Mutex<Vec<(&'static str, Option<u16>)>>);

impl RequestObserver for Recorder {
    fn on_response(&self, endpoint: &'static str, status: Option<u16>, _elapsed: Duration) {
        self.0.lock().unwrap().push((endpoint, status));
    }
}

/// API keys: create (201), read, list, update, delete, then the key is gone.
#[tokio::test]
async fn api_key_round_trip() {
    bounded(async {
        let (sim, client) = start().await;
        let created = client
            .create_api_key(&CreateApiKey {
                name: Some("ci".into()),
                permission_ids: Some(vec![1, 2]),
                allowed_ip: None,
            })
            .await
            .unwrap();
        assert_eq!(created.name, "ci");
        assert!(!created.key.expose_secret().is_empty());
        assert_eq!(
            created.permissions.iter().map(|p| p.id).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert!(!format!("{created:?}").contains(created.key.expose_secret()));
        assert_eq!(statuses(&records(&sim, "POST", "/api-key")), vec![201]);

        let read = client.get_api_key(created.id).await.unwrap();
        assert_eq!(read.id, created.id);
        assert_eq!(read.key.expose_secret(), created.key.expose_secret());

        let list = client
            .list_api_keys(&ListApiKeysQuery::default())
            .await
            .unwrap();
        assert_eq!(list.count, 1);
        assert_eq!(list.api_keys[0].id, created.id);
        assert_eq!(list.api_keys[0].name, "ci");

        let updated = client
            .update_api_key(
                created.id,
                &UpdateApiKey {
                    name: Some("ci-renamed".into()),
                    permission_type: Some("full".into()),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(updated.name, "ci-renamed");
        assert_eq!(updated.permission_type, "full");

        assert!(client.delete_api_key(created.id).await.unwrap());
        let err = client.get_api_key(created.id).await.unwrap_err();
        assert!(err.is_not_found(), "{err:?}");
        let err = client.delete_api_key(created.id).await.unwrap_err();
        assert!(err.is_not_found(), "{err:?}");
    })
    .await;
}

/// Sub accounts: create (200) with a first key, read, update, list with a filter.
#[tokio::test]
async fn sub_account_round_trip() {
    bounded(async {
        let (sim, client) = start().await;
        let created = client
            .create_sub_account(&CreateSubAccount {
                name: Some("marketing".into()),
                create_api_key: Some(true),
                api_key_name: Some("marketing-key".into()),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(created.sub_account_name, "marketing");
        assert_eq!(created.status, "active");
        assert_eq!(created.api_keys.len(), 1);
        assert_eq!(created.api_keys[0].name, "marketing-key");
        assert_eq!(created.api_keys[0].sub_account_id, created.id);
        assert_eq!(statuses(&records(&sim, "POST", "/sub-account")), vec![200]);

        let read = client.get_sub_account(created.id).await.unwrap();
        assert_eq!(read.sub_account_name, "marketing");

        let updated = client
            .update_sub_account(
                created.id,
                &UpdateSubAccount {
                    status: Some("inactive".into()),
                    ip_pool_id: Some(4),
                    name: None,
                },
            )
            .await
            .unwrap();
        assert_eq!(updated.status, "inactive");
        assert_eq!(updated.ip_pool_id, 4);
        assert_eq!(updated.sub_account_name, "marketing");

        client
            .create_sub_account(&CreateSubAccount {
                name: Some("keyless".into()),
                ..Default::default()
            })
            .await
            .unwrap();
        let with_key = client
            .list_sub_accounts(&ListSubAccountsQuery {
                has_api_key: Some(true),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(with_key.count, 1);
        assert_eq!(with_key.sub_accounts[0].name, "marketing");
        assert_eq!(with_key.sub_accounts[0].status, "inactive");
        let last = sim.request_log().pop().unwrap();
        assert_eq!(last.query.as_deref(), Some("hasApiKey=true"));

        let err = client.get_sub_account(999_999).await.unwrap_err();
        assert!(err.is_not_found(), "{err:?}");
    })
    .await;
}

/// Sending domains: create (201), list (array-wrapped, `subAccountID`), read, SPF helpers,
/// verify-txt, share, delete.
#[tokio::test]
async fn sending_domain_round_trip() {
    bounded(async {
        let (sim, client) = start().await;
        let created = client
            .create_sending_domain(&CreateSendingDomain {
                domain: "mail.example.com".into(),
                note: Some("test".into()),
                assignment: None,
            })
            .await
            .unwrap();
        assert_eq!(created.domain, "mail.example.com");
        assert_eq!(created.status, vec!["pending".to_owned()]);
        assert!(!created.is_verified());
        assert!(!created.dkim_private_key.expose_secret().is_empty());
        assert!(
            !format!("{created:?}").contains(created.dkim_private_key.expose_secret()),
            "Debug shows the DKIM private key"
        );
        assert_eq!(
            statuses(&records(&sim, "POST", "/domain/sending")),
            vec![201]
        );

        let list = client
            .list_sending_domains(&ListSendingDomainsQuery::default())
            .await
            .unwrap();
        assert_eq!(list.count, 1);
        assert_eq!(list.sending_domain[0].id, created.id);
        assert_eq!(list.sending_domain[0].status, "pending");
        assert_eq!(list.sending_domain[0].sub_account_id, 0);

        let read = client.get_sending_domain(created.id).await.unwrap();
        assert_eq!(read.spf_value, created.spf_value);
        assert_eq!(read.dkim_hostname, created.dkim_hostname);

        let unverified = client.list_unverified_spf().await.unwrap();
        assert!(unverified.data.iter().any(|entry| entry.id == created.id));
        let suggestion = client.spf_suggestion(created.id).await.unwrap();
        assert!(!suggestion.suggestion.is_empty());

        let verified = client.verify_txt(created.id).await.unwrap();
        assert_eq!(verified.len(), 1);
        assert!(verified[0].is_verified());
        assert_eq!(verified[0].status, vec!["verified".to_owned()]);

        let shared = client.share_sending_domain(created.id).await.unwrap();
        assert_eq!(shared.assignment, "shared");

        assert_eq!(
            client.delete_sending_domain(created.id).await.unwrap(),
            "deleted"
        );
        let err = client.get_sending_domain(created.id).await.unwrap_err();
        assert!(err.is_not_found(), "{err:?}");
    })
    .await;
}

/// Transmission on the transmission address, then its status, events and the analytics.
#[tokio::test]
async fn transmission_and_analytics() {
    bounded(async {
        let (sim, client) = start().await;
        let accepted = client
            .send_transmission(&Transmission {
                subject: "Hello".into(),
                from: EmailAddress::new("sender@example.com", "Sender"),
                to: vec![EmailAddress::email("reader@example.com")],
                body_text: Some("hi".into()),
                options_attributes: Some(OptionsAttributes {
                    transactional: Some(false),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(!accepted.transmission_id.is_empty());
        assert_eq!(
            statuses(&records(&sim, "POST", "/v1/layang/transmissions")),
            vec![200]
        );

        let status = client
            .transmission_status(&accepted.transmission_id)
            .await
            .unwrap();
        assert_eq!(status.transmission_id, accepted.transmission_id);
        assert_eq!(status.subject, "Hello");
        assert_eq!(status.recipient_count, 1);
        assert_eq!(status.from.email, "sender@example.com");
        let events = client
            .transmission_events(&accepted.transmission_id)
            .await
            .unwrap();
        assert!(!events.events.is_empty());
        assert!(
            events
                .events
                .iter()
                .all(|e| e.recipient == "reader@example.com")
        );

        let summary = client
            .analytics_summary(&AnalyticsQuery {
                from: "2000-01-01".into(),
                to: "2999-12-31".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(summary.sent, 1);
        assert_eq!(summary.period.from, "2000-01-01");
        let breakdown = client
            .analytics_breakdown(&BreakdownQuery {
                from: "2000-01-01".into(),
                to: "2999-12-31".into(),
                group_by: Some("day".into()),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(breakdown.iter().map(|s| s.sent).sum::<i64>(), 1);

        let err = client
            .send_transmission(&Transmission {
                subject: "No recipients".into(),
                from: EmailAddress::email("sender@example.com"),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert!(matches!(err, ApiError::BadRequest { .. }), "{err:?}");

        // A transmission id is one percent-encoded path segment; an unknown one is NotFound.
        sim.clear_request_log();
        let err = client.transmission_status("no/such id").await.unwrap_err();
        assert!(err.is_not_found(), "{err:?}");
        let log = sim.request_log();
        assert_eq!(log.len(), 1, "not retried: {log:?}");
        assert_eq!(log[0].path, "/analytic/transmission/no%2Fsuch%20id");
        let err = client.transmission_events("").await.unwrap_err();
        assert_eq!(err.category(), "invalid_request");
    })
    .await;
}

/// `list_all_*` walks past the 100-item page cap using `count`.
#[tokio::test]
async fn list_all_walks_every_page() {
    bounded(async {
        let (sim, client) = start().await;
        for i in 0..105 {
            client
                .create_api_key(&CreateApiKey {
                    name: Some(format!("key-{i}")),
                    ..Default::default()
                })
                .await
                .unwrap();
            client
                .create_sub_account(&CreateSubAccount {
                    name: Some(format!("sub-{i}")),
                    ..Default::default()
                })
                .await
                .unwrap();
            client
                .create_sending_domain(&CreateSendingDomain {
                    domain: format!("d{i}.example.com"),
                    ..Default::default()
                })
                .await
                .unwrap();
        }
        sim.clear_request_log();

        let keys = client
            .list_all_api_keys(&ListApiKeysQuery {
                size: Some(5),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(keys.len(), 105);
        let mut ids: Vec<i64> = keys.iter().map(|k| k.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 105, "no key read twice");

        let subs = client
            .list_all_sub_accounts(&ListSubAccountsQuery::default())
            .await
            .unwrap();
        assert_eq!(subs.len(), 105);
        let domains = client
            .list_all_sending_domains(&ListSendingDomainsQuery::default())
            .await
            .unwrap();
        assert_eq!(domains.len(), 105);

        let queries: Vec<Option<String>> = records(&sim, "GET", "/api-key")
            .into_iter()
            .map(|r| r.query)
            .collect();
        assert_eq!(
            queries,
            vec![
                Some("page=1&size=100".to_owned()),
                Some("page=2&size=100".to_owned())
            ]
        );
        assert_eq!(records(&sim, "GET", "/sub-account").len(), 2);
        assert_eq!(records(&sim, "GET", "/domain/sending").len(), 2);
    })
    .await;
}

/// A wrong or deleted key gives Unauthorized; nothing shows the key.
#[tokio::test]
async fn auth_failures_are_unauthorized() {
    bounded(async {
        let (sim, client) = start().await;
        let wrong = Client::new(config_for(&sim, "wrong-key-SECRET")).unwrap();
        let err = wrong
            .list_api_keys(&ListApiKeysQuery::default())
            .await
            .unwrap_err();
        assert!(matches!(err, ApiError::Unauthorized { .. }), "{err:?}");
        assert_eq!(err.status(), Some(401));
        assert!(!err.is_retryable());
        assert!(!format!("{err} {err:?} {wrong:?}").contains("SECRET"));

        let created = client
            .create_api_key(&CreateApiKey::default())
            .await
            .unwrap();
        let own = Client::new(config_for(&sim, created.key.expose_secret())).unwrap();
        own.list_api_keys(&ListApiKeysQuery::default())
            .await
            .unwrap();
        assert!(client.delete_api_key(created.id).await.unwrap());
        let err = own
            .list_api_keys(&ListApiKeysQuery::default())
            .await
            .unwrap_err();
        assert!(matches!(err, ApiError::Unauthorized { .. }), "{err:?}");
    })
    .await;
}

/// GET and PUT are retried on 5xx until they succeed; the log shows every attempt and the
/// observer sees each one under the path template.
#[tokio::test]
async fn idempotent_calls_are_retried() {
    bounded(async {
        let sim = Simulator::start(SimulatorConfig::new(COMPANY_KEY))
            .await
            .unwrap();
        let recorder = Arc::new(Recorder::default());
        let client =
            Client::new(config_for(&sim, COMPANY_KEY).with_observer(recorder.clone())).unwrap();
        let key = client
            .create_api_key(&CreateApiKey::default())
            .await
            .unwrap();
        let path = format!("/api-key/{}", key.id);

        sim.faults().fail_next(2, 500);
        client.get_api_key(key.id).await.unwrap();
        assert_eq!(statuses(&records(&sim, "GET", &path)), vec![500, 500, 200]);

        sim.faults().fail_next(1, 503);
        client
            .update_api_key(
                key.id,
                &UpdateApiKey {
                    name: Some("renamed".into()),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(statuses(&records(&sim, "PUT", &path)), vec![503, 200]);

        let seen = recorder.0.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec![
                ("POST /api-key", Some(201)),
                ("GET /api-key/{id}", Some(500)),
                ("GET /api-key/{id}", Some(500)),
                ("GET /api-key/{id}", Some(200)),
                ("PUT /api-key/{id}", Some(503)),
                ("PUT /api-key/{id}", Some(200)),
            ]
        );

        // Retries are bounded: 1 attempt + max_retries (4).
        sim.clear_request_log();
        sim.faults().fail_next(100, 500);
        let err = client.get_api_key(key.id).await.unwrap_err();
        assert!(
            matches!(err, ApiError::Server { status: 500, .. }),
            "{err:?}"
        );
        assert_eq!(records(&sim, "GET", &path).len(), 5);
        sim.faults().clear();
    })
    .await;
}

/// POST is never retried: one failed attempt, one log record, nothing created.
#[tokio::test]
async fn post_is_not_retried() {
    bounded(async {
        let (sim, client) = start().await;
        sim.faults().fail_next(1, 500);
        let err = client
            .create_api_key(&CreateApiKey {
                name: Some("once".into()),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert!(
            matches!(err, ApiError::Server { status: 500, .. }),
            "{err:?}"
        );
        assert!(
            err.is_retryable(),
            "retryable in kind, but POST is not retried"
        );
        assert_eq!(statuses(&records(&sim, "POST", "/api-key")), vec![500]);

        sim.faults().fail_next(1, 429);
        let err = client
            .create_sub_account(&CreateSubAccount::default())
            .await
            .unwrap_err();
        assert!(matches!(err, ApiError::RateLimited { .. }), "{err:?}");
        assert_eq!(statuses(&records(&sim, "POST", "/sub-account")), vec![429]);
    })
    .await;
}

/// A 429 is retried after the `Retry-After` delay (1 s from the simulator), even when the
/// exponential backoff alone would retry sooner.
#[tokio::test]
async fn rate_limit_honours_retry_after() {
    bounded(async {
        let sim = Simulator::start(SimulatorConfig::new(COMPANY_KEY))
            .await
            .unwrap();
        let mut config = config_for(&sim, COMPANY_KEY);
        config.retry.max_backoff = Duration::from_secs(5);
        let client = Client::new(config).unwrap();

        sim.faults().fail_next(1, 429);
        client
            .list_api_keys(&ListApiKeysQuery::default())
            .await
            .unwrap();
        let log = records(&sim, "GET", "/api-key");
        assert_eq!(statuses(&log), vec![429, 200]);
        let gap_ms = log[1].unix_ms - log[0].unix_ms;
        assert!(
            gap_ms >= 900,
            "retried after {gap_ms} ms, before Retry-After"
        );
    })
    .await;
}

/// At most `max_concurrency` requests are in flight, however many calls run at once.
#[tokio::test]
async fn max_concurrency_is_respected() {
    bounded(async {
        let sim = Simulator::start(SimulatorConfig::new(COMPANY_KEY))
            .await
            .unwrap();
        sim.faults().set(FaultConfig {
            latency: Duration::from_millis(100),
            ..Default::default()
        });
        let mut config = config_for(&sim, COMPANY_KEY);
        config.max_concurrency = 2;
        let limited = Client::new(config).unwrap();
        let calls = (0..8).map(|_| {
            let client = limited.clone();
            async move { client.list_api_keys(&ListApiKeysQuery::default()).await }
        });
        for result in join_all(calls).await {
            result.unwrap();
        }
        assert_eq!(records(&sim, "GET", "/api-key").len(), 8);
        assert!(
            sim.max_concurrent_requests() <= 2,
            "{} in flight",
            sim.max_concurrent_requests()
        );

        // Control: without the tight limit the same load does overlap more.
        let sim = Simulator::start(SimulatorConfig::new(COMPANY_KEY))
            .await
            .unwrap();
        sim.faults().set(FaultConfig {
            latency: Duration::from_millis(100),
            ..Default::default()
        });
        let wide = Client::new(config_for(&sim, COMPANY_KEY)).unwrap();
        let calls = (0..8).map(|_| {
            let client = wide.clone();
            async move { client.list_api_keys(&ListApiKeysQuery::default()).await }
        });
        for result in join_all(calls).await {
            result.unwrap();
        }
        assert!(sim.max_concurrent_requests() > 2);
    })
    .await;
}

/// `requests_per_second` spaces requests: with 2 per second (burst 2), the 4th request
/// starts at least about a second after the 1st.
#[tokio::test]
async fn request_rate_is_limited() {
    bounded(async {
        let sim = Simulator::start(SimulatorConfig::new(COMPANY_KEY))
            .await
            .unwrap();
        let mut config = config_for(&sim, COMPANY_KEY);
        config.requests_per_second = NonZeroU32::new(2);
        let client = Client::new(config).unwrap();
        for _ in 0..4 {
            client
                .list_api_keys(&ListApiKeysQuery::default())
                .await
                .unwrap();
        }
        let log = records(&sim, "GET", "/api-key");
        assert_eq!(log.len(), 4);
        let span_ms = log[3].unix_ms - log[0].unix_ms;
        assert!(span_ms >= 900, "4 requests within {span_ms} ms");
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Hostile server: a raw TCP server answering every request with a scripted reply.

/// What the hostile server answers.
#[derive(Clone)]
enum Reply {
    /// These bytes, then close.
    Raw(Vec<u8>),
    /// A 200 with chunked body of `total` bytes of `[` (never valid JSON), then close.
    Endless { total: usize },
    /// Read the request and never answer.
    Silent,
    /// Send the status line and headers, then stall.
    StallAfterHeaders,
}

/// A running hostile server; counts the connections it accepted.
struct Hostile {
    url: Url,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Hostile {
    async fn start(reply: Reply) -> Hostile {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = Url::parse(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let counter = connections.clone();
        let task = tokio::spawn(async move {
            let mut open = tokio::task::JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                open.spawn(serve(stream, reply.clone()));
            }
        });
        Hostile {
            url,
            connections,
            task,
        }
    }

    /// A client for this server with the given settings.
    fn client(&self, timeout: Duration, retries: usize, max_response_bytes: usize) -> Client {
        let mut config = ClientConfig::new(
            self.url.clone(),
            self.url.clone(),
            SecretString::from(COMPANY_KEY),
        );
        config.timeout = timeout;
        config.max_response_bytes = max_response_bytes;
        config.retry = RetryPolicy {
            max_retries: retries,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(5),
        };
        Client::new(config).unwrap()
    }
}

/// Reads one request head, then plays the reply.
async fn serve(mut stream: TcpStream, reply: Reply) {
    let mut head = Vec::new();
    let mut buf = [0_u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    match reply {
        Reply::Raw(bytes) => {
            let _ = stream.write_all(&bytes).await;
            let _ = stream.shutdown().await;
        }
        Reply::Endless { total } => {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                        Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
            if stream.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let chunk = vec![b'['; 64 * 1024];
            let framed = [
                format!("{:x}\r\n", chunk.len()).into_bytes(),
                chunk,
                b"\r\n".to_vec(),
            ]
            .concat();
            let mut sent = 0;
            while sent < total {
                if stream.write_all(&framed).await.is_err() {
                    return; // the client hung up, as it should
                }
                sent += 64 * 1024;
            }
            let _ = stream.write_all(b"0\r\n\r\n").await;
        }
        Reply::Silent => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        Reply::StallAfterHeaders => {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                        Content-Length: 100\r\n\r\n{\"id\":";
            let _ = stream.write_all(head.as_bytes()).await;
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
    }
}

/// An HTTP/1.1 answer with a Content-Length matching `body`.
fn answer(status: &str, body: &str) -> Reply {
    Reply::Raw(
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

/// A body above the cap is refused: announced by Content-Length, or streamed without one.
#[tokio::test]
async fn oversized_bodies_are_refused() {
    bounded(async {
        let announced = Hostile::start(Reply::Raw(
            b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\nConnection: close\r\n\r\n{".to_vec(),
        ))
        .await;
        let err = announced
            .client(Duration::from_secs(10), 0, 1024 * 1024)
            .get_api_key(1)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                ApiError::TooLarge {
                    limit: 1_048_576,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(!err.is_retryable());

        let streamed = Hostile::start(Reply::Endless {
            total: 64 * 1024 * 1024,
        })
        .await;
        let client = streamed.client(Duration::from_secs(30), 3, 1024 * 1024);
        let err = client.get_api_key(1).await.unwrap_err();
        assert!(matches!(err, ApiError::TooLarge { .. }), "{err:?}");
        assert_eq!(
            streamed.connections.load(Ordering::SeqCst),
            1,
            "not retried"
        );
    })
    .await;
}

/// Malformed JSON and wrong shapes are Decode errors that name the place, never the value.
#[tokio::test]
async fn malformed_and_mistyped_bodies_are_decode_errors() {
    bounded(async {
        let malformed = Hostile::start(answer("200 OK", "{\"id\": 1, \"key\": \"sk-SECRET")).await;
        let err = malformed
            .client(Duration::from_secs(10), 0, 1024)
            .get_api_key(1)
            .await
            .unwrap_err();
        assert!(matches!(err, ApiError::Decode { .. }), "{err:?}");
        assert!(!err.to_string().contains("SECRET"), "{err}");

        let mistyped = Hostile::start(answer(
            "200 OK",
            r#"{"apiKeys":[{"id":1,"key":"sk-SECRET","createdAt":"sk-SECRET-2"}],"count":1}"#,
        ))
        .await;
        let err = mistyped
            .client(Duration::from_secs(10), 3, 1024)
            .list_api_keys(&ListApiKeysQuery::default())
            .await
            .unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, ApiError::Decode { .. }), "{err:?}");
        assert!(message.contains("apiKeys[0].createdAt"), "{message}");
        assert!(!message.contains("SECRET"), "{message}");
        assert_eq!(
            mistyped.connections.load(Ordering::SeqCst),
            1,
            "not retried"
        );

        let html =
            Hostile::start(answer("400 Bad Request", &"<html>nope</html>".repeat(1000))).await;
        let err = html
            .client(Duration::from_secs(10), 0, 1024 * 1024)
            .get_api_key(1)
            .await
            .unwrap_err();
        match err {
            ApiError::BadRequest { error, message, .. } => {
                assert!(error.is_empty());
                assert!(message.starts_with("<html>nope"));
                assert!(message.len() < 1024);
            }
            other => panic!("unexpected {other:?}"),
        }
    })
    .await;
}

/// A body cut short is a transport error, retried for GET.
#[tokio::test]
async fn truncated_body_is_a_retried_transport_error() {
    bounded(async {
        let truncated = Hostile::start(Reply::Raw(
            b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\nConnection: close\r\n\r\n{\"id\":1"
                .to_vec(),
        ))
        .await;
        let err = truncated
            .client(Duration::from_secs(10), 2, 1024)
            .get_api_key(1)
            .await
            .unwrap_err();
        assert!(matches!(err, ApiError::Transport { .. }), "{err:?}");
        assert_eq!(truncated.connections.load(Ordering::SeqCst), 3);
    })
    .await;
}

/// A server that never answers, or stalls mid-body, gives Timeout.
#[tokio::test]
async fn silent_servers_time_out() {
    bounded(async {
        let silent = Hostile::start(Reply::Silent).await;
        let err = silent
            .client(Duration::from_millis(300), 1, 1024)
            .get_api_key(1)
            .await
            .unwrap_err();
        assert!(matches!(err, ApiError::Timeout { .. }), "{err:?}");
        assert_eq!(silent.connections.load(Ordering::SeqCst), 2, "retried once");

        let stalled = Hostile::start(Reply::StallAfterHeaders).await;
        let recorder = Arc::new(Recorder::default());
        let mut config = ClientConfig::new(
            stalled.url.clone(),
            stalled.url.clone(),
            SecretString::from(COMPANY_KEY),
        );
        config.timeout = Duration::from_millis(300);
        config.retry = RetryPolicy::none();
        config.observer = Some(recorder.clone());
        let err = Client::new(config)
            .unwrap()
            .get_api_key(1)
            .await
            .unwrap_err();
        assert!(matches!(err, ApiError::Timeout { .. }), "{err:?}");
        // The status was known before the body stalled.
        assert_eq!(
            *recorder.0.lock().unwrap(),
            vec![("GET /api-key/{id}", Some(200))]
        );
    })
    .await;
}

/// A refused connection is a transport error.
#[tokio::test]
async fn refused_connection_is_transport_error() {
    bounded(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = Url::parse(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        drop(listener);
        let mut config = ClientConfig::new(url.clone(), url, SecretString::from(COMPANY_KEY));
        config.retry = RetryPolicy::none();
        let err = Client::new(config)
            .unwrap()
            .get_sub_account(1)
            .await
            .unwrap_err();
        assert!(matches!(err, ApiError::Transport { .. }), "{err:?}");
        assert!(!err.to_string().contains("SECRET"));
    })
    .await;
}

/// A write gate that allows writes until a fixed instant (`None`: never).
struct GateUntil(Option<std::time::Instant>);

impl mailtarget_operator::api::WriteGate for GateUntil {
    fn writable_until(&self) -> Option<std::time::Instant> {
        self.0
    }
}

/// The write gate (the leader election's renew deadline): a closed gate refuses a write
/// unsent (`NotWritable`, nothing reaches the service) while reads still go; an open one lets
/// the write through.
#[tokio::test]
async fn a_closed_write_gate_sends_no_write() {
    bounded(async {
        let sim = Simulator::start(SimulatorConfig::new(COMPANY_KEY))
            .await
            .expect("simulator starts");
        let request = CreateApiKey {
            name: Some("gated".into()),
            ..Default::default()
        };
        let closed = config_for(&sim, COMPANY_KEY).with_write_gate(Arc::new(GateUntil(None)));
        let client = Client::new(closed).expect("client builds");
        let refused = client.create_api_key(&request).await.unwrap_err();
        assert!(
            matches!(refused, ApiError::NotWritable { .. }),
            "{refused:?}"
        );
        assert!(records(&sim, "POST", "/api-key").is_empty());
        client
            .list_api_keys(&ListApiKeysQuery::default())
            .await
            .expect("reads are never gated");

        let until = std::time::Instant::now() + Duration::from_secs(60);
        let open = config_for(&sim, COMPANY_KEY).with_write_gate(Arc::new(GateUntil(Some(until))));
        let client = Client::new(open).expect("client builds");
        client
            .create_api_key(&request)
            .await
            .expect("the gate is open");
        assert_eq!(records(&sim, "POST", "/api-key").len(), 1);
    })
    .await;
}

/// A client calling as a sub account (`Client::calling_as` with a key of that sub account)
/// creates inside it and lists only it, and takes from the company client's request budget:
/// with one request in flight allowed, the company's and the sub account's calls never overlap
/// (a client built on its own with the same sub account key has a budget of its own and does
/// overlap).
#[tokio::test]
async fn calling_as_a_sub_account_acts_inside_it_on_the_company_budget() {
    bounded(async {
        let sim = Simulator::start(SimulatorConfig::new(COMPANY_KEY))
            .await
            .unwrap();
        let mut config = config_for(&sim, COMPANY_KEY);
        config.max_concurrency = 1;
        let company = Client::new(config).unwrap();
        let sub = company
            .create_sub_account(&CreateSubAccount {
                name: Some("tenant".into()),
                create_api_key: Some(true),
                api_key_name: Some("operator".into()),
                ..Default::default()
            })
            .await
            .unwrap();
        let sub_key = sub.api_keys[0].key.expose_secret().to_string();
        let tenant = company
            .calling_as(SecretString::from(sub_key.clone()))
            .unwrap();

        let made = tenant
            .create_api_key(&CreateApiKey {
                name: Some("app".into()),
                ..Default::default()
            })
            .await
            .unwrap();
        let at_service = sim.snapshot();
        let stored = at_service
            .api_keys
            .iter()
            .find(|k| k.id == made.id)
            .unwrap();
        assert_eq!(stored.sub_account_id, sub.id);
        let listed = tenant
            .list_api_keys(&ListApiKeysQuery::default())
            .await
            .unwrap();
        assert!(!listed.api_keys.is_empty());
        assert!(listed.api_keys.iter().all(|k| k.sub_account_id == sub.id));

        sim.faults().set(FaultConfig {
            latency: Duration::from_millis(50),
            ..Default::default()
        });
        // The simulator keeps the highest overlap seen: the calls so far ran one at a time.
        let overlap = |a: Client, b: Client| async move {
            let calls = (0..6).map(|i| {
                let client = if i % 2 == 0 { a.clone() } else { b.clone() };
                async move { client.list_api_keys(&ListApiKeysQuery::default()).await }
            });
            for result in join_all(calls).await {
                result.unwrap();
            }
        };
        overlap(company.clone(), tenant).await;
        assert_eq!(sim.max_concurrent_requests(), 1);
        let mut own = config_for(&sim, &sub_key);
        own.max_concurrency = 1;
        let separate = Client::new(own).unwrap();
        overlap(company, separate).await;
        assert!(sim.max_concurrent_requests() > 1);
    })
    .await;
}
