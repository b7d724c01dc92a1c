//! Test 3 of the reliability suite: the Kubernetes API fails (409 on status writes, 500s on
//! reads, Secret writes and watches, watches cut again and again) while resources converge, and a
//! watch that stops delivering leaves the operator deciding from stale cached copies.

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use mailtarget_operator::crd::{ANNOTATION_EXTERNAL_ID, ApiKey};
use mailtarget_test_apiserver::RequestFilter;

use crate::common::{WAIT, eventually, reconciles};
use crate::harness::{Mix, Rig, assert_exactly, operator_client, ready_now, wait_all_ready};

/// While 8 resources converge, the test API server answers 409 Conflict to status writes, 500
/// to object reads, Secret writes and new watches, and cuts every open watch ten times. The
/// operator recovers and converges, and the service sees each write exactly once: one POST per
/// created object and one verify-txt per domain, nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_faults_cause_no_duplicate_writes() {
    let mut rig = Rig::new(Rig::sim_config()).await;
    let mix = Mix::of(8);
    mix.create(&rig.kube).await;

    let faults = rig.server.faults();
    faults.clear_request_log();
    faults.fail_next(6, 409, RequestFilter::path("/status").with_method("PATCH"));
    faults.fail_next(
        3,
        500,
        RequestFilter::path("/secrets/").with_method("PATCH"),
    );
    faults.fail_next(
        3,
        500,
        RequestFilter::path("/mailtarget.co/").with_method("GET"),
    );
    faults.fail_next(3, 500, RequestFilter::path("watch=true"));
    rig.start_operator(Duration::from_secs(5));
    let cutter = {
        let faults = faults.clone();
        tokio::spawn(async move {
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_millis(150)).await;
                faults.drop_watches();
            }
        })
    };
    wait_all_ready(&rig.kube, Duration::from_secs(60)).await;
    let _ = cutter.await;
    rig.stop_operator().await;

    let served: Vec<u16> = rig.server.request_log().iter().map(|r| r.status).collect();
    assert!(served.contains(&409), "status conflicts were injected");
    assert!(served.contains(&500), "server errors were injected");

    assert_exactly(&rig.kube, &rig.sim.snapshot(), &mix).await;
    let writes: Vec<(String, String)> = rig
        .writes()
        .into_iter()
        .map(|r| (r.method, r.path))
        .collect();
    let count = |method: &str, pred: &dyn Fn(&str) -> bool| {
        writes
            .iter()
            .filter(|(m, p)| m == method && pred(p))
            .count()
    };
    assert_eq!(count("POST", &|p| p == "/sub-account"), 2, "{writes:?}");
    assert_eq!(count("POST", &|p| p == "/api-key"), 2, "{writes:?}");
    assert_eq!(count("POST", &|p| p == "/domain/sending"), 2, "{writes:?}");
    assert_eq!(
        count("PUT", &|p| p.ends_with("/verify-txt")),
        2,
        "{writes:?}"
    );
    assert_eq!(writes.len(), 8, "no other write: {writes:?}");
}

/// A stop that comes before a cache holds its first list ends the operator: the watches are
/// dropped with their reflectors, so the controllers waiting for that list give up (they
/// waited for ever while a stopped watch kept its reflector alive: seen as "the operator did
/// not stop within 30 s" when a test stopped an operator moments after starting it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_before_the_first_list_ends_the_operator() {
    let mut rig = Rig::new(Rig::sim_config()).await;
    // The ApiKeys' list never answers; the other kinds list as usual.
    rig.server.faults().stall(RequestFilter::path("apikeys"));
    rig.start_operator(Duration::from_secs(300));
    crate::common::eventually("the SubAccounts are listed", || {
        rig.server
            .request_log()
            .iter()
            .any(|r| r.path_and_query.contains("subaccounts") && r.status == 200)
    })
    .await;
    crate::common::eventually("the ApiKeys' list is stalled", || {
        rig.server.faults().stalled_requests() > 0
    })
    .await;
    rig.stop_operator().await;
    rig.server.faults().clear_stalls();
}

/// Polls the ApiKey `name` with GETs (a watch of ApiKeys would stall with the operator's) until
/// `check` holds, bounded by [`WAIT`].
async fn poll_key(
    keys: &Api<ApiKey>,
    name: &str,
    what: &str,
    check: impl Fn(&ApiKey) -> bool,
) -> ApiKey {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let k = keys.get(name).await.expect("read the ApiKey");
        if check(&k) {
            return k;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name}: not {what} within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A reconcile from a stale cached copy writes nothing. The operator starts with its ApiKey watch
/// cut off after the first list, so its cache keeps the Ready copy of a key, and the key is then
/// deleted at the service: a resync creates it again, once, from that copy while it is current.
/// The resyncs after it decide from the same copy, now stale (the old id, no pending marker):
/// they find the new key by name, which from that copy reads as someone else's
/// (`AlreadyExists`). Their writes carry the stale copy's resourceVersion and get 409 Conflict,
/// so `status.id` and `external-id` keep the new id, the key stays Ready, no Warning is published
/// and nothing more is created; a restarted operator finds it all in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_cached_copy_writes_nothing() {
    let mut rig = Rig::new(Rig::sim_config()).await;
    rig.start_operator(Duration::from_millis(300));
    let keys: Api<ApiKey> = rig.api();
    let key: ApiKey = serde_yaml::from_str(
        "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: ci}\nspec: {name: ci, secretName: ci-key}\n",
    )
    .unwrap();
    keys.create(&PostParams::default(), &key).await.unwrap();
    let recorded =
        |k: &ApiKey| ready_now(k) && k.annotations().get(ANNOTATION_EXTERNAL_ID).is_some();
    let first = poll_key(&keys, "ci", "Ready and recorded", recorded).await;
    let old_id = first.status.and_then(|s| s.id).expect("status.id");
    rig.stop_operator().await;

    // A new operator lists the key (its cache holds the current copy), then its watch of
    // ApiKeys never answers. Its first reconcile ends before the key goes at the service: one
    // that met the key in the list and not in the read after it would write its status
    // (ExternalObjectGone), and with it the copy it holds would be stale before any create.
    let faults = rig.server.faults();
    faults.stall(RequestFilter::path("apikeys?&watch=true"));
    let before_restart = reconciles(&rig.metrics, "ApiKey");
    rig.start_operator(Duration::from_millis(300));
    let metrics = rig.metrics.clone();
    eventually("the new operator's first reconcile", || {
        reconciles(&metrics, "ApiKey") > before_restart
    })
    .await;
    operator_client(&rig.sim)
        .delete_api_key(old_id)
        .await
        .expect("delete the key at the service");
    let sim = &rig.sim;
    eventually("the key created again", || {
        sim.snapshot().api_keys.iter().any(|k| k.id != old_id)
    })
    .await;
    let new_id = sim.snapshot().api_keys[0].id;
    // Each reconcile from the stale copy confirms its missing id with a GET first.
    let old_path = format!("/api-key/{old_id}");
    eventually("three reconciles from the stale copy", || {
        sim.request_log()
            .iter()
            .filter(|r| r.method == "GET" && r.path == old_path)
            .count()
            >= 3
    })
    .await;
    let k = keys.get("ci").await.unwrap();
    assert_eq!(
        k.status.as_ref().and_then(|s| s.id),
        Some(new_id),
        "status.id kept"
    );
    assert_eq!(
        k.annotations().get(ANNOTATION_EXTERNAL_ID),
        Some(&new_id.to_string()),
        "external-id kept"
    );
    assert!(ready_now(&k), "still Ready: {:?}", k.status);
    let keys_at_service: Vec<i64> = rig.sim.snapshot().api_keys.iter().map(|k| k.id).collect();
    assert_eq!(keys_at_service, vec![new_id], "created once");
    rig.stop_operator().await;
    // Listed once the operator has stopped: Events are published asynchronously.
    let events: Api<Event> = rig.api();
    let warnings: Vec<String> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .filter_map(|e| e.reason)
        .collect();
    // The one Warning is the recreation itself (the key was deleted at the service).
    assert_eq!(
        warnings,
        ["Recreated"],
        "no Warning from a stale copy: {warnings:?}"
    );
    faults.clear_stalls();
    let posts = rig.posts();
    let list_reads = |sim: &mailtarget_operator::simulator::Simulator| {
        sim.request_log()
            .iter()
            .filter(|r| r.method == "GET" && r.path == "/api-key")
            .count()
    };
    let before = list_reads(&rig.sim);
    rig.start_operator(Duration::from_millis(300));
    let sim = &rig.sim;
    eventually("two resyncs after the restart", || {
        list_reads(sim) >= before + 2
    })
    .await;
    let k = poll_key(&keys, "ci", "Ready", ready_now).await;
    assert_eq!(k.status.and_then(|s| s.id), Some(new_id));
    assert_eq!(rig.posts(), posts, "nothing created after the restart");
    rig.stop_operator().await;
}

/// An operator stopped while its first list of SubAccounts never answers was never ready: the
/// stop ends its waits for the caches' first lists, and readiness stays false.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_before_the_first_lists_leaves_readiness_false() {
    use mailtarget_operator::controller::Operator;
    let rig = Rig::new(Rig::sim_config()).await;
    let faults = rig.server.faults();
    faults.stall(RequestFilter::path("/subaccounts?").with_method("GET"));
    let operator = Operator::new(
        rig.kube.clone(),
        operator_client(&rig.sim),
        rig.metrics.clone(),
        crate::harness::settings(Duration::from_secs(300)),
        "reliability-test".into(),
    );
    let synced = operator.synced();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(operator.run(async move {
        let _ = stopped.await;
    }));
    eventually("the SubAccount list stalled", || {
        faults.stalled_requests() > 0
    })
    .await;
    let _ = stop.send(());
    tokio::time::timeout(WAIT, task)
        .await
        .expect("the operator stops")
        .expect("the operator task ends without panicking");
    assert!(
        !*synced.borrow(),
        "not ready after a stop before the first lists"
    );
}
