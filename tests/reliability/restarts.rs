//! Test 2 of the reliability suite: the operator killed at random points during convergence,
//! in-process (the task aborted where it stands) and as a real process (SIGKILL).

use std::process::Stdio;
use std::time::Duration;

use mailtarget_operator::simulator::{FaultConfig, Simulator};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::common::KEY;
use crate::harness::{Mix, Rig, assert_exactly, wait_all_ready};

/// Waits until the simulator has served `more` requests beyond `from`, or `limit` passed
/// (convergence may finish before that many requests).
async fn after_requests(sim: &Simulator, from: usize, more: usize, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    while sim.request_log().len() < from + more && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The in-process operator is aborted 6 times, each time after a random number (seeded) of
/// service requests, while 20 resources converge with 10% injected errors and 10% lost
/// answers; a last operator finishes the job. The result is the same as without crashes:
/// every resource Ready, exactly the declared objects, every value in its Secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashes_at_random_points_leave_no_duplicates() {
    let mut config = Rig::sim_config();
    config.faults = FaultConfig {
        error_rate: 0.1,
        drop_response_rate: 0.1,
        seed: 7,
        ..FaultConfig::default()
    };
    let mut rig = Rig::new(config).await;
    let mix = Mix::of(20);
    mix.create(&rig.kube).await;
    let mut rng = StdRng::seed_from_u64(11);
    for _ in 0..6 {
        let from = rig.sim.request_log().len();
        rig.start_operator(Duration::from_secs(5));
        let more = rng.random_range(2..12);
        after_requests(&rig.sim, from, more, Duration::from_secs(10)).await;
        rig.crash_operator().await;
    }
    rig.start_operator(Duration::from_secs(5));
    wait_all_ready(&rig.kube, Duration::from_secs(60)).await;
    rig.stop_operator().await;
    assert_exactly(&rig.kube, &rig.sim.snapshot(), &mix).await;
}

/// Runs `mailtarget-operator run` against the rig; its logs (trace level) go to `log`.
fn spawn_binary(rig: &Rig, log: &std::path::Path) -> tokio::process::Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("log file");
    tokio::process::Command::new(env!("CARGO_BIN_EXE_mailtarget-operator"))
        .args([
            "run",
            "--metrics-addr",
            "127.0.0.1:0",
            "--resync-interval",
            "3s",
            "--verify-first-interval",
            "200ms",
            "--verify-max-interval",
            "1s",
        ])
        .env("KUBECONFIG", rig.server.kubeconfig_path())
        .env("MAILTARGET_API_KEY", KEY)
        .env("MAILTARGET_API_URL", rig.sim.base_url())
        .env("MAILTARGET_TRANSMISSION_URL", rig.sim.transmission_url())
        .env("MAILTARGET_API_TIMEOUT", "5")
        .env("RUST_LOG", "trace")
        .env_remove("WATCH_NAMESPACE")
        .env_remove("LABEL_SELECTOR")
        .env_remove("LEADER_ELECT")
        .env_remove("MAILTARGET_API_KEY_FILE")
        .env_remove("MAILTARGET_CA_BUNDLE")
        .env_remove("MAILTARGET_DEFAULT_ADOPTION_POLICY")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("the operator binary starts")
}

/// The real binary is killed with SIGKILL 5 times at random points while 12 resources converge
/// with 10% lost answers, then runs to the end: same result. Its trace-level logs, from every
/// run, never contain a key value or a DKIM private key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_the_binary_leaves_no_duplicates() {
    let mut config = Rig::sim_config();
    config.faults = FaultConfig {
        drop_response_rate: 0.1,
        seed: 5,
        ..FaultConfig::default()
    };
    let rig = Rig::new(config).await;
    let mix = Mix::of(12);
    mix.create(&rig.kube).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("operator.log");
    let mut rng = StdRng::seed_from_u64(3);
    for _ in 0..5 {
        let from = rig.sim.request_log().len();
        let mut child = spawn_binary(&rig, &log);
        let more = rng.random_range(2..10);
        after_requests(&rig.sim, from, more, Duration::from_secs(20)).await;
        child.start_kill().expect("SIGKILL");
        let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .expect("the killed operator exits")
            .expect("wait");
        assert!(!status.success(), "killed, not exited: {status}");
    }
    let mut child = spawn_binary(&rig, &log);
    wait_all_ready(&rig.kube, Duration::from_secs(60)).await;
    child.start_kill().expect("SIGKILL");
    let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    let state = rig.sim.snapshot();
    assert_exactly(&rig.kube, &state, &mix).await;

    let logs = std::fs::read_to_string(&log).expect("operator logs");
    assert!(
        logs.contains("TRACE") || logs.contains("DEBUG"),
        "trace logs were written"
    );
    for secret in crate::harness::secrets_of(&state) {
        assert!(
            !logs.contains(&secret),
            "a secret value appeared in the operator's logs"
        );
    }
}
