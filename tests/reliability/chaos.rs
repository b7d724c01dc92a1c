//! Test 1 of the reliability suite: convergence while the service fails and loses answers.

use std::time::Duration;

use mailtarget_operator::simulator::FaultConfig;

use crate::harness::{Mix, Rig, assert_exactly, wait_all_ready};

/// 50 mixed resources converge while 30% of the service's answers are injected 500s and 10% of
/// the requests it processes lose their answer (half as a 500, half as a reset connection):
/// every resource ends Ready, the simulator holds exactly the declared objects (no duplicate,
/// no orphan), every key value and DKIM private key is in its Secret, and the operator never
/// has more than its budget of 8 requests in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_resources_converge_under_faults() {
    let mut config = Rig::sim_config();
    config.faults = FaultConfig {
        error_rate: 0.3,
        drop_response_rate: 0.1,
        seed: std::env::var("CHAOS_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(20_240_601),
        ..FaultConfig::default()
    };
    let mut rig = Rig::new(config).await;
    let mix = Mix::of(50);
    assert_eq!(mix.len(), 50);
    mix.create(&rig.kube).await;
    rig.start_operator(Duration::from_secs(5));

    wait_all_ready(&rig.kube, Duration::from_secs(120)).await;
    assert!(rig.operator_alive(), "the operator is still running");
    rig.stop_operator().await;

    let state = rig.sim.snapshot();
    assert_exactly(&rig.kube, &state, &mix).await;

    let log = rig.sim.request_log();
    let failed_posts = log
        .iter()
        .filter(|r| r.method == "POST" && r.status >= 500)
        .count();
    assert!(failed_posts > 0, "faults hit some creates: {log:?}");
    assert!(
        rig.sim.max_concurrent_requests() <= 8,
        "the operator exceeded its budget of 8 requests in flight: {}",
        rig.sim.max_concurrent_requests()
    );
}
