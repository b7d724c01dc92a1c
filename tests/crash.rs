//! A crash at every step boundary of a create leaves exactly one object: the operator is killed
//! at each fail point of `mailtarget_operator::failpoints` (a panic there ends the operator's
//! task, as SIGKILL ends the process), a new operator starts, and the service holds exactly the
//! declared object, with its id recorded and its secret in place.
//!
//! Fail points are process-wide, so these runs live in their own test binary, one after the
//! other. They need the `failpoints` feature (`cargo test --workspace --all-features`).

mod common;

#[path = "reliability/harness.rs"]
#[allow(dead_code)]
mod harness;

use std::time::Duration;

use common::{WAIT, eventually};
use harness::{Mix, Rig, assert_exactly, wait_all_ready};
use mailtarget_operator::failpoints;

/// One resource of one kind.
fn single(kind: &str) -> Mix {
    let mut mix = Mix::default();
    match kind {
        "SubAccount" => mix.sub_accounts.push("team-c".into()),
        "ApiKey" => mix.company_keys.push("app-c".into()),
        _ => mix
            .domains
            .push(("mail-c".into(), "crash.example.com".into())),
    }
    mix
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_every_step_of_a_create_leaves_exactly_one_object() {
    assert!(
        fail::has_failpoints(),
        "fail points are off: run the tests with --all-features (feature `failpoints`)"
    );
    for kind in ["SubAccount", "ApiKey", "SendingDomain"] {
        for point in failpoints::ALL {
            let mut rig = Rig::new(Rig::sim_config()).await;
            let mix = single(kind);
            fail::cfg(point, "panic").unwrap();
            rig.start_operator(Duration::from_secs(2));
            mix.create(&rig.kube).await;
            eventually(&format!("{kind}: the operator dies at {point}"), || {
                !rig.operator_alive()
            })
            .await;
            fail::remove(point);
            rig.crash_operator().await;
            rig.start_operator(Duration::from_secs(2));
            wait_all_ready(&rig.kube, WAIT).await;
            assert_exactly(&rig.kube, &rig.sim.snapshot(), &mix).await;
            let creates = rig
                .sim
                .request_log()
                .iter()
                .filter(|r| r.method == "POST" && !r.path.contains("verify"))
                .count();
            assert_eq!(creates, 1, "{kind}, crash at {point}: one create call");
            rig.stop_operator().await;
        }
    }
}
