//! Leader election with a renew deadline: a leader cut off from the Kubernetes API (its requests
//! stall at the test API server, or their connections are closed unanswered; the service still
//! reachable) stops writing at its renew deadline, by its own clock, and the standby takes the
//! Lease over and carries on.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use mailtarget_operator::api::{Client as ApiClient, ClientConfig, RetryPolicy, UpdateApiKey};
use mailtarget_operator::controller::leader::{self, Elector, LeaderGate, LeaseSettings, Lost};
use mailtarget_operator::controller::metrics::Metrics;
use mailtarget_operator::controller::{Operator, run_elected};
use mailtarget_operator::crd::ApiKey;
use mailtarget_operator::simulator::RequestRecord;
use mailtarget_test_apiserver::{RequestFilter, TestApiServer};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::common::{KEY, WAIT, api_client, create, eventually, wait_for};
use crate::harness::{NS, Rig, ready_now, settings};

/// The header that tells the replicas' Kubernetes requests apart at the test API server.
const REPLICA_HEADER: &str = "x-test-replica";
const LEASE: &str = "mailtarget-operator";

/// One replica: its own Kubernetes clients (Lease, and the controllers' gated one) and service
/// client (its `User-Agent` is its name), running [`run_elected`] as `mailtarget-operator run
/// --leader-elect` does, with a 2 s Lease (renew deadline 1.33 s, retry every 0.27 s).
struct Replica {
    gate: LeaderGate,
    stop: watch::Sender<bool>,
    task: JoinHandle<Result<(), Lost>>,
}

fn start_replica(rig: &Rig, name: &'static str) -> Replica {
    let mut config = kube::Config::new(rig.server.url().parse().expect("server URL"));
    config.headers.push((
        http::HeaderName::from_static(REPLICA_HEADER),
        http::HeaderValue::from_static(name),
    ));
    let lease_client = kube::Client::try_from(config.clone()).expect("kube client");
    let gate = LeaderGate::closed();
    let kube = leader::gated_client(config, gate.clone()).expect("gated kube client");
    let mut service = ClientConfig::new(
        rig.sim.base_url().parse().expect("simulator URL"),
        rig.sim.transmission_url().parse().expect("simulator URL"),
        KEY.to_string().into(),
    );
    service.user_agent = name.into();
    service.timeout = Duration::from_secs(5);
    service.retry = RetryPolicy {
        max_retries: 2,
        initial_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(200),
    };
    let service =
        ApiClient::new(service.with_write_gate(Arc::new(gate.clone()))).expect("service client");
    let operator = Operator::new(
        kube,
        service,
        Arc::new(Metrics::default()),
        settings(Duration::from_secs(1)),
        name.into(),
    );
    let lease = LeaseSettings::new(NS, LEASE, name, Duration::from_secs(2));
    let elector = Elector::new(lease_client, lease, gate.clone());
    let (stop, rx) = watch::channel(false);
    let stopped = move || {
        let mut rx = rx.clone();
        async move {
            let _ = rx.wait_for(|v| *v).await;
        }
    };
    let task = tokio::spawn(run_elected(
        operator,
        elector,
        stopped,
        Duration::from_secs(2),
        None,
    ));
    Replica { gate, stop, task }
}

/// The Lease's holder as the API server has it.
async fn holder(kube: &kube::Client) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(kube.clone(), NS);
    leases
        .get_opt(LEASE)
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}

/// Waits (bounded by [`WAIT`], polling every 100 ms) until the Lease's holder is `want`.
async fn wait_holder(kube: &kube::Client, want: Option<&str>) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let now = holder(kube).await;
        if now.as_deref() == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the Lease holder is {now:?}, not {want:?}, after {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The service writes made by the replica named `name`.
fn writes_by(rig: &Rig, name: &str) -> Vec<RequestRecord> {
    rig.sim
        .request_log()
        .into_iter()
        .filter(|r| r.is_write() && r.user_agent.as_deref() == Some(name))
        .collect()
}

fn key(name: &str) -> String {
    format!(
        "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {{name: {name}}}\nspec: {{secretName: {name}-key}}\n"
    )
}

/// How the leader is cut off from the Kubernetes API.
#[derive(Clone, Copy, Debug)]
enum Cut {
    /// Its requests are never answered (packets dropped): each waits for its time limit.
    Stall,
    /// Its connections are closed without an answer (a reset): each request fails at once.
    Drop,
}

/// Every Kubernetes request of the leader stalls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_stops_writing_at_its_deadline_and_the_standby_takes_over() {
    cut_off_leader(Cut::Stall).await;
}

/// Every Kubernetes request of the leader has its connection closed unanswered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_connections_drop_stops_writing_at_its_deadline_and_the_standby_takes_over()
{
    cut_off_leader(Cut::Drop).await;
}

/// Replica A leads and creates a key; B waits. Then A is cut off from the Kubernetes API as
/// `cut` says (its watches ended, its Lease renewals failing) while the service stays reachable
/// to it. A stops writing at its renew deadline and gives the lead up; the key is then renamed
/// at the service behind the operator's back, which a leader still running would correct. B
/// takes the Lease over, corrects the name and creates a second key; no service write of A
/// arrives after its deadline. On stop B releases the Lease.
async fn cut_off_leader(cut: Cut) {
    let rig = Rig::new(Rig::sim_config()).await;
    let a = start_replica(&rig, "replica-a");
    wait_holder(&rig.kube, Some("replica-a")).await;
    let b = start_replica(&rig, "replica-b");
    let keys: Api<ApiKey> = rig.api();
    create(&keys, &key("first")).await;
    let first = wait_for(&keys, "first", "Ready", ready_now).await;
    let id = first.status.and_then(|s| s.id).expect("status.id");
    assert_eq!(writes_by(&rig, "replica-a").len(), 1, "A created the key");
    assert!(writes_by(&rig, "replica-b").is_empty(), "the standby wrote");

    let faults = rig.server.faults();
    let of_a = RequestFilter::header(REPLICA_HEADER, "replica-a");
    match cut {
        Cut::Stall => faults.stall(of_a),
        Cut::Drop => faults.drop_connections(of_a),
    }
    faults.drop_watches();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while a.gate.is_open() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "A still may write 10 s after it was cut off (renew deadline 1.33 s)"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let a_closed_ms = unix_ms();
    let lost = tokio::time::timeout(Duration::from_secs(10), a.task)
        .await
        .expect("A ends once its deadline passed")
        .expect("A's task");
    assert_eq!(lost, Err(Lost::DeadlinePassed));
    let cut_requests = match cut {
        Cut::Stall => faults.stalled_requests(),
        Cut::Drop => faults.dropped_requests(),
    };
    assert!(cut_requests > 0, "{cut:?}: no request of A was cut");

    api_client(&rig.sim)
        .update_api_key(
            id,
            &UpdateApiKey {
                name: Some("renamed-by-hand".into()),
                ..Default::default()
            },
        )
        .await
        .expect("rename at the service");
    wait_holder(&rig.kube, Some("replica-b")).await;
    let sim = &rig.sim;
    eventually("the standby corrects the name", || {
        sim.snapshot()
            .api_keys
            .iter()
            .any(|k| k.id == id && k.name == "first")
    })
    .await;
    create(&keys, &key("second")).await;
    wait_for(&keys, "second", "Ready", ready_now).await;

    let late: Vec<_> = writes_by(&rig, "replica-a")
        .into_iter()
        .filter(|w| w.unix_ms >= a_closed_ms)
        .map(|w| format!("{} {}", w.method, w.path))
        .collect();
    assert!(late.is_empty(), "A wrote after its deadline: {late:?}");
    let by_b: Vec<String> = writes_by(&rig, "replica-b")
        .into_iter()
        .map(|w| format!("{} {}", w.method, w.path))
        .collect();
    assert!(
        by_b.contains(&format!("PUT /api-key/{id}")) && by_b.contains(&"POST /api-key".to_string()),
        "B corrected the name and created the second key: {by_b:?}"
    );

    let _ = b.stop.send(true);
    let stopped = tokio::time::timeout(Duration::from_secs(10), b.task)
        .await
        .expect("B stops in time")
        .expect("B's task");
    assert_eq!(stopped, Ok(()));
    assert!(!b.gate.is_open(), "no write after the release");
    wait_holder(&rig.kube, None).await;
}

/// The `(method, path)` of each ConfigMap request the test API server answered.
fn config_map_requests(server: &TestApiServer) -> Vec<(String, String)> {
    server
        .request_log()
        .into_iter()
        .filter(|r| r.path_and_query.contains("/configmaps"))
        .map(|r| (r.method, r.path_and_query))
        .collect()
}

fn config_map(name: &str) -> ConfigMap {
    let mut map = ConfigMap::default();
    map.metadata.name = Some(name.into());
    map
}

/// The controllers' Kubernetes client ([`leader::gated_client`]) sends a write only while the
/// gate is open and cuts it at the deadline: a POST before the Lease is held and a PATCH past
/// the renew deadline fail unsent (the test API server never sees them) while reads still go
/// through; a PATCH that stalls at the server fails at the deadline. Between those, with the
/// Lease just taken, writes reach the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gated_kubernetes_client_writes_only_within_the_renew_deadline() {
    let server = TestApiServer::start().await.expect("test API server");
    let config = kube::Config::new(server.url().parse().expect("server URL"));
    let gate = LeaderGate::closed();
    let maps: Api<ConfigMap> = Api::namespaced(
        leader::gated_client(config, gate.clone()).expect("gated kube client"),
        NS,
    );
    let refused = maps
        .create(&PostParams::default(), &config_map("before"))
        .await
        .expect_err("a POST before the Lease is held");
    assert!(refused.to_string().contains("not sent"), "{refused}");
    assert!(
        config_map_requests(&server).is_empty(),
        "the refused POST reached the server: {:?}",
        config_map_requests(&server)
    );

    // A 2 s Lease: the gate opens for 1.33 s after each renewal, and nothing renews it here.
    let settings = LeaseSettings::new(NS, LEASE, "solo", Duration::from_secs(2));
    let mut elector = Elector::new(server.client(), settings, gate.clone());
    assert!(acquired(&mut elector).await, "Lease taken");
    maps.create(&PostParams::default(), &config_map("held"))
        .await
        .expect("a POST while the Lease is held");
    let sent = config_map_requests(&server);
    assert_eq!(sent.len(), 1, "{sent:?}");

    let deadline = tokio::time::Instant::now() + WAIT;
    while gate.is_open() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the gate still open {WAIT:?} after a renewal (renew deadline 1.33 s)"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let label = serde_json::json!({ "metadata": { "labels": { "late": "yes" } } });
    let refused = maps
        .patch("held", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .expect_err("a PATCH past the renew deadline");
    assert!(refused.to_string().contains("not sent"), "{refused}");
    maps.get("held").await.expect("a read past the deadline");
    let requests = config_map_requests(&server);
    assert!(
        requests.iter().all(|(method, _)| method != "PATCH"),
        "the refused PATCH reached the server: {requests:?}"
    );

    assert!(acquired(&mut elector).await, "Lease renewed");
    server
        .faults()
        .stall(RequestFilter::path("/configmaps/held").with_method("PATCH"));
    let cut = tokio::time::timeout(
        WAIT,
        maps.patch("held", &PatchParams::default(), &Patch::Merge(&label)),
    )
    .await
    .expect("the stalled PATCH ends")
    .expect_err("a PATCH that stalls past the renew deadline");
    assert!(cut.to_string().contains("cut at"), "{cut}");
    assert!(!gate.is_open());
}

/// Whether the request log shows a renewal (PATCH of the Lease) answered 200 after one answered
/// 409.
fn renewed_after_a_conflict(server: &TestApiServer) -> bool {
    let renewals: Vec<u16> = server
        .request_log()
        .into_iter()
        .filter(|r| r.method == "PATCH" && r.path_and_query.contains(&format!("/leases/{LEASE}")))
        .map(|r| r.status)
        .collect();
    renewals
        .iter()
        .position(|s| *s == 409)
        .is_some_and(|at| renewals[at..].contains(&200))
}

/// Renewals answered 409 Conflict (the Lease changed since it was written: here injected
/// answers, in a cluster any other write to the Lease) are not a takeover: the leader reads the
/// Lease and, still its holder, renews it at its next retry (as client-go's renew loop) and
/// keeps the lead. Only a Lease actually held by another identity ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_on_renewal_is_retried_and_only_another_holder_ends_the_lead() {
    let server = TestApiServer::start().await.expect("test API server");
    let gate = LeaderGate::closed();
    let settings = LeaseSettings::new(NS, LEASE, "solo", Duration::from_secs(2));
    let mut elector = Elector::new(server.client(), settings, gate.clone());
    assert!(acquired(&mut elector).await, "Lease taken");
    // Two: the renewal over the last written version, then the one after reading the Lease.
    server.faults().fail_next(
        2,
        409,
        RequestFilter::path(&format!("/leases/{LEASE}")).with_method("PATCH"),
    );
    let renewed = async {
        let deadline = tokio::time::Instant::now() + WAIT;
        while !renewed_after_a_conflict(&server) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no renewal after the conflict within {WAIT:?}: {:?}",
                server.request_log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let lost = tokio::select! {
        lost = elector.keep() => Some(lost),
        () = renewed => None,
    };
    assert_eq!(lost, None, "the lead was lost after one 409");
    assert!(
        gate.is_open(),
        "the renewal after the conflict opened the gate"
    );
    assert_eq!(holder(&server.client()).await.as_deref(), Some("solo"));

    taken_over(&server, &mut elector, &gate).await;
}

/// The Lease requests in the test API server's log, as (method, status).
fn lease_requests(server: &TestApiServer) -> Vec<(String, u16)> {
    (server.request_log().into_iter())
        .filter(|r| r.path_and_query.contains(&format!("/leases/{LEASE}")))
        .map(|r| (r.method, r.status))
        .collect()
}

/// While it leads, a replica renews the Lease with one write over the version it last wrote
/// (client-go's optimistic renewal), not a read and a write per renewal; another replica's
/// write makes the next renewal fail with 409, and the read that follows ends the lead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_renews_with_one_write_per_renewal() {
    let server = TestApiServer::start().await.expect("test API server");
    let gate = LeaderGate::closed();
    let settings = LeaseSettings::new(NS, LEASE, "solo", Duration::from_secs(2));
    let mut elector = Elector::new(server.client(), settings, gate.clone());
    assert!(acquired(&mut elector).await, "Lease taken");
    server.faults().clear_request_log();
    let three_renewals = async {
        let deadline = tokio::time::Instant::now() + WAIT;
        while lease_requests(&server).len() < 3 {
            assert!(tokio::time::Instant::now() < deadline, "no three renewals");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let lost = tokio::select! {
        lost = elector.keep() => Some(lost),
        () = three_renewals => None,
    };
    assert_eq!(lost, None);
    let requests = lease_requests(&server);
    assert!(
        requests.iter().all(|(m, s)| m == "PATCH" && *s == 200),
        "each renewal is one accepted PATCH: {requests:?}"
    );

    server.faults().clear_request_log();
    taken_over(&server, &mut elector, &gate).await;
    // The takeover's own PATCH, then the renewal over the old version refused, then the read.
    let requests = lease_requests(&server);
    let ours = &requests[requests.len().saturating_sub(2)..];
    assert_eq!(
        ours,
        [("PATCH".to_string(), 409), ("GET".to_string(), 200)],
        "{requests:?}"
    );
}

/// Another replica takes the Lease from `elector`, which then loses the lead (bounded by
/// [`WAIT`]) and closes `gate`.
async fn taken_over(server: &TestApiServer, elector: &mut Elector, gate: &LeaderGate) {
    let leases: Api<Lease> = Api::namespaced(server.client(), NS);
    let other = serde_json::json!({ "spec": { "holderIdentity": "other" } });
    leases
        .patch(LEASE, &PatchParams::default(), &Patch::Merge(&other))
        .await
        .expect("another replica takes the Lease");
    let lost = tokio::time::timeout(WAIT, elector.keep())
        .await
        .expect("the lead ends once another replica holds the Lease");
    assert_eq!(lost, Lost::TakenOver);
    assert!(!gate.is_open());
}

/// `elector` takes the Lease (bounded by [`crate::common::WAIT`]): true when it holds it.
async fn acquired(elector: &mut Elector) -> bool {
    tokio::time::timeout(crate::common::WAIT, elector.acquire(std::future::pending()))
        .await
        .expect("the Lease acquired or refused within the wait")
}
