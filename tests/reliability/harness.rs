//! A test rig whose operator can be stopped, crashed and started again on the same test API
//! server and simulator, plus builders of the mixed resource sets and the checks that the
//! simulator holds exactly what they declare.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, PostParams};
use kube::{Resource, ResourceExt};
use mailtarget_operator::api::{Client as ApiClient, ClientConfig, RetryPolicy};
use mailtarget_operator::controller::metrics::Metrics;
use mailtarget_operator::controller::{Operator, Settings};
use mailtarget_operator::crd::{ApiKey, Condition, SendingDomain, SubAccount};
use mailtarget_operator::simulator::{RequestRecord, Simulator, SimulatorConfig, SimulatorState};
use mailtarget_test_apiserver::TestApiServer;
use serde::de::DeserializeOwned;
use tokio::sync::oneshot;

use crate::common::{KEY, install_crds, service_writes};

/// Namespace of every object of these tests.
pub const NS: &str = "default";

/// An operator started by [`Rig::start_operator`].
struct Running {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

/// Test API server with the CRDs, a simulator, and at most one operator at a time.
pub struct Rig {
    /// The Kubernetes side.
    pub server: TestApiServer,
    /// The service side.
    pub sim: Simulator,
    /// Client of the test API server.
    pub kube: kube::Client,
    /// Metrics of every operator this rig starts.
    pub metrics: Arc<Metrics>,
    operator: Option<Running>,
}

/// Controller settings fast enough for tests: resync `resync`, verify-txt after 200 ms then up to
/// 1 s, error backoff capped at 1 s.
pub fn settings(resync: Duration) -> Settings {
    Settings {
        resync_interval: resync,
        detail_resync_interval: resync,
        verify_first_interval: Duration::from_millis(200),
        verify_max_interval: Duration::from_secs(1),
        max_error_backoff: Duration::from_secs(1),
        default_adoption_policy: None,
    }
}

/// The operator's client of `sim`: quick retries, a 5 s attempt timeout, the default budget
/// (8 requests in flight).
pub fn operator_client(sim: &Simulator) -> ApiClient {
    let mut config = ClientConfig::new(
        sim.base_url().parse().expect("simulator URL"),
        sim.transmission_url().parse().expect("simulator URL"),
        KEY.to_string().into(),
    );
    config.retry = RetryPolicy {
        max_retries: 4,
        initial_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(500),
    };
    config.timeout = Duration::from_secs(5);
    ApiClient::new(config).expect("client")
}

impl Rig {
    /// A test API server with the CRDs installed and a simulator started with `config`; no
    /// operator yet.
    pub async fn new(config: SimulatorConfig) -> Rig {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let server = TestApiServer::start().await.expect("test API server");
        let kube = server.client();
        install_crds(&kube).await;
        let sim = Simulator::start(config).await.expect("simulator");
        Rig {
            server,
            sim,
            kube,
            metrics: Arc::new(Metrics::default()),
            operator: None,
        }
    }

    /// A simulator configuration with the test key.
    pub fn sim_config() -> SimulatorConfig {
        SimulatorConfig::new(KEY)
    }

    /// Starts an in-process operator with `settings` and `client`.
    pub fn start_operator_with(&mut self, settings: Settings, client: ApiClient) {
        assert!(self.operator.is_none(), "an operator is already running");
        let operator = Operator::new(
            self.kube.clone(),
            client,
            self.metrics.clone(),
            settings,
            "reliability-test".into(),
        );
        let (stop, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(operator.run(async move {
            let _ = rx.await;
        }));
        self.operator = Some(Running { stop, task });
    }

    /// Starts an in-process operator against the simulator with [`settings`]`(resync)`.
    pub fn start_operator(&mut self, resync: Duration) {
        let client = operator_client(&self.sim);
        self.start_operator_with(settings(resync), client);
    }

    /// True while the operator task runs (false once it ended, e.g. by a panic).
    pub fn operator_alive(&self) -> bool {
        self.operator
            .as_ref()
            .is_some_and(|r| !r.task.is_finished())
    }

    /// Kills the operator where it stands, like SIGKILL: the task is aborted at its current
    /// await point, requests in flight are cut, nothing is cleaned up.
    pub async fn crash_operator(&mut self) {
        if let Some(running) = self.operator.take() {
            running.task.abort();
            let _ = running.task.await;
        }
    }

    /// Asks the operator to stop and waits (bounded) for it. Panics if it had panicked.
    pub async fn stop_operator(&mut self) {
        if let Some(running) = self.operator.take() {
            let _ = running.stop.send(());
            match tokio::time::timeout(Duration::from_secs(30), running.task).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => panic!("the operator task failed: {e}"),
                Err(_) => panic!("the operator did not stop within 30 s"),
            }
        }
    }

    /// Writes to the service since its request log was last cleared.
    pub fn writes(&self) -> Vec<RequestRecord> {
        service_writes(&self.sim)
    }

    /// Create calls (`POST`) the service saw since its request log was last cleared.
    pub fn posts(&self) -> usize {
        self.writes().iter().filter(|w| w.method == "POST").count()
    }

    /// An API of kind `K` in [`NS`].
    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
    {
        Api::namespaced(self.kube.clone(), NS)
    }
}

/// The `Ready` condition of a list of conditions.
pub fn ready(conditions: &[Condition]) -> Option<&Condition> {
    conditions.iter().find(|c| c.type_ == "Ready")
}

/// True when `Ready` is `True` for the object's current generation.
pub fn is_ready<K: Resource>(obj: &K, conditions: &[Condition]) -> bool {
    ready(conditions)
        .is_some_and(|c| c.status == "True" && c.observed_generation == obj.meta().generation)
}

/// True when `Ready` is `True` for the object's current generation (any of the three kinds).
pub fn ready_now<K: Resource + HasConditions>(obj: &K) -> bool {
    is_ready(obj, obj.conditions())
}

/// The reason of `Stalled=True` computed for the object's current generation, if it stalled.
pub fn stalled_reason<K: Resource + HasConditions>(obj: &K) -> Option<String> {
    obj.conditions()
        .iter()
        .find(|c| {
            c.type_ == "Stalled"
                && c.status == "True"
                && c.observed_generation == obj.meta().generation
        })
        .map(|c| c.reason.clone())
}

/// The conditions of any of the three kinds.
pub trait HasConditions {
    /// `status.conditions`, empty without status.
    fn conditions(&self) -> &[Condition];
    /// `status.id`.
    fn status_id(&self) -> Option<i64>;
}

impl HasConditions for SubAccount {
    fn conditions(&self) -> &[Condition] {
        self.status.as_ref().map_or(&[], |s| &s.conditions)
    }
    fn status_id(&self) -> Option<i64> {
        self.status.as_ref().and_then(|s| s.id)
    }
}

impl HasConditions for ApiKey {
    fn conditions(&self) -> &[Condition] {
        self.status.as_ref().map_or(&[], |s| &s.conditions)
    }
    fn status_id(&self) -> Option<i64> {
        self.status.as_ref().and_then(|s| s.id)
    }
}

impl HasConditions for SendingDomain {
    fn conditions(&self) -> &[Condition] {
        self.status.as_ref().map_or(&[], |s| &s.conditions)
    }
    fn status_id(&self) -> Option<i64> {
        self.status.as_ref().and_then(|s| s.id)
    }
}

/// A mixed set of resources: sub accounts with first keys, company keys, keys that adopt the
/// sub accounts' first keys, and sending domains with their DKIM Secrets.
#[derive(Clone, Debug, Default)]
pub struct Mix {
    /// SubAccount names (also the service names); each has a first key `<name>-first`.
    pub sub_accounts: Vec<String>,
    /// Company ApiKey names (also the service names).
    pub company_keys: Vec<String>,
    /// ApiKey names that reference `sub_accounts[i]` and adopt its first key.
    pub sub_keys: Vec<(String, String)>,
    /// SendingDomain names and their domains.
    pub domains: Vec<(String, String)>,
}

impl Mix {
    /// `n` resources in four groups of about equal size.
    pub fn of(n: usize) -> Mix {
        let quarter = n / 4;
        let (subs, sub_keys, company) = (quarter, quarter, quarter);
        let domains = n - subs - sub_keys - company;
        Mix {
            sub_accounts: (0..subs).map(|i| format!("team-{i}")).collect(),
            company_keys: (0..company).map(|i| format!("app-{i}")).collect(),
            sub_keys: (0..sub_keys.min(subs))
                .map(|i| (format!("team-{i}-sender"), format!("team-{i}")))
                .collect(),
            domains: (0..domains)
                .map(|i| (format!("mail-{i}"), format!("mail{i}.example.com")))
                .collect(),
        }
    }

    /// Number of resources.
    pub fn len(&self) -> usize {
        self.sub_accounts.len() + self.company_keys.len() + self.sub_keys.len() + self.domains.len()
    }

    /// Creates every resource in [`NS`].
    pub async fn create(&self, kube: &kube::Client) {
        let pp = PostParams::default();
        let subs: Api<SubAccount> = Api::namespaced(kube.clone(), NS);
        for name in &self.sub_accounts {
            let yaml = format!(
                "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {{name: {name}}}\nspec:\n  status: active\n  apiKey: {{name: {name}-first, permissionIds: [1], secretName: {name}-first-key}}\n"
            );
            subs.create(&pp, &serde_yaml::from_str(&yaml).expect("yaml"))
                .await
                .expect("create SubAccount");
        }
        let keys: Api<ApiKey> = Api::namespaced(kube.clone(), NS);
        for name in &self.company_keys {
            let yaml = format!(
                "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {{name: {name}}}\nspec:\n  permissionType: custom\n  permissionIds: [1, 2]\n  allowedIps: [\"198.51.100.7\"]\n  secretName: {name}-key\n"
            );
            keys.create(&pp, &serde_yaml::from_str(&yaml).expect("yaml"))
                .await
                .expect("create ApiKey");
        }
        for (name, sub) in &self.sub_keys {
            let yaml = format!(
                "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {{name: {name}}}\nspec:\n  name: {sub}-first\n  subAccountRef: {{name: {sub}}}\n  secretName: {name}-key\n"
            );
            keys.create(&pp, &serde_yaml::from_str(&yaml).expect("yaml"))
                .await
                .expect("create ApiKey");
        }
        let domains: Api<SendingDomain> = Api::namespaced(kube.clone(), NS);
        for (name, domain) in &self.domains {
            let yaml = format!(
                "apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata: {{name: {name}}}\nspec:\n  domain: {domain}\n  dkimPrivateKeySecretName: {name}-dkim\n"
            );
            domains
                .create(&pp, &serde_yaml::from_str(&yaml).expect("yaml"))
                .await
                .expect("create SendingDomain");
        }
    }
}

/// Names of the objects of kind `K` that are not Ready, with their Ready condition.
async fn not_ready<K>(api: &Api<K>) -> Vec<String>
where
    K: Resource + HasConditions + Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.list(&ListParams::default()).await {
        Ok(list) => list
            .items
            .iter()
            .filter(|o| !is_ready(*o, o.conditions()))
            .map(|o| format!("{}: {:?}", o.name_any(), ready(o.conditions())))
            .collect(),
        Err(e) => vec![format!("cannot list: {e}")],
    }
}

/// Waits until every object of the three kinds in [`NS`] is Ready, polling the API server
/// every 200 ms, for at most `limit`. Panics with the objects still not Ready.
pub async fn wait_all_ready(kube: &kube::Client, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let mut pending = Vec::new();
        pending.extend(not_ready(&Api::<SubAccount>::namespaced(kube.clone(), NS)).await);
        pending.extend(not_ready(&Api::<ApiKey>::namespaced(kube.clone(), NS)).await);
        pending.extend(not_ready(&Api::<SendingDomain>::namespaced(kube.clone(), NS)).await);
        if pending.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not Ready within {limit:?}: {pending:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The value under `key` of Secret `name` in [`NS`], if any.
pub async fn secret_value(kube: &kube::Client, name: &str, key: &str) -> Option<String> {
    let secrets: Api<Secret> = Api::namespaced(kube.clone(), NS);
    let secret = secrets.get_opt(name).await.ok().flatten()?;
    secret
        .data
        .as_ref()?
        .get(key)
        .map(|v| String::from_utf8_lossy(&v.0).into_owned())
}

/// Asserts that the simulator holds exactly the objects `mix` declares (no duplicates, no
/// orphans), that every resource's `status.id` points at its object, and that every key value
/// and DKIM private key is in its Secret (nothing lost).
pub async fn assert_exactly(kube: &kube::Client, state: &SimulatorState, mix: &Mix) {
    // Sub accounts: one per SubAccount, each with exactly its first key.
    let names: Vec<&str> = state.sub_accounts.iter().map(|s| s.name.as_str()).collect();
    let want: BTreeSet<&str> = mix.sub_accounts.iter().map(String::as_str).collect();
    assert_eq!(names.len(), want.len(), "sub accounts: {names:?}");
    assert_eq!(names.iter().copied().collect::<BTreeSet<_>>(), want);

    // Keys: the first key of each sub account plus the company keys, each exactly once.
    let mut keys: Vec<(i64, String)> = state
        .api_keys
        .iter()
        .map(|k| (k.sub_account_id, k.name.clone()))
        .collect();
    keys.sort();
    let mut want_keys: Vec<(i64, String)> = state
        .sub_accounts
        .iter()
        .map(|s| (s.id, format!("{}-first", s.name)))
        .chain(mix.company_keys.iter().map(|n| (0, n.clone())))
        .collect();
    want_keys.sort();
    assert_eq!(keys, want_keys, "API keys (subAccountId, name)");

    // Domains, each exactly once.
    let mut domains: Vec<&str> = state
        .sending_domains
        .iter()
        .map(|d| d.domain.as_str())
        .collect();
    domains.sort_unstable();
    let mut want_domains: Vec<&str> = mix.domains.iter().map(|(_, d)| d.as_str()).collect();
    want_domains.sort_unstable();
    assert_eq!(domains, want_domains, "sending domains");

    // status.id and Secrets.
    let subs: Api<SubAccount> = Api::namespaced(kube.clone(), NS);
    for name in &mix.sub_accounts {
        let obj = subs.get(name).await.expect("SubAccount");
        let sim = state
            .sub_accounts
            .iter()
            .find(|s| &s.name == name)
            .expect("sub account");
        assert_eq!(obj.status_id(), Some(sim.id), "SubAccount {name} status.id");
        let first = state
            .api_keys
            .iter()
            .find(|k| k.sub_account_id == sim.id)
            .expect("first key");
        assert!(
            secret_value(kube, &format!("{name}-first-key"), "apiKey")
                .await
                .as_deref()
                == Some(first.key.as_str()),
            "Secret of SubAccount {name}'s first key does not hold the service's value"
        );
    }
    let keys_api: Api<ApiKey> = Api::namespaced(kube.clone(), NS);
    for name in &mix.company_keys {
        let obj = keys_api.get(name).await.expect("ApiKey");
        let sim = state
            .api_keys
            .iter()
            .find(|k| &k.name == name && k.sub_account_id == 0)
            .expect("company key");
        assert_eq!(obj.status_id(), Some(sim.id), "ApiKey {name} status.id");
        assert_eq!(
            sim.permission_type, "custom",
            "ApiKey {name} permissionType"
        );
        assert_eq!(
            sim.permission_ids,
            vec![1, 2],
            "ApiKey {name} permissionIds"
        );
        assert!(
            secret_value(kube, &format!("{name}-key"), "apiKey")
                .await
                .as_deref()
                == Some(sim.key.as_str()),
            "Secret of ApiKey {name} does not hold the service's value"
        );
    }
    for (name, sub) in &mix.sub_keys {
        let obj = keys_api.get(name).await.expect("ApiKey");
        let sub_id = state
            .sub_accounts
            .iter()
            .find(|s| &s.name == sub)
            .expect("sub account")
            .id;
        let sim = state
            .api_keys
            .iter()
            .find(|k| k.sub_account_id == sub_id)
            .expect("first key");
        assert_eq!(obj.status_id(), Some(sim.id), "ApiKey {name} status.id");
        assert!(
            secret_value(kube, &format!("{name}-key"), "apiKey")
                .await
                .as_deref()
                == Some(sim.key.as_str()),
            "Secret of ApiKey {name} does not hold the service's value"
        );
    }
    let domains_api: Api<SendingDomain> = Api::namespaced(kube.clone(), NS);
    for (name, domain) in &mix.domains {
        let obj = domains_api.get(name).await.expect("SendingDomain");
        let sim = state
            .sending_domains
            .iter()
            .find(|d| &d.domain == domain)
            .expect("domain");
        assert_eq!(
            obj.status_id(),
            Some(sim.id),
            "SendingDomain {name} status.id"
        );
        assert!(sim.verified, "domain {domain} verified");
        assert!(
            secret_value(kube, &format!("{name}-dkim"), "dkimPrivateKey")
                .await
                .as_deref()
                == Some(sim.dkim_private_key.as_str()),
            "DKIM Secret of SendingDomain {name} does not hold the service's value"
        );
    }
}

/// Every secret the simulator holds, in the forms it could leak in: the company key, each API
/// key value and each DKIM private key, raw and base64-encoded (as in a Secret's `data`), plus
/// each base64 line of the private keys' PEM bodies.
pub fn secrets_of(state: &SimulatorState) -> Vec<String> {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    let mut out = vec![KEY.to_string(), b64(KEY)];
    for k in &state.api_keys {
        out.push(k.key.clone());
        out.push(b64(&k.key));
    }
    for d in &state.sending_domains {
        out.push(d.dkim_private_key.clone());
        out.push(b64(&d.dkim_private_key));
        out.extend(
            d.dkim_private_key
                .lines()
                .filter(|l| !l.starts_with("-----") && l.len() >= 16)
                .map(str::to_string),
        );
    }
    out
}
