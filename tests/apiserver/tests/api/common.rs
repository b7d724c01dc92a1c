//! Helpers shared by the test API server's integration tests.
#![allow(dead_code)]

use std::future::Future;
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, PostParams};
use kube::core::ApiResource;
use mailtarget_test_apiserver::TestApiServer;
use serde_json::{Value, json};

/// The Widget fixture CRD as JSON.
pub fn widget_crd() -> Value {
    let text = include_str!("../fixtures/widget-crd.yaml");
    serde_yaml::from_str(text).expect("fixture parses")
}

/// ApiResource of `example.com/v1` Widgets.
pub fn widget_ar() -> ApiResource {
    ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    }
}

/// Api for Widgets in `ns`.
pub fn widgets(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &widget_ar())
}

/// A Widget object.
pub fn widget(name: &str, domain: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"domain": domain, "size": 2}
    }))
    .expect("valid widget")
}

/// Raw HTTP helper around reqwest for status-code and header assertions.
pub struct Raw {
    pub base: String,
    pub http: reqwest::Client,
}

/// An HTTP answer: status, JSON body (Null when not JSON), headers.
pub struct Answer {
    pub status: u16,
    pub body: Value,
    pub text: String,
    pub headers: reqwest::header::HeaderMap,
}

impl Raw {
    pub fn new(server: &TestApiServer) -> Raw {
        // reqwest is built without a default TLS crypto provider; plain HTTP still needs one set.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Raw {
            base: server.url(),
            http: reqwest::Client::new(),
        }
    }

    pub async fn send(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<Value>,
    ) -> Answer {
        self.send_with(
            method,
            path,
            content_type,
            None,
            body.map(|b| b.to_string().into_bytes()),
        )
        .await
    }

    pub async fn send_with(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        accept: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> Answer {
        let m = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut req = self.http.request(m, format!("{}{}", self.base, path));
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        if let Some(a) = accept {
            req = req.header("accept", a);
        }
        if let Some(b) = body {
            req = req.body(b);
        }
        let resp = req.send().await.expect("request sent");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Answer {
            status,
            body,
            text,
            headers,
        }
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.send("GET", path, None, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Answer {
        self.send("POST", path, Some("application/json"), Some(body))
            .await
    }

    /// Reads a watch stream until `n` events arrived or `timeout` passed.
    pub async fn watch_events(&self, path: &str, n: usize, timeout: Duration) -> Vec<Value> {
        use futures::StreamExt;
        let resp = self
            .http
            .get(format!("{}{}", self.base, path))
            .send()
            .await
            .expect("watch sent");
        let mut stream = resp.bytes_stream();
        let mut buf = Vec::new();
        let mut events = Vec::new();
        let deadline = tokio::time::Instant::now() + timeout;
        while events.len() < n {
            let next = tokio::time::timeout_at(deadline, stream.next()).await;
            match next {
                Ok(Some(Ok(chunk))) => {
                    buf.extend_from_slice(&chunk);
                    while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                        let line: Vec<u8> = buf.drain(..=pos).collect();
                        if let Ok(v) = serde_json::from_slice::<Value>(&line) {
                            events.push(v);
                        }
                    }
                }
                _ => break,
            }
        }
        events
    }
}

/// Installs the Widget CRD through the API and waits until Widgets are served.
pub async fn install_widget_crd(client: &kube::Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(widget_crd()).expect("typed CRD");
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("CRD created");
}

/// Polls `f` every 20 ms until it returns `Some`, failing the test after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(start.elapsed() < timeout, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts a server with the Widget CRD installed and namespace `test` created.
pub async fn server_with_widgets() -> (TestApiServer, kube::Client) {
    let server = TestApiServer::start().await.expect("server starts");
    let client = server.client();
    install_widget_crd(&client).await;
    create_namespace(&client, "test").await;
    (server, client)
}

/// Creates a namespace.
pub async fn create_namespace(client: &kube::Client, name: &str) {
    use k8s_openapi::api::core::v1::Namespace;
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).expect("ns");
    api.create(&PostParams::default(), &ns)
        .await
        .expect("namespace created");
}
