//! Derives the Kubernetes API calls the operator really makes: runs it in-process against the
//! test API server and the simulator through a scenario that exercises every path (create,
//! adopt through a reference, a reference to a SubAccount not yet there, DNS verification, a deleted Secret written again, deletion with
//! finalizers, leader election, a ClusterAccount and an Account checked), records each request its client sends, and checks every one
//! is a call of the table in `rbac.rs` (and so is allowed by the chart's RBAC, which the
//! `rbac` tests check against the same table).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use mailtarget_operator::controller::leader::{Elector, LeaderGate, LeaseSettings};
use mailtarget_operator::controller::metrics::Metrics;
use mailtarget_operator::controller::{Operator, Settings};
use mailtarget_operator::crd::{Account, ApiKey, ClusterAccount, SendingDomain, SubAccount};
use mailtarget_operator::simulator::{Simulator, SimulatorConfig};
use mailtarget_test_apiserver::TestApiServer;

use super::common::{KEY, api_client, create, install_crds, ready_is, wait_deleted, wait_for};
use super::rbac::{CALLS, Scope, grants};

/// One request the operator's client sent, with the status it got.
#[derive(Clone, Debug)]
struct Sent {
    method: String,
    path_and_query: String,
    content_type: Option<String>,
    status: u16,
}

/// A tower layer that records every request of a kube client.
#[derive(Clone, Default)]
struct RecordLayer(Arc<Mutex<Vec<Sent>>>);

impl RecordLayer {
    fn sent(&self) -> Vec<Sent> {
        self.0.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

struct Record<S> {
    inner: S,
    log: Arc<Mutex<Vec<Sent>>>,
}

impl<S> tower::Layer<S> for RecordLayer {
    type Service = Record<S>;
    fn layer(&self, inner: S) -> Record<S> {
        Record {
            inner,
            log: self.0.clone(),
        }
    }
}

impl<S, ReqBody, ResBody> tower::Service<http::Request<ReqBody>> for Record<S>
where
    S: tower::Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<ReqBody>) -> Self::Future {
        let mut sent = Sent {
            method: req.method().to_string(),
            path_and_query: req
                .uri()
                .path_and_query()
                .map(|p| p.to_string())
                .unwrap_or_default(),
            content_type: req
                .headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            status: 0,
        };
        let log = self.log.clone();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let res = fut.await;
            if let Ok(r) = &res {
                sent.status = r.status().as_u16();
            }
            if let Ok(mut l) = log.lock() {
                l.push(sent);
            }
            res
        })
    }
}

/// A request as RBAC sees it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Authorized {
    group: String,
    resource: String,
    verb: String,
    namespace: Option<String>,
    name: Option<String>,
}

/// The RBAC attributes of a request (Kubernetes "Authorization": request attributes), or
/// `None` for non-resource paths such as discovery.
fn authorize(s: &Sent) -> Vec<Authorized> {
    let (path, query) = s
        .path_and_query
        .split_once('?')
        .unwrap_or((s.path_and_query.as_str(), ""));
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return Vec::new(),
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
        _ => (None, rest),
    };
    let (resource, name, sub) = match rest {
        [resource] => (*resource, None, None),
        [resource, name] => (*resource, Some(name.to_string()), None),
        [resource, name, sub] => (*resource, Some(name.to_string()), Some(*sub)),
        _ => return Vec::new(),
    };
    let watch = query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1");
    let verbs: Vec<&str> = match (s.method.as_str(), name.is_some()) {
        ("GET", true) => vec!["get"],
        ("GET", false) if watch => vec!["watch"],
        ("GET", false) => vec!["list"],
        ("POST", _) => vec!["create"],
        ("PUT", _) => vec!["update"],
        ("DELETE", true) => vec!["delete"],
        ("DELETE", false) => vec!["deletecollection"],
        // Server-side apply that creates is authorized as create too.
        ("PATCH", _)
            if s.status == 201
                && s.content_type
                    .as_deref()
                    .is_some_and(|c| c.starts_with("application/apply-patch")) =>
        {
            vec!["patch", "create"]
        }
        ("PATCH", _) => vec!["patch"],
        _ => vec![s.method.as_str()],
    };
    let resource = match sub {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.to_string(),
    };
    verbs
        .into_iter()
        .map(|verb| Authorized {
            group: group.to_string(),
            resource: resource.clone(),
            verb: verb.to_string(),
            namespace: namespace.clone(),
            name: name.clone(),
        })
        .collect()
}

/// Longest wait of the scenario's steps.
const WAIT: Duration = Duration::from_secs(30);
const LEASE: &str = "mailtarget-operator";

async fn recording_client(server: &TestApiServer, layer: &RecordLayer) -> kube::Client {
    let uri: http::Uri = server.url().parse().expect("the server's URL");
    let config = kube::Config::new(uri);
    kube::client::ClientBuilder::try_from(config)
        .expect("a client for the test API server")
        .with_layer(layer)
        .build()
}

fn ready<K: kube::Resource>(obj: &K, conditions: &[mailtarget_operator::crd::Condition]) -> bool {
    ready_is(obj, conditions, "True", None)
}

/// Runs the scenario and returns every request of the operator's client.
async fn operator_requests() -> Vec<Sent> {
    let server = TestApiServer::start().await.expect("test API server");
    let kube = server.client();
    install_crds(&kube).await;
    let mut sim_config = SimulatorConfig::new(KEY);
    sim_config.verify_after_calls = 1;
    let sim = Simulator::start(sim_config).await.expect("simulator");
    let layer = RecordLayer::default();
    let operator_kube = recording_client(&server, &layer).await;
    let settings = Settings {
        resync_interval: Duration::from_secs(300),
        detail_resync_interval: Duration::from_secs(300),
        verify_first_interval: Duration::from_millis(200),
        verify_max_interval: Duration::from_secs(1),
        max_error_backoff: Duration::from_secs(2),
        default_adoption_policy: None,
    };
    let operator = Operator::new(
        operator_kube.clone(),
        api_client(&sim),
        Arc::new(Metrics::default()),
        settings,
        "replica-a".into(),
    );
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(operator.run(async move {
        let _ = stop_rx.await;
    }));

    // Accounts: a ClusterAccount (its Secret in the operator's namespace, the client's default
    // `default`) and an Account, each checked and its status written.
    let secrets_api: Api<Secret> = Api::namespaced(kube.clone(), "default");
    let credentials: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "company"},
        "stringData": {"apiKey": KEY}
    }))
    .expect("a Secret");
    secrets_api
        .create(&kube::api::PostParams::default(), &credentials)
        .await
        .expect("the credentials Secret");
    let account_spec = format!(
        "spec:\n  credentials: {{secretRef: {{name: company}}}}\n  apiUrl: {}\n  transmissionUrl: {}\n  scope: Company\n",
        sim.base_url(),
        sim.transmission_url()
    );
    let cluster_accounts: Api<ClusterAccount> = Api::all(kube.clone());
    let accounts: Api<Account> = Api::namespaced(kube.clone(), "default");
    create(
        &cluster_accounts,
        &format!("apiVersion: mailtarget.co/v1alpha1\nkind: ClusterAccount\nmetadata: {{name: company}}\n{account_spec}"),
    )
    .await;
    create(
        &accounts,
        &format!("apiVersion: mailtarget.co/v1alpha1\nkind: Account\nmetadata: {{name: company}}\n{account_spec}"),
    )
    .await;
    wait_for(
        &cluster_accounts,
        "company",
        "Ready",
        |a: &ClusterAccount| a.status.as_ref().is_some_and(|st| ready(a, &st.conditions)),
    )
    .await;
    wait_for(&accounts, "company", "Ready", |a: &Account| {
        a.status.as_ref().is_some_and(|st| ready(a, &st.conditions))
    })
    .await;

    let subs: Api<SubAccount> = Api::namespaced(kube.clone(), "default");
    let keys: Api<ApiKey> = Api::namespaced(kube.clone(), "default");
    let domains: Api<SendingDomain> = Api::namespaced(kube.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(kube.clone(), "default");

    create(&subs, "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: team-c}\nspec:\n  apiKey: {name: sender, secretName: team-c-key}\n").await;
    wait_for(&subs, "team-c", "Ready", |s: &SubAccount| {
        s.status.as_ref().is_some_and(|st| ready(s, &st.conditions))
    })
    .await;
    create(&keys, "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: sender}\nspec: {secretName: sender-key, subAccountRef: {name: team-c}}\n").await;
    create(&keys, "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: ci}\nspec: {name: ci, secretName: ci-key}\n").await;
    // Through the Account: it carries the in-use finalizer while the key exists.
    create(&keys, "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: billing}\nspec: {secretName: billing-key, accountRef: {kind: Account, name: company}}\n").await;
    create(&domains, "apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata: {name: mail}\nspec: {domain: mail.example.com, dkimPrivateKeySecretName: mail-dkim}\n").await;
    for name in ["sender", "ci", "billing"] {
        wait_for(&keys, name, "Ready", |k: &ApiKey| {
            k.status.as_ref().is_some_and(|st| ready(k, &st.conditions))
        })
        .await;
    }
    wait_for(&domains, "mail", "Ready", |d: &SendingDomain| {
        d.status.as_ref().is_some_and(|st| ready(d, &st.conditions))
    })
    .await;

    // A key whose SubAccount does not exist: absent from the SubAccount cache, it is read from
    // the API (404), and the key waits for it.
    create(&keys, "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: waiting}\nspec: {secretName: waiting-key, subAccountRef: {name: later}}\n").await;
    wait_for(&keys, "waiting", "ReferenceNotReady", |k: &ApiKey| {
        k.status.as_ref().is_some_and(|st| {
            st.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.reason == "ReferenceNotReady")
        })
    })
    .await;

    // A deleted key Secret is written again (watch of owned Secrets, then server-side apply).
    let old = secrets.get("ci-key").await.expect("the ci-key Secret");
    secrets
        .delete("ci-key", &DeleteParams::default())
        .await
        .expect("delete ci-key");
    let old_uid = old.uid().unwrap_or_default();
    wait_for(&secrets, "ci-key", "written again", move |s: &Secret| {
        s.uid().is_some_and(|u| u != old_uid)
    })
    .await;

    // Deletion: finalizers removed after cleanup.
    wait_for(&accounts, "company", "in use", |a: &Account| {
        a.finalizers().iter().any(|f| f == "mailtarget.co/in-use")
    })
    .await;
    for name in ["ci", "sender", "waiting", "billing"] {
        let uid = keys.get(name).await.expect("key").uid().unwrap_or_default();
        keys.delete(name, &DeleteParams::default())
            .await
            .expect("delete key");
        wait_deleted(&keys, name, &uid).await;
    }
    let uid = domains
        .get("mail")
        .await
        .expect("domain")
        .uid()
        .unwrap_or_default();
    domains
        .delete("mail", &DeleteParams::default())
        .await
        .expect("delete domain");
    wait_deleted(&domains, "mail", &uid).await;
    let uid = subs
        .get("team-c")
        .await
        .expect("sub account")
        .uid()
        .unwrap_or_default();
    subs.delete("team-c", &DeleteParams::default())
        .await
        .expect("delete sub account");
    wait_deleted(&subs, "team-c", &uid).await;
    wait_for(&accounts, "company", "no longer in use", |a: &Account| {
        !a.finalizers().iter().any(|f| f == "mailtarget.co/in-use")
    })
    .await;

    let _ = stop_tx.send(());
    super::common::await_stopped(task).await;

    // Leader election, as `run --leader-elect` does it: take the Lease, then release it.
    let mut elector = Elector::new(
        operator_kube,
        LeaseSettings::new("default", LEASE, "replica-a", Duration::from_secs(15)),
        LeaderGate::closed(),
    );
    let leads = tokio::time::timeout(WAIT, elector.acquire(std::future::pending()))
        .await
        .expect("the Lease is acquired in time");
    assert!(leads, "this replica leads");
    elector.release(Duration::from_secs(5)).await;
    sim.shutdown().await;
    layer.sent()
}

/// Every request the operator sends is a call of the table, addressed where the table says;
/// the calls the table lists are really made (except the ones the scenario cannot provoke);
/// and, when the Helm engine is available, the chart's default RBAC allows each of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_calls_are_the_table() {
    let sent = operator_requests().await;
    assert!(!sent.is_empty(), "no request recorded");
    let mut observed: Vec<Authorized> = Vec::new();
    for s in &sent {
        let calls = authorize(s);
        assert!(
            !calls.is_empty(),
            "the operator sent a non-resource request {} {}",
            s.method,
            s.path_and_query
        );
        observed.extend(calls);
    }
    observed.sort();
    observed.dedup();
    for o in &observed {
        let row = CALLS
            .iter()
            .find(|c| c.group == o.group && c.resource == o.resource && c.verb == o.verb);
        let Some(row) = row else {
            panic!("the operator makes a call the RBAC table lacks: {o:?}");
        };
        match row.scope {
            Scope::Watched => assert!(
                o.namespace.is_none() || o.namespace.as_deref() == Some("default"),
                "{o:?} outside the watched namespace"
            ),
            Scope::Cluster => assert!(o.namespace.is_none(), "{o:?} is cluster-wide"),
            Scope::OperatorNamespace => assert!(
                o.namespace.is_none() || o.namespace.as_deref() == Some("default"),
                "{o:?} outside the operator's namespace"
            ),
            Scope::Lease { named } => {
                assert_eq!(o.namespace.as_deref(), Some("default"), "{o:?}");
                if named {
                    assert_eq!(
                        o.name.as_deref(),
                        Some(LEASE),
                        "{o:?}: RBAC restricts it to the Lease's name"
                    );
                }
            }
        }
    }
    // Rows the scenario cannot provoke deterministically.
    let not_exercised: &[(&str, &str, &str)] = &[
        // Only when the same Event repeats within kube's cache window.
        ("events.k8s.io", "events", "patch"),
        // Only after a 409 Conflict on the account's status write (another instance wrote it).
        ("mailtarget.co", "accounts", "get"),
        ("mailtarget.co", "clusteraccounts", "get"),
    ];
    for c in CALLS {
        let seen = observed
            .iter()
            .any(|o| o.group == c.group && o.resource == c.resource && o.verb == c.verb);
        let exempt = not_exercised.contains(&(c.group, c.resource, c.verb));
        assert!(
            seen || exempt,
            "the table lists {} {}/{} ({}), but the operator never made that call: is the permission still needed?",
            c.verb,
            c.group,
            c.resource,
            c.why
        );
    }
    if !super::helm::require_helm("operator_calls_are_the_table (RBAC part)") {
        return;
    }
    let r = super::helm::defaults();
    let grants = grants(r, "mailtarget-operator", "mailtarget-system");
    for o in &observed {
        // Watched calls happen in any namespace; the Lease in the release namespace.
        let lease = o.resource == "leases";
        let namespace = if lease {
            Some("mailtarget-system")
        } else {
            o.namespace.as_deref()
        };
        let name = if lease {
            o.name.as_deref().map(|_| "mailtarget-operator")
        } else {
            o.name.as_deref()
        };
        let allowed = grants.iter().any(|g| {
            g.group == o.group
                && g.resource == o.resource
                && g.verb == o.verb
                && (g.namespace.is_none() || g.namespace.as_deref() == namespace)
                && (g.names.is_empty() || name.is_some_and(|n| g.names.iter().any(|x| x == n)))
        });
        assert!(allowed, "the chart's RBAC does not allow {o:?}");
    }
}
