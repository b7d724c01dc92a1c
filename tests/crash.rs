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

use common::{WAIT, eventually, wait_deleted};
use harness::{Mix, NS, Rig, assert_exactly, wait_all_ready};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use mailtarget_operator::crd::{ApiKey, ClusterAccount, SendingDomain};
use mailtarget_operator::failpoints;
use secrecy::ExposeSecret;

/// Fail points are process-wide: the tests of this binary run one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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
    let _serial = SERIAL.lock().await;
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

/// Starts deleting the resource `name` (the operator is down: its finalizer holds it) and
/// returns what [`wait_gone`] needs.
async fn start_deleting<K>(api: Api<K>, name: &str) -> (Api<K>, String, String)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let uid = api.get(name).await.expect("resource").uid().expect("uid");
    api.delete(name, &DeleteParams::default())
        .await
        .expect("delete");
    (api, name.to_string(), uid)
}

/// Creates ClusterAccount `tenant` whose key is the first key of a new sub account `tenant`
/// (found so by the account's check, in the key list), waits until the running operator finds
/// it Ready, then arms `point` (a reconcile waiting for the account would stop there before any
/// create) and creates ApiKey `app-c` through it.
async fn api_key_through_a_sub_accounts_key(rig: &Rig, point: &str) {
    let client = harness::operator_client(&rig.sim);
    let tenant = common::sub_account_with_key(&client, "tenant", "tenant-key").await;
    let key = tenant.api_keys[0].key.expose_secret().to_string();
    common::put_key_secret(&rig.kube, NS, "tenant-key", &key).await;
    let accounts: Api<ClusterAccount> = Api::all(rig.kube.clone());
    common::create(
        &accounts,
        &format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: ClusterAccount\nmetadata: {{name: tenant}}\nspec:\n  credentials: {{secretRef: {{name: tenant-key}}}}\n  apiUrl: {}\n  transmissionUrl: {}\n",
            rig.sim.base_url(),
            rig.sim.transmission_url()
        ),
    )
    .await;
    common::wait_for(&accounts, "tenant", "Ready", |a: &ClusterAccount| {
        a.status
            .as_ref()
            .is_some_and(|s| common::ready_is(a, &s.conditions, "True", None))
    })
    .await;
    fail::cfg(point, "panic").unwrap();
    common::create(
        &rig.api::<ApiKey>(),
        "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: app-c}\nspec:\n  accountRef: {name: tenant}\n  secretName: app-c-key\n",
    )
    .await;
}

/// A resource deleted while its create is unrecorded (the operator died after the POST, before
/// it recorded the id anywhere but in the pending marker) still deletes its object per its
/// deletionPolicy: the cleanup finds it by natural key, so nothing is orphaned at the service.
/// Also through an account whose key is a sub account's (`ApiKey in sub account`): the key was
/// created in that sub account, and the cleanup looks for it there (among the company's
/// objects, it is not found and stays).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_deleted_after_an_unrecorded_create_leaves_no_object() {
    let _serial = SERIAL.lock().await;
    assert!(
        fail::has_failpoints(),
        "fail points are off: run the tests with --all-features (feature `failpoints`)"
    );
    for case in ["ApiKey", "SendingDomain", "ApiKey in sub account"] {
        let kind = case.split(' ').next().unwrap();
        let mut rig = Rig::new(Rig::sim_config()).await;
        if case == kind {
            fail::cfg(failpoints::AFTER_CONVERGE, "panic").unwrap();
            rig.start_operator(Duration::from_secs(2));
            single(kind).create(&rig.kube).await;
        } else {
            rig.start_operator(Duration::from_secs(2));
            api_key_through_a_sub_accounts_key(&rig, failpoints::AFTER_CONVERGE).await;
        }
        eventually(
            &format!("{case}: the operator dies after its create"),
            || !rig.operator_alive(),
        )
        .await;
        fail::remove(failpoints::AFTER_CONVERGE);
        rig.crash_operator().await;
        let created = rig.sim.snapshot();
        assert_eq!(
            created
                .api_keys
                .iter()
                .filter(|k| k.name == "app-c")
                .count()
                + created
                    .sending_domains
                    .iter()
                    .filter(|d| d.domain == "crash.example.com")
                    .count(),
            1,
            "{case}: the create reached the service"
        );
        assert_eq!(
            created
                .api_keys
                .iter()
                .any(|k| k.name == "app-c" && k.sub_account_id != 0),
            case != kind,
            "{case}: created in the sub account of the key it was created with"
        );
        // Deleted while no operator runs: the next one sees the deletion first.
        let keys = Api::<ApiKey>::namespaced(rig.kube.clone(), NS);
        let domains = Api::<SendingDomain>::namespaced(rig.kube.clone(), NS);
        if kind == "ApiKey" {
            let (api, name, uid) = start_deleting(keys, "app-c").await;
            rig.start_operator(Duration::from_secs(2));
            wait_deleted(&api, &name, &uid).await;
        } else {
            let (api, name, uid) = start_deleting(domains, "mail-c").await;
            rig.start_operator(Duration::from_secs(2));
            wait_deleted(&api, &name, &uid).await;
        }
        let state = rig.sim.snapshot();
        assert!(
            !state.api_keys.iter().any(|k| k.name == "app-c")
                && !state
                    .sending_domains
                    .iter()
                    .any(|d| d.domain == "crash.example.com"),
            "{case}: the object created before the crash was left at the service"
        );
        rig.stop_operator().await;
    }
}
