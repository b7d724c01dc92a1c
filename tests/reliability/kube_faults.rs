//! Test 3 of the reliability suite: the Kubernetes API fails (409 on status writes, 500s on
//! reads, Secret writes and watches, watches cut again and again) while resources converge.

use std::time::Duration;

use mailtarget_test_apiserver::RequestFilter;

use crate::harness::{Mix, Rig, assert_exactly, wait_all_ready};

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
    rig.stop_operator().await;
    rig.server.faults().clear_stalls();
}
