//! The HTTP front: [`TestApiServer`] (listener on its own thread and Tokio runtime, so tests may
//! block, e.g. while kubectl runs), request logging, injected latency and failures, and routing of
//! discovery, OpenAPI and resource paths (Kubernetes API concepts, "Resource URIs").

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::sync::{oneshot, watch};
use tower::ServiceExt as _;

use crate::faults::{ConnectionCut, Cut, FaultState, Faults, LoggedRequest};
use crate::handlers;
use crate::resources::ResourceType;
use crate::status::ApiError;
use crate::store::Store;
use crate::{discovery, openapi};

/// Tunables of a [`TestApiServer`].
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// How many change events are kept for watches from an older resourceVersion; a watch or
    /// exact list from before the window gets 410 Expired. Default 1000.
    pub history_window: usize,
    /// Interval between BOOKMARK events on watches that allow them. Default 1 s.
    pub bookmark_interval: Duration,
    /// Largest request body accepted, in bytes. Default 16 MiB.
    pub max_body_bytes: usize,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            history_window: 1000,
            bookmark_interval: Duration::from_secs(1),
            max_body_bytes: 16 << 20,
        }
    }
}

/// State shared by all request handlers.
pub(crate) struct Shared {
    pub store: Mutex<Store>,
    pub faults: Arc<FaultState>,
    pub drop_tx: Arc<watch::Sender<u64>>,
    pub opts: ServerOptions,
}

impl Shared {
    /// Locks the store (a poisoned lock is recovered: the state is plain data).
    pub fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A running emulated Kubernetes API server on `127.0.0.1` over plain HTTP, no authentication.
///
/// Serves Namespaces, Secrets, ConfigMaps, Events (core/v1 and events.k8s.io/v1), Leases and
/// CustomResourceDefinitions, plus every kind the CRDs created through it define. See the crate
/// README for what is simulated and what is refused with 501.
pub struct TestApiServer {
    url: String,
    shared: Arc<Shared>,
    /// Holds the kubeconfig file; removed on drop.
    _kubeconfig_dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestApiServer {
    /// Starts a server on a free port with [`ServerOptions::default`].
    ///
    /// # Errors
    /// Binding the port, spawning the server thread or writing the kubeconfig failed.
    pub async fn start() -> std::io::Result<TestApiServer> {
        TestApiServer::start_with(ServerOptions::default()).await
    }

    /// Starts a server with the given options. Namespaces `default`, `kube-system`,
    /// `kube-public` and `kube-node-lease` exist at start.
    ///
    /// # Errors
    /// Binding the port, spawning the server thread or writing the kubeconfig failed.
    pub async fn start_with(opts: ServerOptions) -> std::io::Result<TestApiServer> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let url = format!("http://127.0.0.1:{}", addr.port());
        let (drop_tx, _) = watch::channel(0u64);
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::new(opts.history_window)),
            faults: Arc::new(FaultState::default()),
            drop_tx: Arc::new(drop_tx),
            opts,
        });
        handlers::bootstrap(&shared);
        let (tx, rx) = oneshot::channel::<()>();
        let (ready_tx, ready_rx) = oneshot::channel::<std::io::Result<()>>();
        let app_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("test-apiserver".into())
            .spawn(move || serve_thread(listener, app_shared, rx, ready_tx))?;
        match ready_rx.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(std::io::Error::other(
                    "test API server thread ended at start",
                ));
            }
        }
        let kubeconfig_dir = tempfile::tempdir()?;
        let kubeconfig = kubeconfig_dir.path().join("kubeconfig");
        crate::kubeconfig::write_kubeconfig(&kubeconfig, &url, "default")?;
        Ok(TestApiServer {
            url,
            shared,
            _kubeconfig_dir: kubeconfig_dir,
            kubeconfig,
            shutdown: Some(tx),
            thread: Some(thread),
        })
    }

    /// Base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// A `kube::Client` for this server (default namespace `default`). Must be called inside a
    /// Tokio runtime (kube spawns its request buffer there).
    ///
    /// # Panics
    /// Never on valid state: the URL is built by the server itself.
    pub fn client(&self) -> kube::Client {
        let uri: http::Uri = self.url.parse().expect("the server's own URL parses");
        let config = kube::Config::new(uri);
        kube::Client::try_from(config).expect("a plain-HTTP kube config always builds a client")
    }

    /// Path of a kubeconfig file for kubectl (server `http://127.0.0.1:PORT`, no auth, namespace
    /// `default`). Removed when the server is dropped.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// Handle to inject faults (dropped watches, failing requests, latency).
    pub fn faults(&self) -> Faults {
        Faults {
            state: self.shared.faults.clone(),
            drop_tx: self.shared.drop_tx.clone(),
        }
    }

    /// Every request answered so far, in order of completion.
    pub fn request_log(&self) -> Vec<LoggedRequest> {
        self.shared.faults.entries()
    }

    /// Stops the server: open watches end, the port closes.
    pub async fn shutdown(mut self) {
        self.stop();
        if let Some(t) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
    }

    fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

impl Drop for TestApiServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn serve_thread(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    shutdown: oneshot::Receiver<()>,
    ready: oneshot::Sender<std::io::Result<()>>,
) {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("test-apiserver-worker")
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    rt.block_on(async move {
        let listener = match tokio::net::TcpListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        let _ = ready.send(Ok(()));
        let app = axum::Router::new()
            .fallback(entry)
            .with_state(shared.clone());
        tokio::select! {
            () = serve(listener, app) => {}
            _ = shutdown => {}
        }
        shared.drop_tx.send_modify(|g| *g += 1);
    });
    rt.shutdown_background();
}

/// Serves `app` over HTTP/1.1 on `listener`, one task per connection, as `axum::serve` does
/// (not used: it offers no way to close a connection without answering). Each request carries
/// its connection's [`ConnectionCut`] in its extensions; a cut closes the socket at once, with
/// any request on it unanswered.
async fn serve(listener: tokio::net::TcpListener, app: axum::Router) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors and the like: try again shortly, as axum::serve.
                tracing::debug!(error = %e, "test API server: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let cut = ConnectionCut::default();
        let app = app.clone();
        let on_connection = cut.clone();
        let service = hyper::service::service_fn(move |mut req: http::Request<Incoming>| {
            req.extensions_mut().insert(on_connection.clone());
            app.clone().oneshot(req)
        });
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = connection => {}
                () = cut.cut_off() => {}
            }
        });
    }
}

/// A JSON response.
pub(crate) fn json_response(code: StatusCode, v: &Value) -> Response {
    let body = serde_json::to_vec(v).unwrap_or_default();
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// A JSON response with `Warning: 299 - "..."` headers (as for `fieldValidation=Warn`).
pub(crate) fn json_with_warnings(code: u16, v: &Value, warnings: &[String]) -> Response {
    let mut r = json_response(StatusCode::from_u16(code).unwrap_or(StatusCode::OK), v);
    for w in warnings {
        let text = format!("299 - {}", crate::names::json_quote(w));
        if let Ok(h) = header::HeaderValue::from_str(&text) {
            r.headers_mut().append(header::WARNING, h);
        }
    }
    r
}

/// How the client wants objects back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Output {
    /// The object(s) as JSON.
    Json,
    /// A meta.k8s.io/v1 Table.
    Table,
    /// meta.k8s.io/v1 PartialObjectMetadata(List).
    Metadata,
}

/// Picks the first media range of `Accept` this server can produce.
pub(crate) fn negotiate(accept: Option<&str>) -> Result<Output, ApiError> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok(Output::Json);
    };
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default().to_ascii_lowercase();
        let params: HashMap<String, String> = parts
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        if !matches!(media.as_str(), "application/json" | "*/*" | "application/*") {
            continue;
        }
        match params.get("as").map(String::as_str) {
            None => return Ok(Output::Json),
            Some("Table") if params.get("g").map(String::as_str) == Some("meta.k8s.io") => {
                return Ok(Output::Table);
            }
            Some("PartialObjectMetadata") | Some("PartialObjectMetadataList")
                if params.get("g").map(String::as_str) == Some("meta.k8s.io") =>
            {
                return Ok(Output::Metadata);
            }
            _ => continue,
        }
    }
    Err(ApiError::not_acceptable(format!(
        "only the following media types are accepted: application/json, application/json;as=Table;v=v1;g=meta.k8s.io, application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io (not implemented by the test API server: {accept})"
    )))
}

/// A parsed request aimed at a resource.
pub(crate) struct ResourceRequest {
    pub method: Method,
    pub rt: ResourceType,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    pub query: HashMap<String, String>,
    pub headers: HeaderMap,
    pub body: bytes::Bytes,
}

impl ResourceRequest {
    /// A query parameter.
    pub fn q(&self, k: &str) -> Option<&str> {
        self.query.get(k).map(String::as_str)
    }

    /// A header as text.
    pub fn header(&self, k: header::HeaderName) -> Option<&str> {
        self.headers.get(k).and_then(|v| v.to_str().ok())
    }
}

async fn entry(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let method = req.method().clone();
    let path_and_query = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| req.uri().path().to_string());
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let latency = shared.faults.latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    match shared
        .faults
        .cut(method.as_str(), &path_and_query, req.headers())
    {
        Cut::None => {}
        // Never handled nor answered: the client gives up on its own.
        Cut::Stall => std::future::pending::<()>().await,
        // The connection's task closes the socket, ending this handler with it.
        Cut::Drop => {
            if let Some(cut) = req.extensions().get::<ConnectionCut>() {
                cut.cut();
            }
            std::future::pending::<()>().await;
        }
    }
    let response = match shared
        .faults
        .take_failure(method.as_str(), &path_and_query, req.headers())
    {
        Some(code) => ApiError::new(
            code,
            ApiError::reason_for_code(code),
            format!("injected failure (HTTP {code}) by the test API server"),
        )
        .into_response(),
        None => route(&shared, req)
            .await
            .unwrap_or_else(|e| e.into_response()),
    };
    shared.faults.log(LoggedRequest {
        method: method.to_string(),
        path_and_query,
        status: response.status().as_u16(),
        content_type,
        accept,
    });
    response
}

async fn route(shared: &Arc<Shared>, req: Request) -> Result<Response, ApiError> {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let query: HashMap<String, String> = parts
        .uri
        .query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default();
    let is_get = parts.method == Method::GET;
    let ok = |v: Value| Ok(json_response(StatusCode::OK, &v));
    match s.as_slice() {
        ["version"] if is_get => return ok(discovery::version()),
        ["healthz"] | ["livez"] | ["readyz"] if is_get => {
            return Ok((StatusCode::OK, "ok").into_response());
        }
        ["api"] if is_get => return ok(discovery::api_versions()),
        ["apis"] if is_get => return ok(discovery::api_group_list(&shared.store().registry)),
        ["api", v] if is_get => {
            return discovery::api_resource_list(&shared.store().registry, "", v)
                .map_or_else(|| Err(ApiError::path_not_found(&path)), ok);
        }
        ["apis", g] if is_get => {
            return discovery::api_group(&shared.store().registry, g)
                .map_or_else(|| Err(ApiError::path_not_found(&path)), ok);
        }
        ["apis", g, v] if is_get => {
            return discovery::api_resource_list(&shared.store().registry, g, v)
                .map_or_else(|| Err(ApiError::path_not_found(&path)), ok);
        }
        ["openapi", "v3"] if is_get => return ok(openapi::index(&shared.store().registry)),
        ["openapi", "v3", "api", v] if is_get => {
            return openapi::group_version_doc(&shared.store().registry, "", v)
                .map_or_else(|| Err(ApiError::path_not_found(&path)), ok);
        }
        ["openapi", "v3", "apis", g, v] if is_get => {
            return openapi::group_version_doc(&shared.store().registry, g, v)
                .map_or_else(|| Err(ApiError::path_not_found(&path)), ok);
        }
        ["api", v, rest @ ..] if !rest.is_empty() => {
            let rr = parse_resource("", v, rest, &path, shared, &parts, query, body).await?;
            return handlers::dispatch(shared, rr).await;
        }
        ["apis", g, v, rest @ ..] if !rest.is_empty() => {
            let rr = parse_resource(g, v, rest, &path, shared, &parts, query, body).await?;
            return handlers::dispatch(shared, rr).await;
        }
        _ => {}
    }
    if segs.first().map(String::as_str) == Some("openapi") {
        return Err(ApiError::path_not_found(&path));
    }
    Err(ApiError::path_not_found(&path))
}

fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

#[allow(clippy::too_many_arguments)]
async fn parse_resource(
    group: &str,
    version: &str,
    rest: &[&str],
    path: &str,
    shared: &Arc<Shared>,
    parts: &http::request::Parts,
    query: HashMap<String, String>,
    body: Body,
) -> Result<ResourceRequest, ApiError> {
    if rest.first() == Some(&"watch") {
        return Err(ApiError::not_implemented(
            "the deprecated /watch/ paths; use ?watch=true",
        ));
    }
    let (namespace, rest) = {
        let reg = &shared.store().registry;
        if rest.len() >= 3
            && rest[0] == "namespaces"
            && reg
                .lookup(group, version, rest[2])
                .is_some_and(|r| r.namespaced)
        {
            (Some(rest[1].to_string()), &rest[2..])
        } else {
            (None, rest)
        }
    };
    let rt = shared
        .store()
        .registry
        .lookup(group, version, rest[0])
        .cloned()
        .ok_or_else(|| ApiError::path_not_found(path))?;
    if rest.len() > 3 {
        return Err(ApiError::path_not_found(path));
    }
    let name = rest.get(1).map(|s| s.to_string());
    let subresource = rest.get(2).map(|s| s.to_string());
    if rt.namespaced && namespace.is_none() && name.is_some() {
        return Err(ApiError::path_not_found(path));
    }
    let body = axum::body::to_bytes(body, shared.opts.max_body_bytes)
        .await
        .map_err(|e| ApiError::new(413, "RequestEntityTooLarge", format!("request body: {e}")))?;
    Ok(ResourceRequest {
        method: parts.method.clone(),
        rt,
        namespace,
        name,
        subresource,
        query,
        headers: parts.headers.clone(),
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_negotiation() {
        assert_eq!(negotiate(None).unwrap(), Output::Json);
        assert_eq!(
            negotiate(Some("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")).unwrap(),
            Output::Table
        );
        assert_eq!(
            negotiate(Some(
                "application/vnd.kubernetes.protobuf, application/json"
            ))
            .unwrap(),
            Output::Json
        );
        assert_eq!(
            negotiate(Some(
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
            ))
            .unwrap(),
            Output::Metadata
        );
        assert_eq!(
            negotiate(Some("application/vnd.kubernetes.protobuf"))
                .unwrap_err()
                .code,
            406
        );
    }
}
