//! Test 7 of the reliability suite, at the controller level: the operator pointed at a hostile
//! service that answers malformed JSON, mistyped JSON, endless bodies, nothing at all, and 401.
//! The client side of these answers is covered in `tests/client.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use kube::api::Api;
use mailtarget_operator::api::{Client as ApiClient, ClientConfig, RetryPolicy};
use mailtarget_operator::crd::{ApiKey, SendingDomain, SubAccount};

use crate::common::{KEY, wait_for};
use crate::harness::{HasConditions, Mix, Rig, ready, settings};

/// A string planted in hostile bodies; it must never reach a condition.
const PLANTED: &str = "sk-hostile-PLANTED-value";

const MALFORMED: u8 = 0;
const MISTYPED: u8 = 1;
const ENDLESS: u8 = 2;
const SILENT: u8 = 3;
const UNAUTHORIZED: u8 = 4;

async fn hostile(State(mode): State<Arc<AtomicU8>>) -> Response {
    match mode.load(Ordering::SeqCst) {
        MALFORMED => (
            StatusCode::OK,
            [("content-type", "application/json")],
            format!("{{\"data\": [{{\"key\": \"{PLANTED}\", \"id\": "),
        )
            .into_response(),
        MISTYPED => (
            StatusCode::OK,
            [("content-type", "application/json")],
            format!("{{\"data\": \"{PLANTED}\", \"count\": \"many\"}}"),
        )
            .into_response(),
        ENDLESS => {
            let chunk = axum::body::Bytes::from(vec![b'['; 64 * 1024]);
            let stream = futures::stream::repeat_with(move || Ok::<_, std::io::Error>(chunk.clone()));
            (StatusCode::OK, Body::from_stream(stream)).into_response()
        }
        SILENT => {
            futures::future::pending::<()>().await;
            StatusCode::OK.into_response()
        }
        _ => (
            StatusCode::UNAUTHORIZED,
            [("content-type", "application/json")],
            format!("{{\"error\": \"UNAUTHORIZED\", \"message\": \"bad key\", \"data\": {{\"key\": \"{PLANTED}\"}}}}"),
        )
            .into_response(),
    }
}

/// Starts the hostile server; returns its base URL.
async fn start_hostile(mode: Arc<AtomicU8>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = axum::Router::new().fallback(hostile).with_state(mode);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}")
}

/// Waits until the three resources report `reason` with a message containing `says`.
async fn all_report(rig: &Rig, reason: &'static str, says: &'static str) {
    async fn one<K>(api: Api<K>, name: &str, reason: &'static str, says: &'static str)
    where
        K: kube::Resource
            + HasConditions
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug
            + Send
            + 'static,
    {
        let obj = wait_for(&api, name, reason, move |o: &K| {
            ready(o.conditions()).is_some_and(|c| c.reason == reason && c.message.contains(says))
        })
        .await;
        for c in obj.conditions() {
            assert!(
                !c.message.contains(PLANTED),
                "a body reached a condition: {c:?}"
            );
        }
    }
    one(rig.api::<SubAccount>(), "team-0", reason, says).await;
    one(rig.api::<ApiKey>(), "app-0", reason, says).await;
    one(rig.api::<SendingDomain>(), "mail-0", reason, says).await;
}

/// Against malformed, mistyped, endless and silent answers, every resource reports what is
/// wrong (`InvalidApiResponse` or `ApiUnavailable`, naming the call) without echoing the body,
/// and against a 401 it stalls with `Unauthorized`; the operator never panics or stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_answers_are_reported_in_conditions() {
    let mode = Arc::new(AtomicU8::new(MALFORMED));
    let url = start_hostile(mode.clone()).await;
    let mut rig = Rig::new(Rig::sim_config()).await;
    let mix = Mix {
        sub_accounts: vec!["team-0".into()],
        company_keys: vec!["app-0".into()],
        sub_keys: vec![],
        domains: vec![("mail-0".into(), "mail0.example.com".into())],
    };
    mix.create(&rig.kube).await;
    let mut config = ClientConfig::new(
        url.parse().expect("url"),
        format!("{url}/v1").parse().expect("url"),
        KEY.to_string().into(),
    );
    config.timeout = Duration::from_millis(500);
    config.max_response_bytes = 256 * 1024;
    config.retry = RetryPolicy {
        max_retries: 1,
        initial_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(100),
    };
    rig.start_operator_with(
        settings(Duration::from_secs(1)),
        ApiClient::new(config).expect("client"),
    );

    all_report(&rig, "InvalidApiResponse", "unexpected response body").await;
    mode.store(MISTYPED, Ordering::SeqCst);
    all_report(&rig, "InvalidApiResponse", "found a string").await;
    mode.store(ENDLESS, Ordering::SeqCst);
    all_report(&rig, "InvalidApiResponse", "larger than 262144 bytes").await;
    mode.store(SILENT, Ordering::SeqCst);
    all_report(&rig, "ApiUnavailable", "timed out").await;
    mode.store(UNAUTHORIZED, Ordering::SeqCst);
    all_report(&rig, "Unauthorized", "MAILTARGET_API_KEY").await;
    assert!(rig.operator_alive(), "the operator is still running");
    rig.stop_operator().await;
}
