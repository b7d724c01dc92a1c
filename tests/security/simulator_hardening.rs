//! Test 9: simulator hardening, beyond the per-endpoint checks of `tests/simulator.rs`: every
//! route (interface and control) against every kind of bad credential, `allowedIp` on company
//! and sub account keys, seeded random bodies and queries that must get a 400 (or a success; a
//! body over its route's limit a 413), never a 5xx or a dropped connection, and large
//! transmissions that must leave a small record.

use std::time::Duration;

use mailtarget_operator::simulator::{
    FaultConfig, MAX_CONTROL_BODY_BYTES, MAX_MANAGEMENT_BODY_BYTES, MAX_STORED_TRANSMISSION_BYTES,
    MAX_TRANSMISSION_BODY_BYTES, Simulator, SimulatorConfig, SimulatorState,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::capture;

const KEY: &str = "hardening-company-key";
const ADMIN: &str = "hardening-admin-key";

/// Every route of the interface, with ids of objects that exist.
const INTERFACE: &[(&str, &str)] = &[
    ("GET", "/api-key"),
    ("POST", "/api-key"),
    ("GET", "/api-key/1"),
    ("PUT", "/api-key/1"),
    ("DELETE", "/api-key/1"),
    ("GET", "/sub-account"),
    ("POST", "/sub-account"),
    ("GET", "/sub-account/1"),
    ("PUT", "/sub-account/1"),
    ("GET", "/domain/sending"),
    ("POST", "/domain/sending"),
    ("GET", "/domain/sending/unverified-spf"),
    ("GET", "/domain/sending/1"),
    ("DELETE", "/domain/sending/1"),
    ("PUT", "/domain/sending/1/share"),
    ("GET", "/domain/sending/1/spf-suggestion"),
    ("PUT", "/domain/sending/1/verify-txt"),
    ("POST", "/layang/transmissions"),
    ("POST", "/v1/layang/transmissions"),
    ("GET", "/analytic/summary?from=2024-01-01&to=2024-01-02"),
    (
        "GET",
        "/analytic/summary/breakdown?from=2024-01-01&to=2024-01-02&groupBy=domain",
    ),
    ("GET", "/analytic/transmission/tx-1"),
    ("GET", "/analytic/transmission/tx-1/events"),
];

/// Every control route.
const CONTROL: &[(&str, &str)] = &[
    ("GET", "/_simulator/faults"),
    ("PUT", "/_simulator/faults"),
    ("POST", "/_simulator/fail-next"),
    ("GET", "/_simulator/requests"),
    ("DELETE", "/_simulator/requests"),
];

struct Target {
    sim: Simulator,
    http: reqwest::Client,
}

impl Target {
    async fn start() -> Target {
        let mut config = SimulatorConfig::new(KEY);
        config.admin_key = Some(ADMIN.into());
        let sim = Simulator::start(config).await.expect("simulator");
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(20))
            .build()
            .expect("http client");
        Target { sim, http }
    }

    /// Sends a request; the connection must produce an answer.
    async fn send(
        &self,
        method: &str,
        path: &str,
        authorization: Option<&str>,
        content_type: Option<&str>,
        body: reqwest::Body,
    ) -> (StatusCode, Value) {
        let method = Method::from_bytes(method.as_bytes()).expect("method");
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.sim.base_url()))
            .body(body);
        if let Some(a) = authorization {
            request = request.header("authorization", a);
        }
        if let Some(c) = content_type {
            request = request.header("content-type", c);
        }
        let response = request
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: no answer: {e}"));
        let status = response.status();
        let bytes = response.bytes().await.unwrap_or_default();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    async fn json(&self, method: &str, path: &str, key: &str, body: Value) -> Value {
        let (status, reply) = self
            .send(
                method,
                path,
                Some(&format!("Bearer {key}")),
                Some("application/json"),
                body.to_string().into(),
            )
            .await;
        assert!(status.is_success(), "{method} {path}: {status} {reply}");
        reply
    }
}

fn summary(s: &SimulatorState) -> String {
    format!(
        "{:?}",
        (
            s.api_keys
                .iter()
                .map(|k| (
                    k.id,
                    &k.name,
                    &k.allowed_ip,
                    &k.permission_ids,
                    k.updated_at
                ))
                .collect::<Vec<_>>(),
            s.sub_accounts
                .iter()
                .map(|a| (a.id, &a.name, &a.status))
                .collect::<Vec<_>>(),
            s.sending_domains
                .iter()
                .map(|d| (d.id, &d.assignment, d.verify_calls))
                .collect::<Vec<_>>(),
            s.transmissions.len(),
        )
    )
}

/// No route answers anything but 401 without valid credentials: no header, a wrong key, the
/// Basic scheme, an empty Bearer, a deleted key, keys whose `allowedIp` excludes the caller
/// (a company key, a sub account's first key, an IPv6-only list); the control routes refuse the
/// company key and API keys too. Nothing changes in the simulator meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_refuses_bad_credentials() {
    capture::install();
    let t = Target::start().await;
    t.json("POST", "/api-key", KEY, json!({"name": "existing"}))
        .await;
    t.json("POST", "/sub-account", KEY, json!({"name": "existing", "createApiKey": true, "apiKeyName": "fenced", "allowedIps": "10.1.1.1"})).await;
    t.json(
        "POST",
        "/domain/sending",
        KEY,
        json!({"domain": "existing.example.com"}),
    )
    .await;
    let deleted = t
        .json("POST", "/api-key", KEY, json!({"name": "deleted"}))
        .await;
    let deleted_key = deleted["key"].as_str().expect("key").to_string();
    t.json(
        "DELETE",
        &format!("/api-key/{}", deleted["id"]),
        KEY,
        json!({}),
    )
    .await;
    let elsewhere = t
        .json(
            "POST",
            "/api-key",
            KEY,
            json!({"name": "elsewhere", "allowedIp": "10.9.9.9"}),
        )
        .await;
    let v6_only = t
        .json(
            "POST",
            "/api-key",
            KEY,
            json!({"name": "v6", "allowedIp": "::1"}),
        )
        .await;
    let fenced = t
        .sim
        .snapshot()
        .api_keys
        .iter()
        .find(|k| k.name == "fenced")
        .map(|k| k.key.clone())
        .expect("the sub account's first key");
    let valid = t
        .json("POST", "/api-key", KEY, json!({"name": "valid"}))
        .await;
    let valid_key = valid["key"].as_str().expect("key").to_string();
    let before = summary(&t.sim.snapshot());
    t.sim.clear_request_log();

    let bad: Vec<Option<String>> = vec![
        None,
        Some("Bearer wrong-key".into()),
        Some(format!("Basic {KEY}")),
        Some("Bearer ".into()),
        Some(KEY.into()),
        Some(format!("Bearer {deleted_key}")),
        Some(format!(
            "Bearer {}",
            elsewhere["key"].as_str().expect("key")
        )),
        Some(format!("Bearer {}", v6_only["key"].as_str().expect("key"))),
        Some(format!("Bearer {fenced}")),
    ];
    let mut checked = 0;
    for (method, path) in INTERFACE.iter().chain(CONTROL) {
        let mut credentials = bad.clone();
        if path.starts_with("/_simulator") {
            credentials.push(Some(format!("Bearer {KEY}")));
            credentials.push(Some(format!("Bearer {valid_key}")));
        }
        for auth in &credentials {
            let (status, body) = t
                .send(
                    method,
                    path,
                    auth.as_deref(),
                    Some("application/json"),
                    "{}".into(),
                )
                .await;
            assert_eq!(
                status,
                StatusCode::UNAUTHORIZED,
                "{method} {path} with {auth:?}: {body}"
            );
            assert_eq!(body["error"], "UNAUTHORIZED", "{method} {path}");
            checked += 1;
        }
    }
    assert!(checked > 200, "{checked} requests checked");
    assert_eq!(summary(&t.sim.snapshot()), before, "nothing changed");
    assert_eq!(
        t.sim.faults().get(),
        FaultConfig::default(),
        "faults unchanged"
    );

    // The same key from an allowed address works (the checks above are not vacuous).
    let (status, _) = t
        .send(
            "GET",
            "/api-key",
            Some(&format!("Bearer {valid_key}")),
            None,
            "".into(),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    t.sim.shutdown().await;
}

/// The documented request body limit of the route family of `path`.
fn body_limit(path: &str) -> usize {
    if path.ends_with("/layang/transmissions") {
        MAX_TRANSMISSION_BODY_BYTES
    } else if path.starts_with("/_simulator") {
        MAX_CONTROL_BODY_BYTES
    } else {
        MAX_MANAGEMENT_BODY_BYTES
    }
}

/// A random body: garbage bytes, a mutated valid body, deep nesting, huge numbers or strings.
fn random_body(rng: &mut StdRng, valid: &str) -> Vec<u8> {
    match rng.random_range(0..7) {
        0 => (0..rng.random_range(0..512))
            .map(|_| rng.random())
            .collect(),
        1 => {
            let mut b = valid.as_bytes().to_vec();
            let cut = rng.random_range(0..=b.len());
            b.truncate(cut);
            b
        }
        2 => {
            let mut b = valid.as_bytes().to_vec();
            for _ in 0..rng.random_range(1..4) {
                let i = rng.random_range(0..b.len());
                b[i] = rng.random();
            }
            b
        }
        3 => {
            let depth = rng.random_range(100..5000);
            format!("{}{}", "[".repeat(depth), "]".repeat(depth)).into_bytes()
        }
        4 => format!("{{\"name\": 1e{}}}", rng.random_range(300..100_000)).into_bytes(),
        5 => format!(
            "{{\"name\": \"{}\"}}",
            "x".repeat(rng.random_range(1000..MAX_MANAGEMENT_BODY_BYTES + 5000))
        )
        .into_bytes(),
        _ => {
            let tokens = [
                "{",
                "}",
                "[",
                "]",
                ",",
                ":",
                "\"a\"",
                "null",
                "-0",
                "1.5e3",
                "\"\\u0000\"",
                "\"\\ud800\"",
                "true",
            ];
            (0..rng.random_range(1..40))
                .map(|_| tokens[rng.random_range(0..tokens.len())])
                .collect::<String>()
                .into_bytes()
        }
    }
}

/// Seeded random bodies (with random content types) on every route that reads a body, random
/// query strings on every list route, and oversized bodies with and without a Content-Length
/// (share and verify-txt included, which take no body): each gets a 400 in the error shape (a
/// body over its route's documented limit a 413 `PAYLOAD_TOO_LARGE`), or a success when the
/// input happens to be valid, never a 5xx and never a dropped connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_bodies_and_queries_never_get_a_server_error() {
    capture::install();
    let t = Target::start().await;
    t.json("POST", "/api-key", KEY, json!({"name": "existing"}))
        .await;
    t.json("POST", "/sub-account", KEY, json!({"name": "existing"}))
        .await;
    t.json(
        "POST",
        "/domain/sending",
        KEY,
        json!({"domain": "existing.example.com"}),
    )
    .await;
    let sent = t
        .json(
            "POST",
            "/layang/transmissions",
            KEY,
            json!({"subject": "s", "from": {"email": "a@existing.example.com"}, "to": [{"email": "b@example.org"}], "bodyText": "t"}),
        )
        .await;
    let events = format!(
        "/analytic/transmission/{}/events",
        sent["transmissionId"].as_str().expect("transmission id")
    );
    let routes: &[(&str, &str, &str, &str)] = &[
        (
            "POST",
            "/api-key",
            KEY,
            r#"{"name": "k", "permissionIds": [1, 2], "allowedIp": "10.0.0.1"}"#,
        ),
        (
            "PUT",
            "/api-key/1",
            KEY,
            r#"{"name": "k", "permissionType": "custom", "permissionIds": [1]}"#,
        ),
        (
            "POST",
            "/sub-account",
            KEY,
            r#"{"name": "s", "createApiKey": true, "permissionIds": [1], "allowedIps": "10.0.0.1"}"#,
        ),
        (
            "PUT",
            "/sub-account/1",
            KEY,
            r#"{"name": "s2", "status": "active", "ipPoolId": 3}"#,
        ),
        (
            "POST",
            "/domain/sending",
            KEY,
            r#"{"domain": "a.example.com", "assignment": "company", "note": "n"}"#,
        ),
        ("PUT", "/domain/sending/1/share", KEY, "{}"),
        ("PUT", "/domain/sending/1/verify-txt", KEY, "{}"),
        (
            "POST",
            "/layang/transmissions",
            KEY,
            r#"{"subject": "s", "from": {"email": "a@existing.example.com"}, "to": [{"email": "b@example.org"}], "bodyText": "t"}"#,
        ),
        (
            "PUT",
            "/_simulator/faults",
            ADMIN,
            r#"{"errorRate": 0.0, "seed": 1}"#,
        ),
        (
            "POST",
            "/_simulator/fail-next",
            ADMIN,
            r#"{"count": 0, "status": 500}"#,
        ),
    ];
    let content_types = [
        Some("application/json"),
        Some("application/json; charset=utf-8"),
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        None,
        Some("application/jsonx"),
    ];
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let mut seen = std::collections::BTreeMap::new();
    for (method, path, key, valid) in routes {
        for _ in 0..25 {
            let body = random_body(&mut rng, valid);
            let body_len = body.len();
            let content_type = content_types[rng.random_range(0..content_types.len())];
            let (status, reply) = t
                .send(
                    method,
                    path,
                    Some(&format!("Bearer {key}")),
                    content_type,
                    body.into(),
                )
                .await;
            *seen.entry(status.as_u16()).or_insert(0) += 1;
            if body_len > body_limit(path) {
                assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{method} {path}");
            } else {
                assert!(
                    status == StatusCode::BAD_REQUEST || status.is_success(),
                    "{method} {path}: {status} {reply}"
                );
            }
            if !status.is_success() {
                assert!(
                    reply["error"].is_string(),
                    "{method} {path}: error shape: {reply}"
                );
            }
        }
        // Oversized, announced by Content-Length and streamed without one.
        let big = vec![b' '; body_limit(path) + 1];
        let (status, reply) = t
            .send(
                method,
                path,
                Some(&format!("Bearer {key}")),
                Some("application/json"),
                big.clone().into(),
            )
            .await;
        assert_eq!(
            (status, reply["error"].as_str()),
            (StatusCode::PAYLOAD_TOO_LARGE, Some("PAYLOAD_TOO_LARGE")),
            "{method} {path} oversized: {reply}"
        );
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
            big.chunks(64 * 1024).map(|c| Ok(c.to_vec())).collect();
        let (status, reply) = t
            .send(
                method,
                path,
                Some(&format!("Bearer {key}")),
                Some("application/json"),
                reqwest::Body::wrap_stream(futures::stream::iter(chunks)),
            )
            .await;
        assert_eq!(
            (status, reply["error"].as_str()),
            (StatusCode::PAYLOAD_TOO_LARGE, Some("PAYLOAD_TOO_LARGE")),
            "{method} {path} streamed oversized: {reply}"
        );
    }
    assert!(seen.get(&400).copied().unwrap_or(0) > 100, "{seen:?}");

    let lists = [
        "/api-key",
        "/sub-account",
        "/domain/sending",
        "/analytic/summary",
        "/analytic/summary/breakdown",
        events.as_str(),
    ];
    let params = [
        "page",
        "size",
        "search",
        "sort",
        "status",
        "subAccountId",
        "permissionType",
        "from",
        "to",
        "groupBy",
        "domain",
        "event",
    ];
    let values = [
        "-1",
        "0",
        "1",
        "abc",
        "%FF",
        "%00",
        "99999999999999999999",
        "1.5",
        "",
        "2024-13-45",
        "2024-01-01",
        "asc",
        "desc",
        "a%2Cb",
    ];
    for _ in 0..150 {
        let path = lists[rng.random_range(0..lists.len())];
        let query: Vec<String> = (0..rng.random_range(0..5))
            .map(|_| {
                format!(
                    "{}={}",
                    params[rng.random_range(0..params.len())],
                    values[rng.random_range(0..values.len())]
                )
            })
            .collect();
        let url = format!("{path}?{}", query.join("&"));
        let (status, reply) = t
            .send("GET", &url, Some(&format!("Bearer {KEY}")), None, "".into())
            .await;
        assert!(
            status == StatusCode::BAD_REQUEST || status.is_success(),
            "GET {url}: {status} {reply}"
        );
    }
    t.sim.shutdown().await;
}

/// A transmission of about 1 MB (900 KiB) in one of the shapes the simulator accepts: a large HTML body,
/// a large attachment, large metadata, or one link of about 1 MB.
fn large_transmission(shape: &str) -> Value {
    let mb = 900 << 10;
    let to = json!([{"email": "ann@example.org"}, {"email": "bob@example.org"}, {"email": "cy@example.org"}]);
    let mut body = json!({
        "subject": "quarterly report",
        "from": {"email": "reports@example.com", "name": "Reports"},
        "to": to,
        "bodyHtml": "<p>see <a href=\"https://example.com/r\">the report</a></p>",
    });
    match shape {
        "html" => {
            body["bodyHtml"] = json!(format!(
                "<a href=\"https://example.com/r\">r</a>{}",
                "<p>x</p>".repeat(mb / 8)
            ))
        }
        "attachment" => {
            body["attachments"] = json!([{"filename": "r.pdf", "mimeType": "application/pdf", "value": "QUJD".repeat(mb / 4)}])
        }
        "metadata" => {
            let entries: serde_json::Map<String, Value> = (0..mb / 100)
                .map(|i| (format!("key-{i:08}"), json!("v".repeat(85))))
                .collect();
            body["metadata"] = Value::Object(entries);
        }
        "long link" => {
            body["bodyHtml"] = json!(format!(
                "<a href=\"https://example.com/{}\">r</a>",
                "p".repeat(mb)
            ))
        }
        other => panic!("unknown shape {other}"),
    }
    body
}

/// A transmission of about 1 MB (900 KiB) that exceeds one of the documented limits on what is kept: a
/// subject, a sender name or an address of about 1 MB, or 20,000 recipients.
fn oversized_transmission(shape: &str) -> Value {
    let mb = 900 << 10;
    let mut body = json!({
        "subject": "s",
        "from": {"email": "reports@example.com"},
        "to": [{"email": "ann@example.org"}],
        "bodyText": "t",
    });
    match shape {
        "subject" => body["subject"] = json!("s".repeat(mb)),
        "sender name" => body["from"]["name"] = json!("n".repeat(mb)),
        "address" => body["to"] = json!([{"email": format!("{}@example.org", "a".repeat(mb))}]),
        "recipients" => {
            body["to"] = (0..20_000)
                .map(|i| json!({"email": format!("r{i:06}@example.org")}))
                .collect()
        }
        other => panic!("unknown shape {other}"),
    }
    body
}

/// Many transmissions of about 1 MB each keep the stored state small: the simulator keeps what
/// analytics and the interface's reads need (subject, sender, recipients, event kinds), never
/// the request, so a large body, attachment, metadata or link adds nothing; a subject, sender,
/// address or recipient list over its documented limit is refused with 400 and stores nothing.
/// Fails if the record of a transmission grows with the size of the request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_transmissions_keep_a_small_record() {
    let t = Target::start().await;
    let accepted = ["html", "attachment", "metadata", "long link"];
    let refused = ["subject", "sender name", "address", "recipients"];
    let mut sent = Vec::new();
    for _ in 0..8 {
        for shape in accepted {
            let reply = t
                .json(
                    "POST",
                    "/layang/transmissions",
                    KEY,
                    large_transmission(shape),
                )
                .await;
            sent.push((shape, reply["transmissionId"].as_str().unwrap().to_string()));
        }
    }
    for shape in refused {
        let (status, reply) = t
            .send(
                "POST",
                "/layang/transmissions",
                Some(&format!("Bearer {KEY}")),
                Some("application/json"),
                oversized_transmission(shape).to_string().into(),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{shape}: {reply}");
        assert!(
            reply["message"].is_string(),
            "{shape}: error shape: {reply}"
        );
    }
    let state = t.sim.snapshot();
    assert_eq!(
        state.transmissions.len(),
        sent.len(),
        "refused ones are not stored"
    );
    let per_record = 8 << 10;
    for (record, (shape, _)) in state.transmissions.iter().zip(&sent) {
        assert!(
            record.stored_bytes() <= per_record,
            "{shape}: a ~1 MB transmission keeps {} bytes",
            record.stored_bytes()
        );
    }
    assert_eq!(
        state.transmissions.len(),
        sent.len(),
        "every transmission kept"
    );

    // The widest transmission the limits allow stays within the documented bound.
    let address = |i: usize| format!("{i:04}{}@example.org", "a".repeat(254 - 4 - 12));
    let widest = json!({
        "subject": "s".repeat(998),
        "from": {"email": address(9999), "name": "n".repeat(255)},
        "to": (0..1000).map(|i| json!({"email": address(i)})).collect::<Vec<_>>(),
        "bodyHtml": format!("<a href=\"https://example.com/{}\">r</a>", "p".repeat(2000)),
        "optionsAttributes": {"openTracking": true, "clickTracking": true},
    });
    t.json("POST", "/layang/transmissions", KEY, widest).await;
    let state = t.sim.snapshot();
    let record = state.transmissions.last().unwrap();
    assert_eq!(record.recipients.len(), 1000);
    assert!(
        record.stored_bytes() <= MAX_STORED_TRANSMISSION_BYTES,
        "{} bytes",
        record.stored_bytes()
    );

    // What is kept still answers the interface's reads: a link too long to track gives no
    // click, the others do.
    for (shape, id) in &sent[..accepted.len()] {
        let (status, reply) = t
            .send(
                "GET",
                &format!("/analytic/transmission/{id}/events"),
                Some(&format!("Bearer {KEY}")),
                None,
                reqwest::Body::from(""),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{shape}: {reply}");
        let events = reply["events"].as_array().unwrap();
        let clicks = events.iter().filter(|e| e["type"] == "clicked").count();
        let expected = if *shape == "long link" { 0 } else { 3 };
        assert_eq!(clicks, expected, "{shape}: {reply}");
        assert!(events.iter().all(|e| e["subject"] == "quarterly report"));
        assert!(
            events
                .iter()
                .all(|e| e["friendlyFrom"] == "Reports <reports@example.com>")
        );
    }
    t.sim.shutdown().await;
}
