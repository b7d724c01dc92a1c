//! Integration tests of the simulator over real HTTP with raw JSON (deliberately not the
//! crate's API client, which these tests must check independently).
//!
//! Each test names the invariant it protects. Shapes are asserted field by field, including
//! the interface's quirks (`subAccountID`, `name` vs `subAccountName`, `status` string vs
//! array, the array around the domain list, 200 on sub account create, `true` on key delete).

use std::collections::BTreeSet;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use mailtarget_operator::simulator::{
    FaultConfig, MAX_MANAGEMENT_BODY_BYTES, Simulator, SimulatorConfig, SimulatorState,
};
use reqwest::{Method, StatusCode};
use ring::signature::{ED25519, Ed25519KeyPair, UnparsedPublicKey};
use serde_json::{Value, json};

const KEY: &str = "company-key-for-tests";
const ADMIN: &str = "admin-key-for-tests";
const TIMEOUT: Duration = Duration::from_secs(20);

struct Harness {
    sim: Simulator,
    http: reqwest::Client,
}

/// A response: status plus parsed JSON (Null when the body is empty or not JSON).
#[derive(Debug)]
struct Reply {
    status: StatusCode,
    body: Value,
    retry_after: Option<String>,
}

impl Harness {
    async fn new() -> Self {
        Self::with(|_| {}).await
    }

    async fn with(adjust: impl FnOnce(&mut SimulatorConfig)) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut config = SimulatorConfig::new(KEY);
        config.admin_key = Some(ADMIN.into());
        adjust(&mut config);
        let sim = Simulator::start(config).await.expect("simulator starts");
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .build()
            .expect("http client");
        Self { sim, http }
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<Value>,
    ) -> Reply {
        let mut request = self
            .http
            .request(method, format!("{}{}", self.sim.base_url(), path));
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("request completes");
        reply(response).await
    }

    /// Sends raw bytes with the given content type (None: no content type).
    async fn raw(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> Reply {
        let mut request = self
            .http
            .request(method, format!("{}{}", self.sim.base_url(), path))
            .bearer_auth(KEY)
            .body(body);
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        reply(request.send().await.expect("request completes")).await
    }

    async fn get(&self, path: &str) -> Reply {
        self.send(Method::GET, path, Some(KEY), None).await
    }

    async fn post(&self, path: &str, body: Value) -> Reply {
        self.send(Method::POST, path, Some(KEY), Some(body)).await
    }

    async fn put(&self, path: &str, body: Option<Value>) -> Reply {
        self.send(Method::PUT, path, Some(KEY), body).await
    }

    async fn delete(&self, path: &str) -> Reply {
        self.send(Method::DELETE, path, Some(KEY), None).await
    }

    fn state(&self) -> SimulatorState {
        self.sim.snapshot()
    }

    async fn create_key(&self, body: Value) -> Value {
        let reply = self.post("/api-key", body).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{reply:?}");
        reply.body
    }

    async fn create_sub_account(&self, body: Value) -> Value {
        let reply = self.post("/sub-account", body).await;
        assert_eq!(reply.status, StatusCode::OK, "{reply:?}");
        reply.body
    }

    async fn create_domain(&self, domain: &str) -> Value {
        let reply = self
            .post("/domain/sending", json!({"domain": domain}))
            .await;
        assert_eq!(reply.status, StatusCode::CREATED, "{reply:?}");
        reply.body
    }

    async fn transmit(&self, body: Value) -> String {
        let reply = self.post("/v1/layang/transmissions", body).await;
        assert_eq!(reply.status, StatusCode::OK, "{reply:?}");
        reply.body["transmissionId"]
            .as_str()
            .expect("transmissionId string")
            .to_string()
    }
}

async fn reply(response: reqwest::Response) -> Reply {
    let status = response.status();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let bytes = response.bytes().await.expect("body");
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Reply {
        status,
        body,
        retry_after,
    }
}

fn keys_of(value: &Value) -> BTreeSet<String> {
    value
        .as_object()
        .unwrap_or_else(|| panic!("object expected, got {value}"))
        .keys()
        .cloned()
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// Asserts the common error shape `{error, message, data: {}}` with this status and error.
fn assert_error(reply: &Reply, status: StatusCode, error: &str) {
    assert_eq!(reply.status, status, "{reply:?}");
    assert_eq!(
        keys_of(&reply.body),
        set(&["error", "message", "data"]),
        "{reply:?}"
    );
    assert_eq!(reply.body["error"], error, "{reply:?}");
    assert!(
        reply.body["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
    assert_eq!(reply.body["data"], json!({}));
}

const KEY_LIST_ITEM: &[&str] = &[
    "id",
    "key",
    "name",
    "permissionType",
    "subAccountId",
    "subAccountName",
    "createdAt",
];
const KEY_DETAIL: &[&str] = &[
    "id",
    "key",
    "name",
    "allowedIp",
    "companyId",
    "companyName",
    "createdAt",
    "permissionType",
    "permissions",
    "subAccountId",
    "subAccountName",
];
const DOMAIN_DETAIL: &[&str] = &[
    "id",
    "domain",
    "assignment",
    "createdAt",
    "status",
    "types",
    "subAccountId",
    "subAccountName",
    "trackingDomainId",
    "trackingDomainName",
    "spfHostname",
    "spfValue",
    "spfVerified",
    "dkimSelector",
    "dkimHostname",
    "dkimValue",
    "dkimPublicKey",
    "dkimPrivateKey",
    "dkimVerified",
    "cnameHostname",
    "cnameValue",
    "cnameVerified",
];
const DOMAIN_LIST_ITEM: &[&str] = &[
    "id",
    "domain",
    "assignment",
    "companyId",
    "createdAt",
    "default",
    "status",
    "subAccountID",
    "subAccountName",
    "types",
];
const SUMMARY: &[&str] = &[
    "name",
    "period",
    "sent",
    "delivered",
    "opened",
    "clicked",
    "bounced",
    "unsubscribed",
    "deliveryRate",
    "openRate",
    "clickRate",
    "bounceRate",
    "unsubscribeRate",
];

// ---------------------------------------------------------------------------------------
// API keys
// ---------------------------------------------------------------------------------------

/// POST /api-key answers 201 with the detail shape; GET, PUT and DELETE follow the interface.
#[tokio::test]
async fn api_key_lifecycle_and_shapes() {
    let h = Harness::new().await;
    let created = h
        .create_key(json!({"name": "ci", "allowedIp": "127.0.0.1", "permissionIds": [1, 2]}))
        .await;
    assert_eq!(keys_of(&created), set(KEY_DETAIL));
    assert_eq!(created["id"], 1);
    assert_eq!(created["name"], "ci");
    assert_eq!(created["allowedIp"], "127.0.0.1");
    assert_eq!(created["companyId"], 1);
    assert!(created["companyName"].is_string());
    assert!(created["createdAt"].is_i64());
    assert_eq!(created["permissionType"], "custom");
    assert_eq!(created["subAccountId"], 0);
    assert_eq!(created["subAccountName"], "");
    assert_eq!(
        created["permissions"],
        json!([
            {"detail": "Send emails", "id": 1, "name": "send"},
            {"detail": "Read analytics", "id": 2, "name": "analytics"}
        ])
    );
    let value = created["key"].as_str().unwrap();
    assert_eq!(value.len(), 40);
    assert!(value.chars().all(|c| c.is_ascii_alphanumeric()));

    let list = h.get("/api-key").await;
    assert_eq!(list.status, StatusCode::OK);
    assert_eq!(keys_of(&list.body), set(&["apiKeys", "count"]));
    assert_eq!(list.body["count"], 1);
    assert_eq!(keys_of(&list.body["apiKeys"][0]), set(KEY_LIST_ITEM));
    assert_eq!(list.body["apiKeys"][0]["key"], value);

    let read = h.get("/api-key/1").await;
    assert_eq!(read.status, StatusCode::OK);
    assert_eq!(read.body, created);

    // PUT changes only the fields sent.
    let updated = h
        .put("/api-key/1", Some(json!({"permissionType": "limited"})))
        .await;
    assert_eq!(updated.status, StatusCode::OK);
    assert_eq!(keys_of(&updated.body), set(KEY_DETAIL));
    assert_eq!(updated.body["permissionType"], "limited");
    assert_eq!(updated.body["name"], "ci");
    assert_eq!(updated.body["allowedIp"], "127.0.0.1");
    assert_eq!(updated.body["permissions"].as_array().unwrap().len(), 2);
    let updated = h
        .put(
            "/api-key/1",
            Some(json!({"name": "ci-2", "permissionIds": [6], "allowedIp": ""})),
        )
        .await;
    assert_eq!(updated.body["name"], "ci-2");
    assert_eq!(updated.body["allowedIp"], "");
    assert_eq!(updated.body["permissions"][0]["name"], "suppression");
    assert_eq!(updated.body["key"], value, "the key value never changes");

    let deleted = h.delete("/api-key/1").await;
    assert_eq!(deleted.status, StatusCode::OK);
    assert_eq!(deleted.body, json!(true));
    assert_error(
        &h.get("/api-key/1").await,
        StatusCode::BAD_REQUEST,
        "NOT_FOUND",
    );
    assert_error(
        &h.delete("/api-key/1").await,
        StatusCode::BAD_REQUEST,
        "NOT_FOUND",
    );
    assert!(h.state().api_keys.is_empty());
}

/// Defaults: no permissionIds means type `full`, no name means `key-<id>`; permissionType is
/// not taken on create; unknown permission ids are a 400; duplicate names are allowed.
#[tokio::test]
async fn api_key_defaults_and_permission_catalogue() {
    let h = Harness::new().await;
    let plain = h.create_key(json!({})).await;
    assert_eq!(plain["permissionType"], "full");
    assert_eq!(plain["name"], "key-1");
    assert_eq!(plain["permissions"], json!([]));
    let ignored = h
        .create_key(json!({"name": "x", "permissionType": "admin"}))
        .await;
    assert_eq!(ignored["permissionType"], "full");
    let duplicate = h.create_key(json!({"name": "x"})).await;
    assert_eq!(duplicate["id"], 3);
    assert_error(
        &h.post("/api-key", json!({"permissionIds": [1, 99]})).await,
        StatusCode::BAD_REQUEST,
        "INVALID_REQUEST",
    );
    assert_error(
        &h.put("/api-key/1", Some(json!({"permissionIds": [0]})))
            .await,
        StatusCode::BAD_REQUEST,
        "INVALID_REQUEST",
    );
    assert_error(
        &h.post("/api-key", json!({"allowedIp": "10.0.0.1, not-an-ip"}))
            .await,
        StatusCode::BAD_REQUEST,
        "INVALID_REQUEST",
    );
    assert_eq!(
        h.state().api_keys.len(),
        3,
        "rejected requests create nothing"
    );
}

/// `size` is capped at 100 and `count` is the total, so 150 keys are reached by paging.
#[tokio::test]
async fn paging_past_one_hundred() {
    let h = Harness::new().await;
    for i in 0..150 {
        h.create_key(json!({"name": format!("key-{i:03}")})).await;
    }
    let capped = h.get("/api-key?size=200").await;
    assert_eq!(capped.body["count"], 150);
    assert_eq!(capped.body["apiKeys"].as_array().unwrap().len(), 100);

    let default = h.get("/api-key").await;
    assert_eq!(default.body["apiKeys"].as_array().unwrap().len(), 10);

    let mut seen = BTreeSet::new();
    let mut page = 1;
    loop {
        let reply = h.get(&format!("/api-key?page={page}&size=100")).await;
        assert_eq!(reply.status, StatusCode::OK);
        let items = reply.body["apiKeys"].as_array().unwrap().clone();
        for item in &items {
            seen.insert(item["id"].as_i64().unwrap());
        }
        let count = reply.body["count"].as_u64().unwrap() as usize;
        if page * 100 >= count {
            break;
        }
        page += 1;
    }
    assert_eq!(page, 2);
    assert_eq!(seen.len(), 150);
    let past_end = h.get("/api-key?page=3&size=100").await;
    assert_eq!(past_end.body["apiKeys"], json!([]));
    assert_eq!(past_end.body["count"], 150);

    for bad in [
        "page=abc",
        "page=0",
        "size=0",
        "size=x",
        "page=-1",
        "subAccountId=x",
    ] {
        assert_error(
            &h.get(&format!("/api-key?{bad}")).await,
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
        );
    }
}

/// The key list filters by search, subAccountId and permissionType and sorts as documented.
#[tokio::test]
async fn api_key_filters_and_sort() {
    let h = Harness::new().await;
    h.create_key(json!({"name": "Bravo"})).await;
    h.create_key(json!({"name": "alpha", "permissionIds": [1]}))
        .await;
    h.create_key(json!({"name": "charlie-ALPHA"})).await;
    h.create_sub_account(json!({"name": "shop", "createApiKey": true, "apiKeyName": "shop-key"}))
        .await;

    let names = |reply: &Reply| -> Vec<String> {
        reply.body["apiKeys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        names(&h.get("/api-key?search=alpha").await),
        ["alpha", "charlie-ALPHA"]
    );
    assert_eq!(names(&h.get("/api-key?subAccountId=1").await), ["shop-key"]);
    assert_eq!(
        names(&h.get("/api-key?subAccountId=0&permissionType=custom").await),
        ["alpha"]
    );
    assert_eq!(
        names(&h.get("/api-key?sort=name").await),
        ["alpha", "Bravo", "charlie-ALPHA", "shop-key"]
    );
    assert_eq!(
        names(&h.get("/api-key?sort=-id").await),
        ["shop-key", "charlie-ALPHA", "alpha", "Bravo"]
    );
    assert_eq!(
        names(&h.get("/api-key?sort=name:desc&size=1").await),
        ["shop-key"]
    );
    assert_error(
        &h.get("/api-key?sort=colour").await,
        StatusCode::BAD_REQUEST,
        "INVALID_REQUEST",
    );
    let sub_key = h.get("/api-key?subAccountId=1").await;
    assert_eq!(sub_key.body["apiKeys"][0]["subAccountName"], "shop");
}

// ---------------------------------------------------------------------------------------
// Authentication
// ---------------------------------------------------------------------------------------

/// Missing, malformed, wrong and deleted keys get 401; allowedIp restricts the peer address.
#[tokio::test]
async fn authentication_failures() {
    let h = Harness::new().await;
    assert_error(
        &h.send(Method::GET, "/api-key", None, None).await,
        StatusCode::UNAUTHORIZED,
        "UNAUTHORIZED",
    );
    assert_error(
        &h.send(Method::GET, "/sub-account", Some("wrong"), None)
            .await,
        StatusCode::UNAUTHORIZED,
        "UNAUTHORIZED",
    );
    let basic = h
        .http
        .get(format!("{}/api-key", h.sim.base_url()))
        .header("authorization", format!("Basic {KEY}"))
        .send()
        .await
        .unwrap();
    assert_eq!(basic.status(), StatusCode::UNAUTHORIZED);

    let created = h.create_key(json!({"name": "temp"})).await;
    let value = created["key"].as_str().unwrap().to_string();
    let ok = h
        .send(Method::GET, "/domain/sending", Some(&value), None)
        .await;
    assert_eq!(ok.status, StatusCode::OK, "a created key authenticates");
    h.delete(&format!("/api-key/{}", created["id"])).await;
    assert_error(
        &h.send(Method::GET, "/domain/sending", Some(&value), None)
            .await,
        StatusCode::UNAUTHORIZED,
        "UNAUTHORIZED",
    );

    let elsewhere = h
        .create_key(json!({"allowedIp": "10.9.9.9, 192.0.2.1"}))
        .await;
    let elsewhere = elsewhere["key"].as_str().unwrap();
    assert_error(
        &h.send(Method::GET, "/api-key", Some(elsewhere), None).await,
        StatusCode::UNAUTHORIZED,
        "UNAUTHORIZED",
    );
    let here = h
        .create_key(json!({"allowedIp": "10.9.9.9,127.0.0.1"}))
        .await;
    let here = here["key"].as_str().unwrap();
    assert_eq!(
        h.send(Method::GET, "/api-key", Some(here), None)
            .await
            .status,
        StatusCode::OK
    );

    // Every endpoint demands credentials, the transmission endpoint included.
    for (method, path) in [
        (Method::POST, "/api-key"),
        (Method::GET, "/api-key/1"),
        (Method::PUT, "/sub-account/1"),
        (Method::GET, "/domain/sending/unverified-spf"),
        (Method::PUT, "/domain/sending/1/verify-txt"),
        (
            Method::GET,
            "/analytic/summary?from=2024-01-01&to=2024-01-02",
        ),
        (Method::GET, "/analytic/transmission/tx-1/events"),
        (Method::POST, "/layang/transmissions"),
        (Method::POST, "/v1/layang/transmissions"),
    ] {
        let reply = h.send(method.clone(), path, None, Some(json!({}))).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{method} {path}");
    }
}

/// A sub account's key acts within its sub account: filtered lists, no sub account creation,
/// new keys and domains belong to it.
#[tokio::test]
async fn sub_account_key_scope() {
    let h = Harness::new().await;
    h.create_key(json!({"name": "company"})).await;
    let shop = h
        .create_sub_account(json!({"name": "shop", "createApiKey": true}))
        .await;
    h.create_sub_account(json!({"name": "other"})).await;
    let shop_key = shop["apiKeys"][0]["key"].as_str().unwrap().to_string();
    let as_shop = |method: Method, path: &'static str, body: Option<Value>| {
        let key = shop_key.clone();
        let h = &h;
        async move { h.send(method, path, Some(&key), body).await }
    };

    let keys = as_shop(Method::GET, "/api-key", None).await;
    assert_eq!(keys.body["count"], 1);
    assert_eq!(keys.body["apiKeys"][0]["subAccountId"], shop["id"]);
    let subs = as_shop(Method::GET, "/sub-account", None).await;
    assert_eq!(subs.body["count"], 1);
    assert_eq!(subs.body["subAccounts"][0]["name"], "shop");
    assert_error(
        &as_shop(Method::GET, "/sub-account/2", None).await,
        StatusCode::BAD_REQUEST,
        "NOT_FOUND",
    );
    assert_error(
        &as_shop(Method::GET, "/api-key/1", None).await,
        StatusCode::BAD_REQUEST,
        "NOT_FOUND",
    );
    assert_error(
        &as_shop(Method::POST, "/sub-account", Some(json!({"name": "x"}))).await,
        StatusCode::UNAUTHORIZED,
        "UNAUTHORIZED",
    );
    let own_key = as_shop(Method::POST, "/api-key", Some(json!({"name": "second"}))).await;
    assert_eq!(own_key.status, StatusCode::CREATED);
    assert_eq!(own_key.body["subAccountId"], shop["id"]);
    assert_eq!(own_key.body["subAccountName"], "shop");
    let domain = as_shop(
        Method::POST,
        "/domain/sending",
        Some(json!({"domain": "shop.example"})),
    )
    .await;
    assert_eq!(domain.status, StatusCode::CREATED);
    assert_eq!(domain.body["subAccountId"], shop["id"]);
    let detail = h.get(&format!("/sub-account/{}", shop["id"])).await;
    assert_eq!(detail.body["apiKeys"].as_array().unwrap().len(), 2);
    assert_eq!(detail.body["domains"][0]["domain"], "shop.example");
}

// ---------------------------------------------------------------------------------------
// Sub accounts
// ---------------------------------------------------------------------------------------

/// POST /sub-account answers 200 with the detail (`subAccountName`); the list uses `name`.
#[tokio::test]
async fn sub_account_shapes_and_quirks() {
    let h = Harness::new().await;
    let created = h
        .create_sub_account(json!({
            "name": "shop",
            "ipPoolId": 3,
            "allowedIps": "127.0.0.1",
            "createApiKey": true,
            "apiKeyName": "shop-sender",
            "permissionIds": [1],
            "permissionType": "sender"
        }))
        .await;
    assert_eq!(
        keys_of(&created),
        set(&[
            "id",
            "companyId",
            "subAccountName",
            "status",
            "createdAt",
            "ipPoolId",
            "ipPoolName",
            "apiKeys",
            "domains"
        ])
    );
    assert_eq!(created["subAccountName"], "shop");
    assert_eq!(created["status"], "active");
    assert_eq!(created["ipPoolId"], 3);
    assert_eq!(created["ipPoolName"], "pool-3");
    assert_eq!(created["companyId"], 1);
    assert_eq!(created["domains"], json!([]));
    let key = &created["apiKeys"][0];
    assert_eq!(keys_of(key), set(KEY_LIST_ITEM));
    assert_eq!(key["name"], "shop-sender");
    assert_eq!(key["permissionType"], "sender");
    assert_eq!(key["subAccountId"], created["id"]);
    assert_eq!(key["subAccountName"], "shop");
    let key_detail = h.get(&format!("/api-key/{}", key["id"])).await;
    assert_eq!(key_detail.body["allowedIp"], "127.0.0.1");
    assert_eq!(key_detail.body["permissions"][0]["id"], 1);

    let list = h.get("/sub-account").await;
    assert_eq!(keys_of(&list.body), set(&["count", "subAccounts"]));
    assert_eq!(
        keys_of(&list.body["subAccounts"][0]),
        set(&["id", "name", "status", "createdAt"])
    );
    assert_eq!(list.body["subAccounts"][0]["name"], "shop");

    let plain = h.create_sub_account(json!({})).await;
    assert_eq!(plain["subAccountName"], "sub-account-2");
    assert_eq!(plain["ipPoolId"], 0);
    assert_eq!(plain["ipPoolName"], "default");
    assert_eq!(plain["apiKeys"], json!([]));

    assert_error(
        &h.post("/sub-account", json!({"name": "SHOP"})).await,
        StatusCode::BAD_REQUEST,
        "DUPLICATE",
    );
    assert_error(
        &h.get("/sub-account/99").await,
        StatusCode::BAD_REQUEST,
        "NOT_FOUND",
    );
    assert_error(
        &h.delete("/sub-account/1").await,
        StatusCode::METHOD_NOT_ALLOWED,
        "METHOD_NOT_ALLOWED",
    );
}

/// PUT /sub-account changes only what is sent; list filters search, status and hasApiKey.
#[tokio::test]
async fn sub_account_update_and_filters() {
    let h = Harness::new().await;
    h.create_sub_account(json!({"name": "Alpha Shop", "createApiKey": true}))
        .await;
    h.create_sub_account(json!({"name": "beta", "status": "inactive"}))
        .await;
    h.create_sub_account(json!({"name": "gamma"})).await;

    let updated = h
        .put("/sub-account/3", Some(json!({"status": "suspended"})))
        .await;
    assert_eq!(updated.status, StatusCode::OK);
    assert_eq!(updated.body["subAccountName"], "gamma");
    assert_eq!(updated.body["status"], "suspended");
    let renamed = h
        .put(
            "/sub-account/3",
            Some(json!({"name": "delta", "ipPoolId": 2})),
        )
        .await;
    assert_eq!(renamed.body["subAccountName"], "delta");
    assert_eq!(renamed.body["status"], "suspended");
    assert_eq!(renamed.body["ipPoolName"], "pool-2");
    assert_error(
        &h.put("/sub-account/3", Some(json!({"name": "beta"}))).await,
        StatusCode::BAD_REQUEST,
        "DUPLICATE",
    );
    assert_eq!(
        h.put("/sub-account/3", Some(json!({"name": "DELTA"})))
            .await
            .status,
        StatusCode::OK
    );
    assert_error(
        &h.put("/sub-account/9", Some(json!({"name": "x"}))).await,
        StatusCode::BAD_REQUEST,
        "NOT_FOUND",
    );

    let ids = |reply: Reply| -> Vec<i64> {
        reply.body["subAccounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_i64().unwrap())
            .collect()
    };
    assert_eq!(ids(h.get("/sub-account?search=SHOP").await), [1]);
    assert_eq!(ids(h.get("/sub-account?status=inactive").await), [2]);
    assert_eq!(ids(h.get("/sub-account?hasApiKey=true").await), [1]);
    assert_eq!(ids(h.get("/sub-account?hasApiKey=false").await), [2, 3]);
    assert_eq!(ids(h.get("/sub-account?search=&status=").await), [1, 2, 3]);
    assert_eq!(ids(h.get("/sub-account?page=2&size=2").await), [3]);
    assert_error(
        &h.get("/sub-account?hasApiKey=maybe").await,
        StatusCode::BAD_REQUEST,
        "INVALID_REQUEST",
    );
}

// ---------------------------------------------------------------------------------------
// Sending domains
// ---------------------------------------------------------------------------------------

/// POST /domain/sending answers 201 with every detail field; the list is an array holding
/// `{count, sendingDomain}` whose items spell `subAccountID` and carry `status` as a string.
#[tokio::test]
async fn sending_domain_shapes_and_quirks() {
    let h = Harness::new().await;
    let created = h.create_domain("Mail.Example.COM").await;
    assert_eq!(keys_of(&created), set(DOMAIN_DETAIL));
    assert_eq!(created["domain"], "mail.example.com");
    assert_eq!(created["assignment"], "company");
    assert_eq!(created["status"], json!(["pending"]));
    assert_eq!(created["types"], json!(["sending"]));
    assert_eq!(created["subAccountId"], 0);
    assert_eq!(created["subAccountName"], "");
    assert_eq!(created["spfHostname"], "mail.example.com");
    assert_eq!(
        created["spfValue"],
        "v=spf1 include:_spf.mailtarget.co ~all"
    );
    assert_eq!(created["dkimSelector"], "mt1");
    assert_eq!(created["dkimHostname"], "mt1._domainkey.mail.example.com");
    let public = created["dkimPublicKey"].as_str().unwrap();
    assert_eq!(
        created["dkimValue"],
        format!("v=DKIM1; k=ed25519; p={public}")
    );
    assert_eq!(created["cnameHostname"], "track.mail.example.com");
    assert_eq!(created["cnameValue"], "tracking.mailtarget.co");
    assert_eq!(created["trackingDomainId"], created["id"]);
    assert_eq!(created["trackingDomainName"], "track.mail.example.com");
    for flag in ["spfVerified", "dkimVerified", "cnameVerified"] {
        assert_eq!(created[flag], false, "{flag}");
    }

    let list = h.get("/domain/sending").await;
    assert_eq!(list.status, StatusCode::OK);
    let pages = list.body.as_array().expect("the list is an array");
    assert_eq!(pages.len(), 1);
    assert_eq!(keys_of(&pages[0]), set(&["count", "sendingDomain"]));
    assert_eq!(pages[0]["count"], 1);
    let item = &pages[0]["sendingDomain"][0];
    assert_eq!(keys_of(item), set(DOMAIN_LIST_ITEM));
    assert_eq!(item["status"], "pending");
    assert_eq!(item["subAccountID"], 0);
    assert_eq!(item["default"], false);
    assert_eq!(item["companyId"], 1);

    let read = h.get(&format!("/domain/sending/{}", created["id"])).await;
    assert_eq!(read.body, created);

    let shared = h.put("/domain/sending/1/share", None).await;
    assert_eq!(shared.status, StatusCode::OK);
    assert_eq!(keys_of(&shared.body), set(DOMAIN_DETAIL));
    assert_eq!(shared.body["assignment"], "shared");

    let suggestion = h.get("/domain/sending/1/spf-suggestion").await;
    assert_eq!(suggestion.status, StatusCode::OK);
    assert_eq!(
        keys_of(&suggestion.body),
        set(&["note", "spfRecords", "suggestion"])
    );
    assert_eq!(
        suggestion.body["suggestion"],
        "v=spf1 include:_spf.mailtarget.co ~all"
    );
    assert!(suggestion.body["spfRecords"].is_array());

    let unverified = h.get("/domain/sending/unverified-spf").await;
    assert_eq!(
        unverified.body,
        json!({"count": 1, "data": [{"id": 1, "name": "mail.example.com"}]})
    );

    let deleted = h.delete("/domain/sending/1").await;
    assert_eq!(deleted.status, StatusCode::OK);
    assert_eq!(deleted.body, json!("deleted"));
    assert_error(
        &h.get("/domain/sending/1").await,
        StatusCode::BAD_REQUEST,
        "NOT_FOUND",
    );
    for (method, path) in [
        (Method::DELETE, "/domain/sending/1"),
        (Method::PUT, "/domain/sending/1/share"),
        (Method::PUT, "/domain/sending/1/verify-txt"),
        (Method::GET, "/domain/sending/1/spf-suggestion"),
    ] {
        let reply = h.send(method, path, Some(KEY), None).await;
        assert_error(&reply, StatusCode::BAD_REQUEST, "NOT_FOUND");
    }
}

/// Invalid and duplicate domains are rejected; assignment and note are accepted.
#[tokio::test]
async fn sending_domain_validation() {
    let h = Harness::new().await;
    for bad in [
        json!({}),
        json!({"domain": "localhost"}),
        json!({"domain": "bad_name.com"}),
        json!({"domain": ""}),
    ] {
        let reply = h.post("/domain/sending", bad.clone()).await;
        assert_error(&reply, StatusCode::BAD_REQUEST, "INVALID_REQUEST");
    }
    let created = h
        .post(
            "/domain/sending",
            json!({"domain": "example.org", "assignment": "subaccount", "note": "n"}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    assert_eq!(created.body["assignment"], "subaccount");
    assert_error(
        &h.post("/domain/sending", json!({"domain": "EXAMPLE.org"}))
            .await,
        StatusCode::BAD_REQUEST,
        "DUPLICATE",
    );
    h.create_domain("mail.example.net").await;
    let search = h.get("/domain/sending?search=NET").await;
    assert_eq!(search.body[0]["count"], 1);
    assert_eq!(
        search.body[0]["sendingDomain"][0]["domain"],
        "mail.example.net"
    );
    let paged = h.get("/domain/sending?size=1&page=2").await;
    assert_eq!(paged.body[0]["count"], 2);
    assert_eq!(paged.body[0]["sendingDomain"][0]["id"], 2);
    assert_error(
        &h.get("/domain/sending?page=zero").await,
        StatusCode::BAD_REQUEST,
        "INVALID_REQUEST",
    );
}

/// With verify_after_calls = 2, the second verify-txt call verifies the domain; the answer is
/// an array with that domain's detail.
#[tokio::test]
async fn verify_after_calls() {
    let h = Harness::with(|c| c.verify_after_calls = 2).await;
    h.create_domain("a.example.com").await;
    h.create_domain("b.example.com").await;

    let first = h.put("/domain/sending/1/verify-txt", None).await;
    assert_eq!(first.status, StatusCode::OK);
    let details = first.body.as_array().expect("an array of details");
    assert_eq!(details.len(), 1);
    assert_eq!(keys_of(&details[0]), set(DOMAIN_DETAIL));
    assert_eq!(details[0]["domain"], "a.example.com");
    assert_eq!(details[0]["status"], json!(["pending"]));
    assert_eq!(details[0]["dkimVerified"], false);

    let second = h.put("/domain/sending/1/verify-txt", None).await;
    let detail = &second.body[0];
    assert_eq!(detail["status"], json!(["verified"]));
    for flag in ["spfVerified", "dkimVerified", "cnameVerified"] {
        assert_eq!(detail[flag], true, "{flag}");
    }
    let other = h.get("/domain/sending/2").await;
    assert_eq!(
        other.body["status"],
        json!(["pending"]),
        "only the named domain is checked"
    );

    let list = h.get("/domain/sending?status=verified").await;
    assert_eq!(list.body[0]["count"], 1);
    assert_eq!(list.body[0]["sendingDomain"][0]["status"], "verified");
    let unverified = h.get("/domain/sending/unverified-spf").await;
    assert_eq!(
        unverified.body,
        json!({"count": 1, "data": [{"id": 2, "name": "b.example.com"}]})
    );
    let suggestion = h.get("/domain/sending/1/spf-suggestion").await;
    assert_eq!(
        suggestion.body["spfRecords"],
        json!(["v=spf1 include:_spf.mailtarget.co ~all"])
    );

    let immediate = Harness::with(|c| c.verify_after_calls = 0).await;
    let created = immediate.create_domain("now.example.com").await;
    assert_eq!(created["status"], json!(["verified"]));
}

/// The DKIM private key is a real PKCS#8 Ed25519 key whose signatures verify with the
/// published public key.
#[tokio::test]
async fn dkim_key_pair_matches() {
    let h = Harness::new().await;
    let created = h.create_domain("signed.example.com").await;
    let pem_text = created["dkimPrivateKey"].as_str().unwrap();
    let parsed = pem::parse(pem_text).expect("PEM");
    assert_eq!(parsed.tag(), "PRIVATE KEY");
    let pair = Ed25519KeyPair::from_pkcs8(parsed.contents()).expect("PKCS#8 Ed25519");
    let message = b"From: a@signed.example.com";
    let signature = pair.sign(message);
    let public = STANDARD
        .decode(created["dkimPublicKey"].as_str().unwrap())
        .expect("base64 public key");
    UnparsedPublicKey::new(&ED25519, &public)
        .verify(message, signature.as_ref())
        .expect("signature verifies with the published key");
    let other = h.create_domain("other.example.com").await;
    assert_ne!(other["dkimPublicKey"], created["dkimPublicKey"]);
}

// ---------------------------------------------------------------------------------------
// Transmission and events
// ---------------------------------------------------------------------------------------

fn message(to: &[&str], transactional: Option<bool>) -> Value {
    let mut body = json!({
        "subject": "Hello",
        "from": {"email": "shop@example.com", "name": "Shop"},
        "to": to.iter().map(|e| json!({"email": e, "name": "R"})).collect::<Vec<_>>(),
        "bodyHtml": "<p><a href=\"https://example.com/offer\">offer</a> <a href=\"https://example.com/2\">2</a></p>",
        "bodyText": "hello",
    });
    if let Some(flag) = transactional {
        body["optionsAttributes"] = json!({"transactional": flag});
    }
    body
}

async fn events_of(h: &Harness, id: &str) -> Vec<(String, String)> {
    let reply = h.get(&format!("/analytic/transmission/{id}/events")).await;
    assert_eq!(reply.status, StatusCode::OK, "{reply:?}");
    assert_eq!(keys_of(&reply.body), set(&["events"]));
    reply.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["recipient"].as_str().unwrap().to_string(),
                e["type"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn kinds_for(events: &[(String, String)], recipient: &str) -> Vec<String> {
    events
        .iter()
        .filter(|(r, _)| r == recipient)
        .map(|(_, k)| k.clone())
        .collect()
}

/// The suppression list applies exactly when `transactional` is `false`; absent or `true`
/// delivers.
#[tokio::test]
async fn suppression_exactly_when_transactional_false() {
    let h = Harness::with(|c| c.suppress = vec!["Blocked@Example.com".into()]).await;
    for (transactional, expected) in [
        (Some(false), vec!["suppressed"]),
        (Some(true), vec!["delivered", "opened", "clicked"]),
        (None, vec!["delivered", "opened", "clicked"]),
    ] {
        let id = h
            .transmit(message(
                &["blocked@example.COM", "free@example.com"],
                transactional,
            ))
            .await;
        let events = events_of(&h, &id).await;
        assert_eq!(
            kinds_for(&events, "blocked@example.COM"),
            expected,
            "{transactional:?}"
        );
        assert_eq!(
            kinds_for(&events, "free@example.com"),
            ["delivered", "opened", "clicked"],
            "{transactional:?}"
        );
    }
    let state = h.state();
    assert_eq!(state.transmissions.len(), 3);
    assert_eq!(state.transmissions[0].transactional, Some(false));
    assert_eq!(state.transmissions[2].transactional, None);
}

/// The documented event rules, the event shape and the transmission status shape.
#[tokio::test]
async fn event_rules_and_status() {
    let h = Harness::new().await;
    let mut body = message(&["ann@example.com", "bounce-1@example.com"], None);
    body["cc"] = json!([{"email": "noopen@example.com"}]);
    body["bcc"] = json!([{"email": "unsubscribe.me@example.com"}, {"name": "no email"}]);
    let id = h.transmit(body).await;
    assert!(id.starts_with("tx-"));

    let reply = h.get(&format!("/analytic/transmission/{id}/events")).await;
    let events = reply.body["events"].as_array().unwrap();
    for event in events {
        assert_eq!(
            keys_of(event),
            set(&[
                "type",
                "recipient",
                "friendlyFrom",
                "subject",
                "reason",
                "timestamp",
                "url",
                "userAgent"
            ])
        );
        assert_eq!(event["friendlyFrom"], "Shop <shop@example.com>");
        assert_eq!(event["subject"], "Hello");
        assert!(event["timestamp"].is_i64());
    }
    let pairs = events_of(&h, &id).await;
    assert_eq!(
        kinds_for(&pairs, "ann@example.com"),
        ["delivered", "opened", "clicked"]
    );
    assert_eq!(kinds_for(&pairs, "bounce-1@example.com"), ["bounced"]);
    assert_eq!(
        kinds_for(&pairs, "noopen@example.com"),
        ["delivered", "clicked"]
    );
    assert_eq!(
        kinds_for(&pairs, "unsubscribe.me@example.com"),
        ["delivered", "opened", "clicked", "unsubscribed"]
    );
    let clicked = events.iter().find(|e| e["type"] == "clicked").unwrap();
    assert_eq!(clicked["url"], "https://example.com/offer");
    assert!(!clicked["userAgent"].as_str().unwrap().is_empty());
    let bounced = events.iter().find(|e| e["type"] == "bounced").unwrap();
    assert!(!bounced["reason"].as_str().unwrap().is_empty());

    let status = h.get(&format!("/analytic/transmission/{id}")).await;
    assert_eq!(status.status, StatusCode::OK);
    assert_eq!(
        keys_of(&status.body),
        set(&[
            "transmissionId",
            "subject",
            "status",
            "createdAt",
            "recipientCount",
            "from",
            "stats"
        ])
    );
    assert_eq!(status.body["transmissionId"], id);
    assert_eq!(status.body["recipientCount"], 4);
    assert_eq!(
        status.body["from"],
        json!({"email": "shop@example.com", "name": "Shop"})
    );
    assert_eq!(
        status.body["stats"],
        json!({"delivered": 3, "opened": 2, "clicked": 3, "bounced": 1, "unsubscribed": 1})
    );

    // Tracking switched off: no opens, no clicks.
    let mut quiet = message(&["ann@example.com"], None);
    quiet["optionsAttributes"] = json!({"openTracking": false, "clickTracking": false});
    let quiet_id = h.transmit(quiet).await;
    assert_eq!(
        kinds_for(&events_of(&h, &quiet_id).await, "ann@example.com"),
        ["delivered"]
    );

    // Unknown ids: the interface lists only 401 and 500 here.
    for path in [
        "/analytic/transmission/nope",
        "/analytic/transmission/nope/events",
    ] {
        assert_error(
            &h.get(path).await,
            StatusCode::INTERNAL_SERVER_ERROR,
            "NOT_FOUND",
        );
    }
}

/// Both transmission paths work; 400 bodies have only `error` and `message`.
#[tokio::test]
async fn transmission_validation() {
    let h = Harness::new().await;
    let ok = h
        .post("/layang/transmissions", message(&["a@example.com"], None))
        .await;
    assert_eq!(ok.status, StatusCode::OK);
    assert_eq!(keys_of(&ok.body), set(&["transmissionId"]));

    let valid = message(&["a@example.com"], None);
    let without = |field: &str| {
        let mut body = valid.clone();
        body.as_object_mut().unwrap().remove(field);
        body
    };
    let with = |field: &str, value: Value| {
        let mut body = valid.clone();
        body[field] = value;
        body
    };
    for (case, body) in [
        ("no subject", without("subject")),
        ("blank subject", with("subject", json!("  "))),
        ("no from", without("from")),
        ("no to", without("to")),
        ("empty to", with("to", json!([]))),
        ("to without email", with("to", json!([{"name": "x"}]))),
        (
            "bad address",
            with("to", json!([{"email": "not-an-address"}])),
        ),
        (
            "to not an array",
            with("to", json!({"email": "a@example.com"})),
        ),
        ("subject not a string", with("subject", json!(5))),
        (
            "transactional not a bool",
            with("optionsAttributes", json!({"transactional": "no"})),
        ),
        (
            "metadata values not strings",
            with("metadata", json!({"a": 1})),
        ),
        ("attachments wrong", with("attachments", json!("file"))),
        ("not an object", json!([1, 2])),
    ] {
        for path in ["/v1/layang/transmissions", "/layang/transmissions"] {
            let reply = h.post(path, body.clone()).await;
            assert_eq!(
                reply.status,
                StatusCode::BAD_REQUEST,
                "{case} {path}: {reply:?}"
            );
            assert_eq!(keys_of(&reply.body), set(&["error", "message"]), "{case}");
        }
    }
    assert_eq!(
        h.state().transmissions.len(),
        1,
        "rejected transmissions are not recorded"
    );
}

// ---------------------------------------------------------------------------------------
// Analytics
// ---------------------------------------------------------------------------------------

/// Summary and breakdown aggregate events of transmissions created in the period; `from`
/// and `to` accept dates and RFC 3339 and are required.
#[tokio::test]
async fn analytics_summary_and_breakdown() {
    let h = Harness::new().await;
    let shop = h
        .create_sub_account(json!({"name": "shop", "createApiKey": true}))
        .await;
    let shop_key = shop["apiKeys"][0]["key"].as_str().unwrap().to_string();
    h.transmit(message(&["a@example.com", "bounce@example.com"], None))
        .await;
    let reply = h
        .send(
            Method::POST,
            "/layang/transmissions",
            Some(&shop_key),
            Some(message(&["noopen@example.com"], None)),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);

    // The day the transmissions were recorded (not the clock, which may pass midnight).
    let created =
        chrono::DateTime::from_timestamp_millis(h.state().transmissions[0].created_at).unwrap();
    let today = created.format("%Y-%m-%d").to_string();
    let tomorrow = (created + chrono::Duration::days(1))
        .format("%Y-%m-%d")
        .to_string();
    let summary = h
        .get(&format!("/analytic/summary?from={today}&to={tomorrow}"))
        .await;
    assert_eq!(summary.status, StatusCode::OK, "{summary:?}");
    assert_eq!(keys_of(&summary.body), set(SUMMARY));
    assert_eq!(
        summary.body["period"],
        json!({"from": today, "to": tomorrow})
    );
    assert_eq!(summary.body["sent"], 3);
    assert_eq!(summary.body["delivered"], 2);
    assert_eq!(summary.body["bounced"], 1);
    assert_eq!(summary.body["opened"], 1);
    assert_eq!(summary.body["clicked"], 2);
    assert_eq!(summary.body["unsubscribed"], 0);
    let rate = summary.body["deliveryRate"].as_f64().unwrap();
    assert!((rate - 2.0 / 3.0).abs() < 1e-9);
    assert!(summary.body["unsubscribeRate"].is_f64());

    let same_day = h
        .get(&format!("/analytic/summary?from={today}&to={today}"))
        .await;
    assert_eq!(
        same_day.body["sent"], 3,
        "a date `to` includes the whole day"
    );
    let rfc = h
        .get("/analytic/summary?from=2000-01-01T00:00:00Z&to=2000-01-02T00:00:00%2B07:00")
        .await;
    assert_eq!(rfc.status, StatusCode::OK);
    assert_eq!(rfc.body["sent"], 0);
    assert_eq!(rfc.body["deliveryRate"], 0.0);
    let scoped = h
        .send(
            Method::GET,
            &format!("/analytic/summary?from={today}&to={today}"),
            Some(&shop_key),
            None,
        )
        .await;
    assert_eq!(
        scoped.body["sent"], 1,
        "a sub account key sees its own traffic"
    );
    let filtered = h
        .get(&format!(
            "/analytic/summary?from={today}&to={today}&sandbox=false&sandboxSubAccountId={}",
            shop["id"]
        ))
        .await;
    assert_eq!(filtered.body["sent"], 1);

    for bad in [
        "to=2024-01-01".to_string(),
        "from=2024-01-01".to_string(),
        "from=yesterday&to=2024-01-01".to_string(),
        "from=2024-01-02&to=2024-01-01".to_string(),
        format!("from={today}&to={today}&sandbox=perhaps"),
    ] {
        assert_error(
            &h.get(&format!("/analytic/summary?{bad}")).await,
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
        );
    }

    let by_day = h
        .get(&format!(
            "/analytic/summary/breakdown?from={today}&to={today}"
        ))
        .await;
    assert_eq!(by_day.status, StatusCode::OK);
    let days = by_day.body.as_array().unwrap();
    assert_eq!(days.len(), 1);
    assert_eq!(keys_of(&days[0]), set(SUMMARY));
    assert_eq!(days[0]["name"], today);
    assert_eq!(days[0]["sent"], 3);

    let by_sub = h
        .get(&format!(
            "/analytic/summary/breakdown?from={today}&to={today}&groupBy=subAccount"
        ))
        .await;
    let groups = by_sub.body.as_array().unwrap();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0]["sent"], 2);
    assert_eq!(groups[1]["name"], "shop");
    assert_eq!(groups[1]["sent"], 1);
    assert_error(
        &h.get(&format!(
            "/analytic/summary/breakdown?from={today}&to={today}&groupBy=planet"
        ))
        .await,
        StatusCode::BAD_REQUEST,
        "INVALID_REQUEST",
    );
    assert_error(
        &h.get("/analytic/summary/breakdown").await,
        StatusCode::BAD_REQUEST,
        "INVALID_REQUEST",
    );
}

// ---------------------------------------------------------------------------------------
// Malformed input
// ---------------------------------------------------------------------------------------

/// Malformed bodies on every write endpoint are answered 400 in the error shape (a body over the
/// route's limit 413), never 500 and never a dropped connection.
#[tokio::test]
async fn malformed_bodies_are_400() {
    let h = Harness::new().await;
    h.create_key(json!({"name": "k"})).await;
    h.create_sub_account(json!({"name": "s"})).await;
    let oversize = format!(
        "{{\"name\": \"{}\"}}",
        "a".repeat(MAX_MANAGEMENT_BODY_BYTES + 10)
    )
    .into_bytes();
    let common: Vec<(&str, Vec<u8>)> = vec![
        ("truncated", b"{".to_vec()),
        ("array", b"[]".to_vec()),
        ("string", b"\"x\"".to_vec()),
        ("trailing", b"{} {}".to_vec()),
        ("not utf-8", vec![0xff, 0xfe]),
        ("oversize", oversize),
    ];
    let specific: Vec<(Method, &str, Vec<Value>)> = vec![
        (
            Method::POST,
            "/api-key",
            vec![
                json!({"name": 5}),
                json!({"permissionIds": "1"}),
                json!({"permissionIds": [1.5]}),
                json!({"allowedIp": ["x"]}),
                json!({"name": ""}),
            ],
        ),
        (
            Method::PUT,
            "/api-key/1",
            vec![
                json!({"permissionType": 1}),
                json!({"permissionIds": [null]}),
                json!({"name": {}}),
                json!({"permissionType": ""}),
            ],
        ),
        (
            Method::POST,
            "/sub-account",
            vec![
                json!({"ipPoolId": "1"}),
                json!({"ipPoolId": -1}),
                json!({"createApiKey": "yes"}),
                json!({"createApiKey": true, "permissionIds": [42]}),
                json!({"allowedIps": "1.2.3"}),
                json!({"name": "x".repeat(300)}),
            ],
        ),
        (
            Method::PUT,
            "/sub-account/1",
            vec![
                json!({"ipPoolId": 1.5}),
                json!({"status": false}),
                json!({"name": "   "}),
            ],
        ),
        (
            Method::POST,
            "/domain/sending",
            vec![
                json!({"domain": 5}),
                json!({"domain": "a.com", "note": 1}),
                json!({"domain": "x.com", "assignment": []}),
            ],
        ),
        (
            Method::PUT,
            "/_simulator/faults",
            vec![
                json!({"errorRate": 2.0}),
                json!({"seed": "x"}),
                json!({"bogus": 1}),
            ],
        ),
    ];
    for (method, path, bodies) in specific {
        let admin = path.starts_with("/_simulator");
        for body in bodies {
            let key = if admin { ADMIN } else { KEY };
            let reply = h
                .send(method.clone(), path, Some(key), Some(body.clone()))
                .await;
            assert_error(&reply, StatusCode::BAD_REQUEST, "INVALID_REQUEST");
            assert!(
                !reply.body["message"].as_str().unwrap().is_empty(),
                "{path} {body}"
            );
        }
        if admin {
            continue;
        }
        for (case, bytes) in &common {
            let reply = h
                .raw(
                    method.clone(),
                    path,
                    Some("application/json"),
                    bytes.clone(),
                )
                .await;
            let (status, code) = if *case == "oversize" {
                (StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE")
            } else {
                (StatusCode::BAD_REQUEST, "INVALID_REQUEST")
            };
            assert_eq!(reply.status, status, "{method} {path} {case}");
            assert_error(&reply, status, code);
        }
        let reply = h
            .raw(method.clone(), path, Some("text/plain"), b"{}".to_vec())
            .await;
        assert_error(&reply, StatusCode::BAD_REQUEST, "INVALID_REQUEST");
        let reply = h.raw(method.clone(), path, None, b"{}".to_vec()).await;
        assert_error(&reply, StatusCode::BAD_REQUEST, "INVALID_REQUEST");
    }
    let reply = h
        .raw(
            Method::POST,
            "/layang/transmissions",
            Some("application/json"),
            b"{".to_vec(),
        )
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(keys_of(&reply.body), set(&["error", "message"]));

    // Field names appear in type errors.
    let reply = h
        .post("/api-key", json!({"permissionIds": [1, "two"]}))
        .await;
    assert!(
        reply.body["message"]
            .as_str()
            .unwrap()
            .contains("permissionIds"),
        "{reply:?}"
    );

    let state = h.state();
    assert_eq!(state.api_keys.len(), 1);
    assert_eq!(state.sub_accounts.len(), 1);
    assert!(state.sending_domains.is_empty());
}

/// Non-integer path ids are a 400; unknown paths a 404 and wrong methods a 405, all in the
/// error shape.
#[tokio::test]
async fn bad_paths_and_methods() {
    let h = Harness::new().await;
    for (method, path) in [
        (Method::GET, "/api-key/abc"),
        (Method::PUT, "/api-key/1.5"),
        (Method::DELETE, "/api-key/%20"),
        (Method::GET, "/api-key/%FF"),
        (Method::GET, "/sub-account/x"),
        (Method::PUT, "/sub-account/99999999999999999999"),
        (Method::GET, "/domain/sending/x"),
        (Method::DELETE, "/domain/sending/-"),
        (Method::PUT, "/domain/sending/x/share"),
        (Method::PUT, "/domain/sending/x/verify-txt"),
        (Method::GET, "/domain/sending/x/spf-suggestion"),
    ] {
        let reply = h.send(method.clone(), path, Some(KEY), None).await;
        assert_error(&reply, StatusCode::BAD_REQUEST, "INVALID_REQUEST");
    }
    assert_error(
        &h.get("/nope").await,
        StatusCode::NOT_FOUND,
        "ROUTE_NOT_FOUND",
    );
    assert_error(
        &h.send(Method::PATCH, "/api-key/1", Some(KEY), None).await,
        StatusCode::METHOD_NOT_ALLOWED,
        "METHOD_NOT_ALLOWED",
    );
    assert_error(
        &h.send(Method::GET, "/layang/transmissions", Some(KEY), None)
            .await,
        StatusCode::METHOD_NOT_ALLOWED,
        "METHOD_NOT_ALLOWED",
    );
}

// ---------------------------------------------------------------------------------------
// Faults, control endpoints, request log
// ---------------------------------------------------------------------------------------

async fn statuses(h: &Harness, n: usize) -> Vec<u16> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(h.get("/sub-account").await.status.as_u16());
    }
    out
}

/// A seeded error rate gives the same sequence of failures when the seed is set again.
#[tokio::test]
async fn fault_injection_is_deterministic() {
    let h = Harness::new().await;
    let config = FaultConfig {
        error_rate: 0.4,
        seed: 1234,
        ..FaultConfig::default()
    };
    h.sim.faults().set(config.clone());
    let first = statuses(&h, 40).await;
    assert!(first.contains(&500) && first.contains(&200), "{first:?}");
    h.sim.faults().set(config);
    assert_eq!(statuses(&h, 40).await, first);

    // The same through the control endpoint.
    let reply = h
        .send(
            Method::PUT,
            "/_simulator/faults",
            Some(ADMIN),
            Some(json!({"errorRate": 0.4, "seed": 1234})),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(
        reply.body,
        json!({"errorRate": 0.4, "latencyMs": 0, "rateLimitRps": null, "dropResponseRate": 0.0, "seed": 1234})
    );
    assert_eq!(statuses(&h, 40).await, first);
    h.sim.faults().clear();
    assert!(statuses(&h, 10).await.iter().all(|s| *s == 200));
}

/// fail_next answers exactly n requests; the rate limit answers 429 with Retry-After.
#[tokio::test]
async fn fail_next_and_rate_limit() {
    let h = Harness::new().await;
    h.sim.faults().fail_next(2, 503);
    let first = h.get("/api-key").await;
    assert_error(&first, StatusCode::SERVICE_UNAVAILABLE, "INTERNAL_ERROR");
    assert_eq!(statuses(&h, 2).await, [503, 200]);

    let reply = h
        .send(
            Method::POST,
            "/_simulator/fail-next",
            Some(ADMIN),
            Some(json!({"count": 1, "status": 429})),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    let limited = h.get("/api-key").await;
    assert_error(&limited, StatusCode::TOO_MANY_REQUESTS, "RATE_LIMITED");
    assert_eq!(limited.retry_after.as_deref(), Some("1"));

    h.sim.faults().set(FaultConfig {
        rate_limit_rps: Some(1),
        ..FaultConfig::default()
    });
    let mut burst = Vec::new();
    for _ in 0..3 {
        burst.push(h.get("/api-key").await);
    }
    assert_eq!(
        burst[0].status,
        StatusCode::OK,
        "the first request of a window passes"
    );
    let limited = burst
        .iter()
        .find(|r| r.status == StatusCode::TOO_MANY_REQUESTS)
        .expect("a burst over the limit gets 429");
    assert_error(limited, StatusCode::TOO_MANY_REQUESTS, "RATE_LIMITED");
    let seconds: u64 = limited
        .retry_after
        .as_deref()
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!(seconds >= 1);
}

/// A lost response still commits the write: the client sees a failure, the key exists.
#[tokio::test]
async fn dropped_responses_commit_writes() {
    let h = Harness::new().await;
    h.sim.faults().set(FaultConfig {
        drop_response_rate: 1.0,
        seed: 5,
        ..FaultConfig::default()
    });
    let mut resets = 0;
    let mut server_errors = 0;
    for i in 0..8 {
        let result = h
            .http
            .post(format!("{}/api-key", h.sim.base_url()))
            .bearer_auth(KEY)
            .json(&json!({"name": format!("lost-{i}")}))
            .send()
            .await;
        match result {
            Ok(response) => match response.bytes().await {
                Ok(bytes) if response_is_error(&bytes) => server_errors += 1,
                Ok(_) => panic!("a lost response must not arrive complete"),
                Err(_) => resets += 1,
            },
            Err(_) => resets += 1,
        }
    }
    assert!(
        resets > 0 && server_errors > 0,
        "resets {resets}, 500s {server_errors}"
    );
    assert_eq!(h.state().api_keys.len(), 8, "every write was committed");
    h.sim.faults().clear();
    assert_eq!(h.get("/api-key").await.body["count"], 8);
}

fn response_is_error(bytes: &[u8]) -> bool {
    serde_json::from_slice::<Value>(bytes).is_ok_and(|v| v["error"] == "INTERNAL_ERROR")
}

/// Latency applies to every request, so concurrent requests overlap in flight.
#[tokio::test]
async fn latency_and_concurrency_tracking() {
    let h = Harness::with(|c| c.latency = Duration::from_millis(500)).await;
    let replies = futures::future::join_all((0..4).map(|_| h.get("/api-key"))).await;
    assert!(replies.iter().all(|r| r.status == StatusCode::OK));
    assert!(
        h.sim.max_concurrent_requests() >= 2,
        "{}",
        h.sim.max_concurrent_requests()
    );
    assert!(
        h.sim
            .request_log()
            .iter()
            .all(|r| r.duration >= Duration::from_millis(500))
    );
}

/// The request log records interface requests in order (not control requests); the control
/// endpoints need the admin key.
#[tokio::test]
async fn request_log_and_control_endpoints() {
    let h = Harness::new().await;
    h.create_key(json!({"name": "k"})).await;
    h.get("/api-key?page=1&size=5").await;
    h.send(Method::GET, "/api-key", None, None).await;
    h.put("/domain/sending/7/verify-txt", None).await;

    let log = h.sim.request_log();
    let summary: Vec<(String, String, Option<String>, u16, bool)> = log
        .iter()
        .map(|r| {
            (
                r.method.clone(),
                r.path.clone(),
                r.query.clone(),
                r.status,
                r.is_write(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("POST".into(), "/api-key".into(), None, 201, true),
            (
                "GET".into(),
                "/api-key".into(),
                Some("page=1&size=5".into()),
                200,
                false
            ),
            ("GET".into(), "/api-key".into(), None, 401, false),
            (
                "PUT".into(),
                "/domain/sending/7/verify-txt".into(),
                None,
                400,
                true
            ),
        ]
    );
    assert!(log.iter().all(|r| r.unix_ms > 1_600_000_000_000));

    let over_http = h
        .send(Method::GET, "/_simulator/requests", Some(ADMIN), None)
        .await;
    assert_eq!(over_http.status, StatusCode::OK);
    let entries = over_http.body.as_array().unwrap();
    assert_eq!(entries.len(), 4);
    assert_eq!(
        keys_of(&entries[1]),
        set(&[
            "method",
            "path",
            "query",
            "status",
            "unixMs",
            "durationMs",
            "userAgent",
            "keyId"
        ])
    );
    assert_eq!(entries[1]["query"], "page=1&size=5");
    assert!(
        entries[1]["keyId"].is_null(),
        "the company key of the configuration is no API key: {}",
        entries[1]
    );
    assert!(
        entries[1]["userAgent"].is_null(),
        "this client sends no User-Agent: {}",
        entries[1]
    );

    for key in [None, Some(KEY)] {
        let reply = h.send(Method::GET, "/_simulator/faults", key, None).await;
        assert_error(&reply, StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    }
    let faults = h
        .send(Method::GET, "/_simulator/faults", Some(ADMIN), None)
        .await;
    assert_eq!(faults.body["errorRate"], 0.0);
    let cleared = h
        .send(Method::DELETE, "/_simulator/requests", Some(ADMIN), None)
        .await;
    assert_eq!(cleared.status, StatusCode::NO_CONTENT);
    assert!(
        h.sim.request_log().is_empty(),
        "control requests are not logged"
    );
    h.get("/api-key").await;
    assert_eq!(h.sim.request_log().len(), 1);
    h.sim.clear_request_log();
    assert!(h.sim.request_log().is_empty());
}

/// Without an admin key the company key protects the control endpoints; URLs are as
/// documented; shutdown stops the server.
#[tokio::test]
async fn urls_admin_default_and_shutdown() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let sim = Simulator::start(SimulatorConfig::new(KEY)).await.unwrap();
    assert_eq!(sim.base_url(), format!("http://{}", sim.addr()));
    assert_eq!(sim.transmission_url(), format!("http://{}/v1", sim.addr()));
    assert_ne!(sim.addr().port(), 0);
    let http = reqwest::Client::builder().timeout(TIMEOUT).build().unwrap();
    let faults = http
        .get(format!("{}/_simulator/faults", sim.base_url()))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(faults.status(), StatusCode::OK);
    let transmission = http
        .post(format!("{}/layang/transmissions", sim.transmission_url()))
        .bearer_auth(KEY)
        .json(&message(&["a@example.com"], None))
        .send()
        .await
        .unwrap();
    assert_eq!(transmission.status(), StatusCode::OK);
    let addr = sim.addr();
    tokio::time::timeout(TIMEOUT, sim.shutdown())
        .await
        .expect("shutdown completes");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "no longer listening"
    );
}
