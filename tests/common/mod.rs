//! Shared set-up of the controller tests: a test API server with the CRDs installed, a
//! simulator, and the operator running in-process against both.

#![allow(dead_code)]

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::runtime::wait::await_condition;
use kube::{Resource, ResourceExt};
use mailtarget_operator::api::{Client as ApiClient, ClientConfig};
use mailtarget_operator::controller::metrics::Metrics;
use mailtarget_operator::controller::{Operator, Settings};
use mailtarget_operator::crd::generate::all_crds;
use mailtarget_operator::simulator::{RequestRecord, Simulator, SimulatorConfig};
use mailtarget_test_apiserver::{ServerOptions, TestApiServer};
use serde::de::DeserializeOwned;
use tokio::sync::oneshot;

/// The company key of every test simulator.
pub const KEY: &str = "controller-test-key";
/// Longest wait for any condition in these tests.
pub const WAIT: Duration = Duration::from_secs(30);

/// One isolated environment: API server, simulator, operator.
pub struct Env {
    pub server: TestApiServer,
    pub sim: Simulator,
    pub kube: kube::Client,
    pub api: ApiClient,
    settings: Settings,
    /// The running operator's shared context (its account registry, caches).
    pub ctx: Option<std::sync::Arc<mailtarget_operator::controller::Context>>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// Options of [`Env::start_with`].
pub struct Options {
    pub verify_after_calls: u32,
    pub resync: Duration,
    /// `Settings::detail_resync_interval`; `None`: the same as `resync`.
    pub detail_resync: Option<Duration>,
    /// Install only the managed kinds' CRDs (SubAccount, ApiKey, SendingDomain), as a cluster
    /// upgraded with `helm upgrade` (which installs no new CRD) has them.
    pub only_managed_crds: bool,
    /// The test API server's `ServerOptions::history_window` (how many change events a watch
    /// may resume from); `None`: its default.
    pub history_window: Option<usize>,
    /// The operator's `--default-adoption-policy`.
    pub default_adoption_policy: Option<mailtarget_operator::crd::AdoptionPolicy>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            verify_after_calls: 1,
            resync: Duration::from_secs(3),
            detail_resync: None,
            only_managed_crds: false,
            history_window: None,
            default_adoption_policy: None,
        }
    }
}

pub fn api_client(sim: &Simulator) -> ApiClient {
    let config = ClientConfig::new(
        sim.base_url().parse().unwrap(),
        sim.transmission_url().parse().unwrap(),
        KEY.to_string().into(),
    );
    ApiClient::new(config).unwrap()
}

/// Creates sub account `name` at the service through `client`, with its first key `key_name`,
/// and returns the create answer (the key's value in `api_keys[0]`).
pub async fn sub_account_with_key(
    client: &ApiClient,
    name: &str,
    key_name: &str,
) -> mailtarget_operator::api::SubAccountDetail {
    let create = mailtarget_operator::api::CreateSubAccount {
        name: Some(name.into()),
        create_api_key: Some(true),
        api_key_name: Some(key_name.into()),
        ..Default::default()
    };
    client.create_sub_account(&create).await.unwrap()
}

/// Creates the operator's CRDs and waits until they are served.
pub async fn install_crds(kube: &kube::Client) {
    install(kube, all_crds()).await;
}

/// Creates `list` and waits until each is served.
pub async fn install(kube: &kube::Client, list: Vec<CustomResourceDefinition>) {
    let crds: Api<CustomResourceDefinition> = Api::all(kube.clone());
    for crd in list {
        let name = crd.name_any();
        crds.create(&PostParams::default(), &crd).await.unwrap();
        let established = await_condition(
            crds.clone(),
            &name,
            kube::runtime::wait::conditions::is_crd_established(),
        );
        tokio::time::timeout(WAIT, established)
            .await
            .expect("CRD established in time")
            .unwrap();
    }
}

impl Env {
    pub async fn start() -> Env {
        Env::start_with(Options::default()).await
    }

    pub async fn start_with(options: Options) -> Env {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let mut server_options = ServerOptions::default();
        if let Some(window) = options.history_window {
            server_options.history_window = window;
        }
        let server = TestApiServer::start_with(server_options).await.unwrap();
        let kube = server.client();
        if options.only_managed_crds {
            install(&kube, mailtarget_operator::crd::generate::managed_crds()).await;
        } else {
            install_crds(&kube).await;
        }
        let mut config = SimulatorConfig::new(KEY);
        config.verify_after_calls = options.verify_after_calls;
        let sim = Simulator::start(config).await.unwrap();
        let api = api_client(&sim);
        let settings = Settings {
            resync_interval: options.resync,
            detail_resync_interval: options.detail_resync.unwrap_or(options.resync),
            verify_first_interval: Duration::from_millis(200),
            verify_max_interval: Duration::from_secs(1),
            max_error_backoff: Duration::from_secs(2),
            default_adoption_policy: options.default_adoption_policy,
        };
        let mut env = Env {
            server,
            sim,
            kube,
            api,
            settings,
            ctx: None,
            stop: None,
            task: None,
        };
        env.start_operator();
        env
    }

    /// Starts an operator (a fresh process's state: no cache, no memory of earlier writes).
    fn start_operator(&mut self) {
        let operator = Operator::new(
            self.kube.clone(),
            self.api.clone(),
            std::sync::Arc::new(Metrics::default()),
            self.settings.clone(),
            "test".into(),
        );
        self.ctx = Some(operator.context());
        let (tx, rx) = oneshot::channel::<()>();
        self.task = Some(tokio::spawn(operator.run(async move {
            let _ = rx.await;
        })));
        self.stop = Some(tx);
    }

    /// Stops the operator and starts a new one, as a restart of the operator's process does.
    pub async fn restart_operator(&mut self) {
        self.stop_operator().await;
        self.start_operator();
    }

    async fn stop_operator(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            await_stopped(task).await;
        }
    }

    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
    {
        Api::namespaced(self.kube.clone(), "default")
    }

    /// Writes to the service since the log was last cleared.
    pub fn writes(&self) -> Vec<RequestRecord> {
        service_writes(&self.sim)
    }

    /// Stops the operator and waits for it to finish.
    pub async fn stop(mut self) {
        self.stop_operator().await;
    }
}

/// Creates namespace `name` with `labels`.
pub async fn create_namespace(kube: &kube::Client, name: &str, labels: &[(&str, &str)]) {
    use k8s_openapi::api::core::v1::Namespace;
    let ns = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(kube.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

/// Writes Secret `namespace/name` holding `value` under `apiKey` (created, or replaced), as an
/// account's credentials.
pub async fn put_key_secret(kube: &kube::Client, namespace: &str, name: &str, value: &str) {
    use kube::api::{Patch, PatchParams};
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(std::collections::BTreeMap::from([(
            "apiKey".to_string(),
            k8s_openapi::ByteString(value.as_bytes().to_vec()),
        )])),
        ..Default::default()
    };
    Api::<Secret>::namespaced(kube.clone(), namespace)
        .patch(
            name,
            &PatchParams::apply("tests").force(),
            &Patch::Apply(&secret),
        )
        .await
        .unwrap();
}

/// Reconciles of `kind` an operator finished, whatever their result (the sum of its
/// `mailtarget_reconciles_total` series for that kind).
pub fn reconciles(metrics: &Metrics, kind: &str) -> u64 {
    let kind = format!("kind=\"{kind}\"");
    metrics
        .encode()
        .lines()
        .filter(|l| l.starts_with("mailtarget_reconciles_total{") && l.contains(&kind))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Waits (bounded by [`WAIT`]) for a stopped operator's task; fails the test when it panicked
/// or did not stop in time.
pub async fn await_stopped(task: tokio::task::JoinHandle<()>) {
    match tokio::time::timeout(WAIT, task).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("the operator task failed: {e}"),
        Err(_) => panic!("the operator did not stop within {WAIT:?}"),
    }
}

/// Waits (bounded by [`WAIT`]) until Secret `name` holds `value` under `key`, and returns it.
/// A failure message shows neither the value nor the Secret's data.
pub async fn wait_secret_holds(
    secrets: &Api<Secret>,
    name: &str,
    key: &str,
    value: &str,
    what: &str,
) -> Secret {
    let (key, value) = (key.to_string(), value.to_string());
    wait_for(secrets, name, what, move |s: &Secret| {
        s.data
            .as_ref()
            .and_then(|d| d.get(&key))
            .is_some_and(|v| v.0 == value.as_bytes())
    })
    .await
}

/// The writes (POST, PUT, DELETE; see `RequestRecord::is_write`) in `sim`'s request log,
/// oldest first.
pub fn service_writes(sim: &Simulator) -> Vec<RequestRecord> {
    sim.request_log()
        .into_iter()
        .filter(|r| r.is_write())
        .collect()
}

/// Creates `obj` in `default` from YAML.
pub async fn create<K>(api: &Api<K>, yaml: &str) -> K
where
    K: Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_yaml::from_str(yaml).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap()
}

/// Waits (bounded by [`WAIT`]) until `name` satisfies `cond`, through a watch.
pub async fn wait_for<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    cond: impl Fn(&K) -> bool + Send + 'static,
) -> K
where
    K: Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug + Send + 'static,
{
    let fut = await_condition(api.clone(), name, move |o: Option<&K>| o.is_some_and(&cond));
    match tokio::time::timeout(WAIT, fut).await {
        Ok(Ok(Some(obj))) => obj,
        Ok(Ok(None)) => panic!("waiting for {name} to be {what}: it is gone"),
        Ok(Err(e)) => panic!("waiting for {name} to be {what}: {e}"),
        Err(_) => {
            let last = api.get_opt(name).await.ok().flatten();
            panic!(
                "{name} was not {what} within {WAIT:?}; last: {}",
                without_secret_data(last.as_ref())
            )
        }
    }
}

/// `obj` as JSON for a failure message, without a Secret's `data` and `stringData` (key values
/// and private keys must not reach test output either).
pub fn without_secret_data<K: serde::Serialize>(obj: Option<&K>) -> String {
    let mut v = serde_json::to_value(obj).unwrap_or_default();
    if let Some(m) = v.as_object_mut() {
        m.remove("data");
        m.remove("stringData");
    }
    v.to_string()
}

/// Waits until `name` is gone.
pub async fn wait_deleted<K>(api: &Api<K>, name: &str, uid: &str)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let fut = await_condition(
        api.clone(),
        name,
        kube::runtime::wait::conditions::is_deleted(uid),
    );
    tokio::time::timeout(WAIT, fut)
        .await
        .unwrap_or_else(|_| panic!("{name} not deleted within {WAIT:?}"))
        .unwrap();
}

/// Waits (bounded by [`WAIT`]) until the Events of `events` hold one that `matches`, and
/// returns it (Events are published after the status that holds their outcome, so a single
/// list right after a status change can miss one).
pub async fn wait_event(
    events: &Api<k8s_openapi::api::events::v1::Event>,
    what: &str,
    matches: impl Fn(&k8s_openapi::api::events::v1::Event) -> bool,
) -> k8s_openapi::api::events::v1::Event {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let listed = events.list(&Default::default()).await.expect("list Events");
        if let Some(event) = listed.items.into_iter().find(|e| matches(e)) {
            return event;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {what} Event within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls `check` on the simulator's state until it holds (bounded by [`WAIT`]); the simulator
/// offers no change notifications.
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not true within {WAIT:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// True when the object's `Ready` condition is `status` and computed for its generation.
pub fn ready_is<K: Resource>(
    obj: &K,
    conditions: &[mailtarget_operator::crd::Condition],
    status: &str,
    reason: Option<&str>,
) -> bool {
    conditions.iter().any(|c| {
        c.type_ == "Ready"
            && c.status == status
            && c.observed_generation == obj.meta().generation
            && reason.is_none_or(|r| c.reason == r)
    })
}

/// Forwards `request` to `upstream` (a base URL without a trailing slash) with `http`, every
/// header but `host` kept, and answers the request's parts, the answer's status and its body:
/// what a test proxy in front of the simulator looks at and rewrites before answering with
/// [`json_answer`].
pub async fn forward(
    http: &reqwest::Client,
    upstream: &str,
    request: axum::extract::Request,
) -> (axum::http::request::Parts, axum::http::StatusCode, Vec<u8>) {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    let url = format!("{upstream}{}", parts.uri);
    let mut sent = http.request(parts.method.clone(), &url).body(body);
    for (name, value) in &parts.headers {
        if name != "host" {
            sent = sent.header(name, value);
        }
    }
    let answer = sent.send().await.unwrap();
    let status = answer.status();
    let bytes = answer.bytes().await.unwrap().to_vec();
    (parts, status, bytes)
}

/// An answer with `status` and the JSON body `bytes`.
pub fn json_answer(status: axum::http::StatusCode, bytes: Vec<u8>) -> axum::response::Response {
    axum::response::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(axum::body::Body::from(bytes))
        .unwrap()
}
