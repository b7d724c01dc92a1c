//! Stalled resources and authentication outages: per-object state belongs to one object (its
//! UID) and is forgotten on delete, a 401 is re-checked at the next resync instead of freezing
//! the resource, and the reconcile metric names the root cause of a failure.

use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use mailtarget_operator::crd::ApiKey;

use crate::common::{WAIT, eventually, wait_deleted};
use crate::harness::{Rig, ready_now, stalled_reason};

/// An ApiKey whose create the service rejects (400: permission 99 does not exist).
const REJECTED_KEY: &str = r#"
apiVersion: mailtarget.co/v1alpha1
kind: ApiKey
metadata: {name: rejected}
spec:
  name: rejected
  permissionIds: [1, 99]
  secretName: rejected-key
"#;

const GOOD_KEY: &str = r#"
apiVersion: mailtarget.co/v1alpha1
kind: ApiKey
metadata: {name: good}
spec:
  name: good
  secretName: good-key
"#;

/// Waits (bounded by [`WAIT`]) until the ApiKey `name` with UID `uid` (any UID when `None`)
/// satisfies `check`, and returns it.
async fn wait_key(
    keys: &Api<ApiKey>,
    name: &str,
    uid: Option<&str>,
    what: &str,
    check: impl Fn(&ApiKey) -> bool,
) -> ApiKey {
    let cond = move |k: Option<&ApiKey>| {
        k.is_some_and(|k| uid.is_none_or(|u| k.uid().as_deref() == Some(u)) && check(k))
    };
    let fut = kube::runtime::wait::await_condition(keys.clone(), name, cond);
    tokio::time::timeout(WAIT, fut)
        .await
        .unwrap_or_else(|_| panic!("{name}: not {what} within {WAIT:?}"))
        .unwrap()
        .expect("the object exists")
}

fn parse(yaml: &str) -> ApiKey {
    serde_yaml::from_str(yaml).unwrap()
}

/// A resource that stalled (the service rejected its create), deleted and applied again under
/// the same name, is a new object: it gets a status and its own API call at once, not only
/// after a spec change or an operator restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_resource_deleted_and_applied_again_is_reconciled() {
    let mut rig = Rig::new(Rig::sim_config()).await;
    rig.start_operator(Duration::from_secs(300));
    let keys: Api<ApiKey> = rig.api();
    keys.create(&PostParams::default(), &parse(REJECTED_KEY))
        .await
        .unwrap();
    let stalled = wait_key(&keys, "rejected", None, "Stalled", |k| {
        stalled_reason(k).as_deref() == Some("ApiRejected")
    })
    .await;
    assert_eq!(rig.posts(), 1);
    // The refused create created nothing: no pending-create marker is left behind (a later key
    // with that name must not be taken for this resource's own).
    wait_key(&keys, "rejected", None, "without a pending create", |k| {
        !k.annotations().contains_key("mailtarget.co/create-pending")
    })
    .await;
    let uid = stalled.uid().unwrap();
    keys.delete("rejected", &DeleteParams::default())
        .await
        .unwrap();
    wait_deleted(&keys, "rejected", &uid).await;

    let second = keys
        .create(&PostParams::default(), &parse(REJECTED_KEY))
        .await
        .unwrap();
    let second_uid = second.uid().unwrap();
    wait_key(&keys, "rejected", Some(&second_uid), "Stalled", |k| {
        stalled_reason(k).as_deref() == Some("ApiRejected")
    })
    .await;
    assert_eq!(rig.posts(), 2, "the new object made its own create call");
    rig.stop_operator().await;
}

/// The service answers 401 for a while: the resource shows `Stalled/Unauthorized`, the
/// reconcile metric counts `unauthorized` (not `success`, nor the `finalizer` wrapper), and once
/// the service accepts the key again the resource is Ready at its next resync, without a
/// restart or a spec change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_auth_outage_recovers_at_the_next_resync() {
    let mut rig = Rig::new(Rig::sim_config()).await;
    rig.start_operator(Duration::from_secs(2));
    let keys: Api<ApiKey> = rig.api();
    keys.create(&PostParams::default(), &parse(GOOD_KEY))
        .await
        .unwrap();
    wait_key(&keys, "good", None, "Ready", ready_now).await;

    rig.sim.faults().fail_next(1_000, 401);
    wait_key(&keys, "good", None, "Stalled/Unauthorized", |k| {
        stalled_reason(k).as_deref() == Some("Unauthorized")
    })
    .await;
    // The metric is recorded when the reconcile returns, just after its status write.
    let metrics = rig.metrics.clone();
    eventually("a reconcile ended by a 401 counted as unauthorized", || {
        metrics
            .encode()
            .contains(r#"mailtarget_reconciles_total{kind="ApiKey",result="unauthorized"}"#)
    })
    .await;
    assert!(
        !rig.metrics
            .encode()
            .contains(r#"mailtarget_reconciles_total{kind="ApiKey",result="finalizer"}"#),
        "never counted under the finalizer wrapper"
    );

    rig.sim.faults().clear();
    wait_key(&keys, "good", None, "Ready again", ready_now).await;
    assert_eq!(rig.posts(), 1, "recovery created nothing");
    rig.stop_operator().await;
}

/// The service refuses a delete (400): the deleting resource shows `Stalled/ApiRejected` for its
/// current generation, the metric names the cause, and the finalizer stays; the delete is not
/// tried again (its own status write would otherwise start a reconcile whose DELETE succeeds,
/// and the key would be gone below); setting `deletionPolicy: Orphan` then lets the deletion
/// finish, leaving the key at the service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_delete_stalls_the_deletion() {
    let mut rig = Rig::new(Rig::sim_config()).await;
    rig.start_operator(Duration::from_secs(300));
    let keys: Api<ApiKey> = rig.api();
    keys.create(&PostParams::default(), &parse(GOOD_KEY))
        .await
        .unwrap();
    let k = wait_key(&keys, "good", None, "Ready", ready_now).await;
    rig.sim.faults().fail_next(1, 400);
    keys.delete("good", &DeleteParams::default()).await.unwrap();
    let stalled = wait_key(&keys, "good", None, "Stalled while deleting", |k| {
        k.metadata.deletion_timestamp.is_some()
            && stalled_reason(k).as_deref() == Some("ApiRejected")
    })
    .await;
    let message = stalled
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Stalled")
        .unwrap()
        .message;
    assert!(
        message.contains("deletionPolicy"),
        "says what to do: {message}"
    );
    let metrics = rig.metrics.clone();
    eventually("the refused delete counted by its cause", || {
        metrics
            .encode()
            .contains(r#"mailtarget_reconciles_total{kind="ApiKey",result="bad_request"}"#)
    })
    .await;
    let deletes = rig
        .sim
        .request_log()
        .iter()
        .filter(|r| r.method == "DELETE")
        .count();
    assert_eq!(deletes, 1, "the refused delete is not tried again");
    assert_eq!(
        rig.sim.snapshot().api_keys.len(),
        1,
        "the key is still there"
    );

    keys.patch(
        "good",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({"spec": {"deletionPolicy": "Orphan"}})),
    )
    .await
    .unwrap();
    wait_deleted(&keys, "good", &k.uid().unwrap()).await;
    assert_eq!(
        rig.sim.snapshot().api_keys.len(),
        1,
        "the key stays (Orphan)"
    );
    rig.stop_operator().await;
}
