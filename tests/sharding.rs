//! Sharding by label selector and by namespace: two operator instances on one cluster and one
//! account, each scoped to its own `shard` label, converge disjoint halves of the objects and
//! never touch the other half (nor objects matching neither selector); one instance scoped to a
//! list of namespaces converges the objects of each and never touches another namespace's.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use common::{KEY, WAIT, api_client, eventually, install_crds, ready_is, wait_for};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use mailtarget_operator::controller::metrics::Metrics;
use mailtarget_operator::controller::{Operator, Settings};
use mailtarget_operator::crd::{ApiKey, Condition, SendingDomain, SubAccount};
use mailtarget_operator::simulator::{Simulator, SimulatorConfig};
use mailtarget_test_apiserver::TestApiServer;
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// Objects per shard: 4 sub accounts, their first 3 keys, 3 domains.
const SUBS: usize = 4;
const KEYS: usize = 3;
const DOMAINS: usize = 3;

fn labels(shard: Option<&str>) -> Value {
    match shard {
        Some(s) => json!({ "shard": s }),
        None => json!({}),
    }
}

fn sub_account(shard: Option<&str>, name: &str) -> Value {
    json!({
        "apiVersion": "mailtarget.co/v1alpha1",
        "kind": "SubAccount",
        "metadata": {"name": name, "labels": labels(shard)},
        "spec": {"apiKey": {"name": format!("{name}-key"), "secretName": format!("{name}-secret")}},
    })
}

fn api_key(shard: Option<&str>, sub: &str) -> Value {
    json!({
        "apiVersion": "mailtarget.co/v1alpha1",
        "kind": "ApiKey",
        "metadata": {"name": format!("{sub}-key"), "labels": labels(shard)},
        "spec": {"subAccountRef": {"name": sub}, "secretName": format!("{sub}-key-value")},
    })
}

fn sending_domain(shard: Option<&str>, name: &str) -> Value {
    json!({
        "apiVersion": "mailtarget.co/v1alpha1",
        "kind": "SendingDomain",
        "metadata": {"name": name, "labels": labels(shard)},
        "spec": {"domain": format!("{name}.example.com")},
    })
}

async fn create<K>(kube: &kube::Client, manifest: Value)
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(manifest).unwrap();
    Api::<K>::namespaced(kube.clone(), "default")
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
}

/// Creates the 10 objects of `shard` (names prefixed with the shard, or `none`).
async fn create_shard(kube: &kube::Client, shard: Option<&str>) {
    let prefix = shard.unwrap_or("none");
    for i in 0..SUBS {
        create::<SubAccount>(kube, sub_account(shard, &format!("{prefix}-sub-{i}"))).await;
    }
    for i in 0..KEYS {
        create::<ApiKey>(kube, api_key(shard, &format!("{prefix}-sub-{i}"))).await;
    }
    for i in 0..DOMAINS {
        create::<SendingDomain>(kube, sending_domain(shard, &format!("{prefix}-dom-{i}"))).await;
    }
}

/// One in-process operator instance scoped to `shard=<shard>`.
struct Instance {
    metrics: Arc<Metrics>,
    ctx: Arc<mailtarget_operator::controller::Context>,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

fn start_instance(kube: &kube::Client, sim: &Simulator, shard: &str) -> Instance {
    start_scoped(
        kube,
        sim,
        &format!("instance-{shard}"),
        Vec::new(),
        Some(format!("shard={shard}")),
        None,
    )
}

/// One in-process operator instance named `identity`, watching `namespaces` (empty: all) and
/// objects matching `selector`, reading ClusterAccount Secrets in `cluster_resource_namespace`
/// (`None`: the client's default namespace, `default`).
fn start_scoped(
    kube: &kube::Client,
    sim: &Simulator,
    identity: &str,
    namespaces: Vec<String>,
    selector: Option<String>,
    cluster_resource_namespace: Option<&str>,
) -> Instance {
    let metrics = Arc::new(Metrics::default());
    let settings = Settings {
        resync_interval: Duration::from_secs(3),
        detail_resync_interval: Duration::from_secs(3),
        verify_first_interval: Duration::from_millis(200),
        verify_max_interval: Duration::from_secs(1),
        max_error_backoff: Duration::from_secs(2),
        default_adoption_policy: None,
    };
    let operator = Operator::new(
        kube.clone(),
        api_client(sim),
        metrics.clone(),
        settings,
        identity.to_string(),
    )
    .scoped(namespaces, selector)
    .with_cluster_resource_namespace(cluster_resource_namespace.map(str::to_owned));
    let ctx = operator.context();
    let (stop, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(operator.run(async move {
        let _ = rx.await;
    }));
    Instance {
        metrics,
        ctx,
        stop,
        task,
    }
}

/// Sum of `mailtarget_objects` samples with `ready="<ready>"` in `metrics`.
fn objects_gauge(metrics: &Metrics, ready: &str) -> i64 {
    metrics
        .encode()
        .lines()
        .filter(|l| {
            l.starts_with("mailtarget_objects{") && l.contains(&format!("ready=\"{ready}\""))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<i64>().ok())
        .sum()
}

/// Waits (through a watch, bounded) until `name` is Ready for its generation.
async fn wait_ready<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
        + Send
        + 'static,
{
    wait_for(api, name, "Ready", |o: &K| {
        let status = serde_json::to_value(o).unwrap_or_default()["status"]["conditions"].clone();
        let conditions: Vec<Condition> = serde_json::from_value(status).unwrap_or_default();
        ready_is(o, &conditions, "True", None)
    })
    .await;
}

/// Waits (through watches, bounded) until every object of `shard` is Ready.
async fn wait_shard_ready(kube: &kube::Client, shard: &str) {
    let subs: Api<SubAccount> = Api::namespaced(kube.clone(), "default");
    let keys: Api<ApiKey> = Api::namespaced(kube.clone(), "default");
    let domains: Api<SendingDomain> = Api::namespaced(kube.clone(), "default");
    for i in 0..SUBS {
        wait_ready(&subs, &format!("{shard}-sub-{i}")).await;
    }
    for i in 0..KEYS {
        wait_ready(&keys, &format!("{shard}-sub-{i}-key")).await;
    }
    for i in 0..DOMAINS {
        wait_ready(&domains, &format!("{shard}-dom-{i}")).await;
    }
}

/// Two instances with disjoint label selectors each converge exactly their own 10 objects:
/// every object's events come from its own shard's instance, each instance counts 10 objects,
/// and an object matching neither selector is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_converge_disjoint_shards() {
    let server = TestApiServer::start().await.unwrap();
    let kube = server.client();
    install_crds(&kube).await;
    let sim = Simulator::start(SimulatorConfig::new(KEY)).await.unwrap();
    let a = start_instance(&kube, &sim, "a");
    let b = start_instance(&kube, &sim, "b");

    create_shard(&kube, Some("a")).await;
    create_shard(&kube, Some("b")).await;
    create::<SubAccount>(&kube, sub_account(None, "unsharded")).await;
    create::<SendingDomain>(&kube, sending_domain(None, "unsharded-dom")).await;

    wait_shard_ready(&kube, "a").await;
    wait_shard_ready(&kube, "b").await;
    let per_shard = SUBS + KEYS + DOMAINS;

    // The service holds exactly the objects of both shards, once each.
    let state = sim.snapshot();
    let mut sub_names: Vec<&str> = state.sub_accounts.iter().map(|s| s.name.as_str()).collect();
    sub_names.sort_unstable();
    let mut expected: Vec<String> = ["a", "b"]
        .iter()
        .flat_map(|s| (0..SUBS).map(move |i| format!("{s}-sub-{i}")))
        .collect();
    expected.sort_unstable();
    assert_eq!(sub_names, expected, "sub accounts in the service");
    assert_eq!(state.sending_domains.len(), 2 * DOMAINS, "sending domains");

    // Each instance counts exactly its own objects, all Ready.
    // (The gauge is set just after the status write a watch may have shown above.)
    for (name, instance) in [("a", &a), ("b", &b)] {
        eventually(
            &format!("instance {name} counts {per_shard} Ready objects and none not Ready"),
            || {
                objects_gauge(&instance.metrics, "true") == per_shard as i64
                    && objects_gauge(&instance.metrics, "false") == 0
            },
        )
        .await;
    }

    // Every event about an object comes from the instance of that object's shard.
    let events: Api<Event> = Api::namespaced(kube.clone(), "default");
    let events = events.list(&ListParams::default()).await.unwrap();
    let mut seen = BTreeSet::new();
    for e in &events {
        let regarding = e
            .regarding
            .as_ref()
            .and_then(|r| r.name.clone())
            .unwrap_or_default();
        let shard = regarding.split('-').next().unwrap_or_default().to_string();
        assert!(
            shard == "a" || shard == "b",
            "event about an object of no shard: {regarding} ({:?})",
            e.reason
        );
        assert_eq!(
            e.reporting_instance.as_deref(),
            Some(format!("instance-{shard}").as_str()),
            "event {:?} about {regarding}",
            e.reason
        );
        seen.insert(regarding);
    }
    assert!(
        seen.len() >= 2 * (SUBS + DOMAINS),
        "every created object has an event: {seen:?}"
    );

    // Objects matching neither selector were never touched: no status, no finalizer.
    assert_untouched::<SubAccount>(&kube, "default", "unsharded").await;
    assert_untouched::<SendingDomain>(&kube, "default", "unsharded-dom").await;

    for instance in [a, b] {
        let _ = instance.stop.send(());
        tokio::time::timeout(WAIT, instance.task)
            .await
            .expect("the operator stopped in time")
            .expect("the operator's task did not panic");
    }
}

/// Creates the Namespaces `names`.
async fn create_namespaces(kube: &kube::Client, names: &[&str]) {
    for ns in names {
        common::create_namespace(kube, ns, &[]).await;
    }
}

/// The objects of one namespace in the namespaced test: a sub account with a key (created by the
/// SubAccount, adopted by the ApiKey), and a domain.
async fn create_namespace_objects(kube: &kube::Client, ns: &str) {
    let subs: Api<SubAccount> = Api::namespaced(kube.clone(), ns);
    let keys: Api<ApiKey> = Api::namespaced(kube.clone(), ns);
    let domains: Api<SendingDomain> = Api::namespaced(kube.clone(), ns);
    common::create(&subs, &format!("apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {{name: {ns}-sub}}\nspec: {{apiKey: {{name: {ns}-key, secretName: {ns}-sub-key-value}}}}\n")).await;
    common::create(&keys, &format!("apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {{name: {ns}-key}}\nspec: {{secretName: {ns}-key-value, subAccountRef: {{name: {ns}-sub}}}}\n")).await;
    common::create(&domains, &format!("apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata: {{name: {ns}-dom}}\nspec: {{domain: {ns}.example.com}}\n")).await;
}

/// Waits until the objects of `ns` are Ready and the key's Secret is written there.
async fn wait_namespace_ready(kube: &kube::Client, ns: &str) {
    wait_ready(
        &Api::<SubAccount>::namespaced(kube.clone(), ns),
        &format!("{ns}-sub"),
    )
    .await;
    wait_ready(
        &Api::<ApiKey>::namespaced(kube.clone(), ns),
        &format!("{ns}-key"),
    )
    .await;
    wait_ready(
        &Api::<SendingDomain>::namespaced(kube.clone(), ns),
        &format!("{ns}-dom"),
    )
    .await;
    let secrets: Api<Secret> = Api::namespaced(kube.clone(), ns);
    assert!(
        secrets
            .get_opt(&format!("{ns}-key-value"))
            .await
            .unwrap()
            .is_some(),
        "the key's Secret is written in {ns}"
    );
}

/// One instance scoped to two namespaces (one watch per namespace and kind, merged): the
/// objects that exist before it starts (first list) and those created after (watch events)
/// converge in both, while a third namespace's objects, created first, are never touched and
/// never reach the service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_instance_watches_only_its_namespaces() {
    let server = TestApiServer::start().await.unwrap();
    let kube = server.client();
    install_crds(&kube).await;
    create_namespaces(&kube, &["team-a", "team-b", "team-c"]).await;
    let sim = Simulator::start(SimulatorConfig::new(KEY)).await.unwrap();
    create_namespace_objects(&kube, "team-c").await;
    create_namespace_objects(&kube, "team-a").await;
    let instance = start_scoped(
        &kube,
        &sim,
        "instance-ab",
        vec!["team-a".to_string(), "team-b".to_string()],
        None,
        None,
    );
    wait_namespace_ready(&kube, "team-a").await;
    create_namespace_objects(&kube, "team-b").await;
    wait_namespace_ready(&kube, "team-b").await;

    // The service holds exactly the two watched namespaces' objects.
    let state = sim.snapshot();
    let mut subs: Vec<&str> = state.sub_accounts.iter().map(|s| s.name.as_str()).collect();
    subs.sort_unstable();
    assert_eq!(
        subs,
        ["team-a-sub", "team-b-sub"],
        "sub accounts in the service"
    );
    let mut domains: Vec<&str> = state
        .sending_domains
        .iter()
        .map(|d| d.domain.as_str())
        .collect();
    domains.sort_unstable();
    assert_eq!(domains, ["team-a.example.com", "team-b.example.com"]);
    eventually(
        "the instance counts the 6 objects of team-a and team-b Ready",
        || {
            objects_gauge(&instance.metrics, "true") == 6
                && objects_gauge(&instance.metrics, "false") == 0
        },
    )
    .await;

    // team-c: no status, no finalizer, no Secret, no Event.
    assert_untouched::<SubAccount>(&kube, "team-c", "team-c-sub").await;
    assert_untouched::<ApiKey>(&kube, "team-c", "team-c-key").await;
    assert_untouched::<SendingDomain>(&kube, "team-c", "team-c-dom").await;
    let c_secrets: Api<Secret> = Api::namespaced(kube.clone(), "team-c");
    assert!(
        c_secrets
            .get_opt("team-c-key-value")
            .await
            .unwrap()
            .is_none()
    );
    let c_events: Api<Event> = Api::namespaced(kube.clone(), "team-c");
    assert!(
        c_events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    let _ = instance.stop.send(());
    tokio::time::timeout(WAIT, instance.task)
        .await
        .expect("the operator stopped in time")
        .expect("the operator's task did not panic");
}

/// Two instances sharded over namespaces, each reading ClusterAccount Secrets in its own
/// namespace, both check the ClusterAccount whose Secret only one of them holds: each uses its
/// own result, and the status shows the check of the instance that found the Secret, written
/// once and never flipped by the other one's checks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_instances_do_not_flip_a_cluster_account_status() {
    use mailtarget_operator::controller::accounts::{AccountName, Resolved};
    use mailtarget_operator::crd::ClusterAccount;
    let server = TestApiServer::start().await.unwrap();
    let kube = server.client();
    install_crds(&kube).await;
    create_namespaces(&kube, &["ops-a", "ops-b", "team-a", "team-b"]).await;
    let sim = Simulator::start(SimulatorConfig::new(KEY)).await.unwrap();
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "shared-key"},
        "stringData": {"apiKey": KEY},
    }))
    .unwrap();
    Api::<Secret>::namespaced(kube.clone(), "ops-a")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let accounts: Api<ClusterAccount> = Api::all(kube.clone());
    common::create(
        &accounts,
        &format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: ClusterAccount\nmetadata: {{name: shared}}\nspec:\n  credentials: {{secretRef: {{name: shared-key}}}}\n  apiUrl: {}\n  transmissionUrl: {}\n  scope: Company\n",
            sim.base_url(),
            sim.transmission_url()
        ),
    )
    .await;

    let a = start_scoped(
        &kube,
        &sim,
        "instance-a",
        vec!["team-a".into()],
        None,
        Some("ops-a"),
    );
    let b = start_scoped(
        &kube,
        &sim,
        "instance-b",
        vec!["team-b".into()],
        None,
        Some("ops-b"),
    );
    let ready = wait_for(&accounts, "shared", "Ready", |c: &ClusterAccount| {
        c.status
            .as_ref()
            .is_some_and(|s| ready_is(c, &s.conditions, "True", None))
    })
    .await;
    assert_eq!(
        ready.status.as_ref().unwrap().secret_namespace.as_deref(),
        Some("ops-a")
    );
    // Two more checks by each instance (their resyncs), after the Ready status was written.
    let (seen_a, seen_b) = (
        common::reconciles(&a.metrics, "ClusterAccount"),
        common::reconciles(&b.metrics, "ClusterAccount"),
    );
    eventually("two more checks by each instance", || {
        common::reconciles(&a.metrics, "ClusterAccount") >= seen_a + 2
            && common::reconciles(&b.metrics, "ClusterAccount") >= seen_b + 2
    })
    .await;
    let now = accounts.get("shared").await.unwrap();
    assert_eq!(
        now.metadata.resource_version, ready.metadata.resource_version,
        "the status was written again: {:?}",
        now.status
    );

    // Each instance checked the account for its own use.
    let name = AccountName::Cluster("shared".into());
    assert!(matches!(a.ctx.accounts.resolve(&name), Resolved::Ready(_)));
    match b.ctx.accounts.resolve(&name) {
        Resolved::NotReady { reason } => assert_eq!(reason, "CredentialsNotFound"),
        _ => panic!("instance b cannot read the Secret, yet the account resolved otherwise"),
    }

    for instance in [a, b] {
        let _ = instance.stop.send(());
        tokio::time::timeout(WAIT, instance.task)
            .await
            .expect("the operator stopped in time")
            .expect("the operator's task did not panic");
    }
}

/// Asserts that the operator never wrote to `namespace/name`: no status, no finalizer.
async fn assert_untouched<K>(kube: &kube::Client, namespace: &str, name: &str)
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let obj = Api::<K>::namespaced(kube.clone(), namespace)
        .get(name)
        .await
        .unwrap();
    let status = serde_json::to_value(&obj).unwrap()["status"].clone();
    assert!(
        status.is_null(),
        "{namespace}/{name} has a status: {status}"
    );
    assert!(
        obj.finalizers().is_empty(),
        "{namespace}/{name} has a finalizer"
    );
}
