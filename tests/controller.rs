//! The controllers against the test API server and the simulator: each test runs its own
//! environment and asserts on Kubernetes objects and on the simulator's state and request log.

mod common;

use std::time::Duration;

use common::{
    Env, Options, create, eventually, ready_is, wait_deleted, wait_for, wait_secret_holds,
};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use mailtarget_operator::api::{CreateApiKey, CreateSubAccount, UpdateApiKey};
use mailtarget_operator::crd::{ApiKey, SendingDomain, SubAccount};
use serde_json::json;

fn key_ready(k: &ApiKey) -> bool {
    k.status
        .as_ref()
        .is_some_and(|s| ready_is(k, &s.conditions, "True", None))
}

fn secret_value(s: &Secret, key: &str) -> Option<String> {
    s.data
        .as_ref()?
        .get(key)
        .map(|v| String::from_utf8_lossy(&v.0).into_owned())
}

const CI_KEY: &str = r#"
apiVersion: mailtarget.co/v1alpha1
kind: ApiKey
metadata: {name: ci}
spec:
  name: ci
  permissionIds: [1, 2]
  allowedIps: ["198.51.100.7"]
  secretName: ci-key
"#;

/// A new ApiKey is created once, becomes Ready, and its value lands in its Secret only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_created_ready_with_secret() {
    let env = Env::start().await;
    let keys: Api<ApiKey> = env.api();
    create(&keys, CI_KEY).await;
    let k = wait_for(&keys, "ci", "Ready", key_ready).await;
    let status = k.status.unwrap();
    let state = env.sim.snapshot();
    assert_eq!(state.api_keys.len(), 1, "exactly one key created");
    let sim_key = &state.api_keys[0];
    assert_eq!(status.id, Some(sim_key.id));
    assert_eq!(status.allowed_ips, vec!["198.51.100.7".to_string()]);
    assert_eq!(
        status.permissions.iter().map(|p| p.id).collect::<Vec<_>>(),
        vec![1, 2]
    );
    let secrets: Api<Secret> = env.api();
    let secret = secrets.get("ci-key").await.unwrap();
    assert_eq!(
        secret_value(&secret, "apiKey").as_deref(),
        Some(sim_key.key.as_str())
    );
    assert_eq!(secret.owner_references()[0].uid, k.metadata.uid.unwrap());
    let status_json = serde_json::to_string(&status).unwrap();
    assert!(
        !status_json.contains(&sim_key.key),
        "the key value leaked into status"
    );
    // No plain digest of the value is published beside it (anyone who may read the Secret's
    // metadata could test guesses against it).
    let plain: String = ring::digest::digest(&ring::digest::SHA256, sim_key.key.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert!(
        !secret.annotations().values().any(|v| v.contains(&plain)),
        "a plain SHA-256 of the key value is published on the Secret"
    );
    env.stop().await;
}

/// Removing `allowedIps` from a key whose spec sets no permissions lifts the restriction at
/// the service ("empty means any address"), as it does beside permissions: the detail-only
/// field is compared whatever else the spec sets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_allowed_ips_lifts_the_restriction() {
    let env = Env::start().await;
    let keys: Api<ApiKey> = env.api();
    create(&keys, &CI_KEY.replace("  permissionIds: [1, 2]\n", "")).await;
    wait_for(&keys, "ci", "Ready", key_ready).await;
    assert_eq!(env.sim.snapshot().api_keys[0].allowed_ip, "198.51.100.7");
    keys.patch(
        "ci",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"allowedIps": null}})),
    )
    .await
    .unwrap();
    wait_for(&keys, "ci", "Ready at generation 2", |k| {
        k.metadata.generation == Some(2) && key_ready(k)
    })
    .await;
    assert_eq!(env.sim.snapshot().api_keys[0].allowed_ip, "");
    env.stop().await;
}

/// A spec change becomes exactly one PUT carrying the change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spec_update_is_exactly_one_put() {
    let env = Env::start_with(Options {
        resync: Duration::from_secs(300),
        ..Default::default()
    })
    .await;
    let keys: Api<ApiKey> = env.api();
    create(&keys, CI_KEY).await;
    let k = wait_for(&keys, "ci", "Ready", key_ready).await;
    let id = k.status.unwrap().id.unwrap();
    env.sim.clear_request_log();
    keys.patch(
        "ci",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"permissionIds": [1, 3]}})),
    )
    .await
    .unwrap();
    wait_for(&keys, "ci", "Ready at generation 2", |k| {
        k.metadata.generation == Some(2) && key_ready(k)
    })
    .await;
    // The change is planned against the permissions status recorded: no GET of the detail
    // (and no list read, the cached list being fresh) before the PUT.
    let calls: Vec<(String, String)> = env
        .sim
        .request_log()
        .into_iter()
        .map(|r| (r.method, r.path))
        .collect();
    assert_eq!(calls, vec![("PUT".to_string(), format!("/api-key/{id}"))]);
    assert_eq!(env.sim.snapshot().api_keys[0].permission_ids, vec![1, 3]);
    env.stop().await;
}

fn requests_to(env: &Env, method: &str, path: &str) -> usize {
    env.sim
        .request_log()
        .iter()
        .filter(|r| r.method == method && r.path == path)
        .count()
}

/// A resync with nothing changed reads each list once (one page per kind here), never the
/// detail of an object, writes nothing to the service and sends no request to Kubernetes, also
/// after an operator restart; the fields only the detail carries (a key's permissions and
/// allowed IPs) wait for the detail resync interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_resync_reads_only_list_pages() {
    let mut env = Env::start_with(Options {
        resync: Duration::from_secs(1),
        detail_resync: Some(Duration::from_secs(3600)),
        ..Default::default()
    })
    .await;
    let keys: Api<ApiKey> = env.api();
    let subs: Api<SubAccount> = env.api();
    let domains: Api<SendingDomain> = env.api();
    create(&keys, CI_KEY).await;
    create(&subs, "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: team-a}\nspec: {ipPoolId: 1}\n").await;
    create(&domains, "apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata: {name: mail}\nspec: {domain: mail.example.com, dkimPrivateKeySecretName: mail-dkim}\n").await;
    wait_for(&keys, "ci", "Ready", key_ready).await;
    wait_for(&subs, "team-a", "Ready", |s: &SubAccount| {
        s.status
            .as_ref()
            .is_some_and(|st| ready_is(s, &st.conditions, "True", None))
    })
    .await;
    wait_for(&domains, "mail", "Ready", |d: &SendingDomain| {
        d.status
            .as_ref()
            .is_some_and(|st| ready_is(d, &st.conditions, "True", None))
    })
    .await;

    assert_idle_resync(&env, "after creating").await;
    // The same after a restart: the new process resyncs from its cache, reading no object from
    // Kubernetes (and details only when due).
    env.restart_operator().await;
    assert_idle_resync(&env, "after a restart").await;
    env.stop().await;
}

/// Asserts that two resyncs in a row, once the operator is resyncing, make no API call other
/// than list pages and no Kubernetes request.
async fn assert_idle_resync(env: &Env, when: &str) {
    const LISTS: [&str; 3] = ["/api-key", "/sub-account", "/domain/sending"];
    let lists_read = |n: usize| move || LISTS.iter().all(|p| requests_to(env, "GET", p) >= n);
    // Start counting once every list was read again (the resyncs have begun, and whatever the
    // last status writes set off is over), then let two more reads of every list pass: every
    // object resyncs in between.
    env.sim.clear_request_log();
    eventually("a resync of every kind", lists_read(1)).await;
    env.sim.clear_request_log();
    let kube_mark = env.server.request_log().len();
    eventually("two resyncs of every kind", lists_read(2)).await;
    let kube_requests: Vec<String> = env.server.request_log()[kube_mark..]
        .iter()
        .map(|r| format!("{} {}", r.method, r.path_and_query))
        .collect();
    let api_calls: Vec<String> = env
        .sim
        .request_log()
        .iter()
        .filter(|r| !(r.method == "GET" && LISTS.contains(&r.path.as_str())))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(
        api_calls.is_empty(),
        "{when}: only list pages are read: {api_calls:?}"
    );
    assert!(
        kube_requests.is_empty(),
        "{when}: no Kubernetes request: {kube_requests:?}"
    );
}

/// With the detail resync interval equal to the resync interval, a permission change made at
/// the service is corrected at the next resync with one GET of the detail and one PUT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detail_resync_corrects_permission_drift() {
    let env = Env::start_with(Options {
        resync: Duration::from_secs(1),
        ..Default::default()
    })
    .await;
    let keys: Api<ApiKey> = env.api();
    create(&keys, CI_KEY).await;
    let id = wait_for(&keys, "ci", "Ready", key_ready)
        .await
        .status
        .unwrap()
        .id
        .unwrap();
    env.sim.clear_request_log();
    env.api
        .update_api_key(
            id,
            &UpdateApiKey {
                permission_ids: Some(vec![3]),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    eventually("the permissions are corrected", || {
        env.sim.snapshot().api_keys[0].permission_ids == vec![1, 2]
    })
    .await;
    assert!(requests_to(&env, "GET", &format!("/api-key/{id}")) >= 1);
    // The test's own PUT, then the operator's one correction.
    assert_eq!(env.writes().len(), 2, "{:?}", env.writes());
    env.stop().await;
}

/// Deleting an ApiKey deletes the API key, then the finalizer goes and the object is gone;
/// with `deletionPolicy: Orphan` the API key stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_and_orphan() {
    let env = Env::start().await;
    let keys: Api<ApiKey> = env.api();
    create(&keys, CI_KEY).await;
    create(
        &keys,
        &CI_KEY.replace("name: ci", "name: kept").replace(
            "secretName: ci-key",
            "secretName: kept-key\n  deletionPolicy: Orphan",
        ),
    )
    .await;
    let ci = wait_for(&keys, "ci", "Ready", key_ready).await;
    let kept = wait_for(&keys, "kept", "Ready", key_ready).await;
    assert!(
        ci.finalizers()
            .contains(&"mailtarget.co/finalizer".to_string())
    );
    for k in [&ci, &kept] {
        keys.delete(&k.name_any(), &DeleteParams::default())
            .await
            .unwrap();
        wait_deleted(&keys, &k.name_any(), k.metadata.uid.as_deref().unwrap()).await;
    }
    let ids: Vec<i64> = env.sim.snapshot().api_keys.iter().map(|k| k.id).collect();
    assert_eq!(
        ids,
        vec![kept.status.unwrap().id.unwrap()],
        "the orphaned key stays, the other is deleted"
    );
    env.stop().await;
}

/// A SubAccount is created with its first key (value in its Secret); deleting it with
/// `deletionPolicy: Deactivate` sets the sub account's status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sub_account_first_key_and_deactivate() {
    let env = Env::start().await;
    let subs: Api<SubAccount> = env.api();
    create(&subs, "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: team-a}\nspec:\n  deletionPolicy: Deactivate\n  apiKey: {name: sender, secretName: team-a-key}\n").await;
    let sa = wait_for(&subs, "team-a", "Ready", |s: &SubAccount| {
        s.status
            .as_ref()
            .is_some_and(|st| ready_is(s, &st.conditions, "True", None))
    })
    .await;
    let state = env.sim.snapshot();
    assert_eq!(state.sub_accounts.len(), 1);
    assert_eq!(sa.status.as_ref().unwrap().api_keys.len(), 1);
    let secret = Api::<Secret>::namespaced(env.kube.clone(), "default")
        .get("team-a-key")
        .await
        .unwrap();
    assert_eq!(
        secret_value(&secret, "apiKey").as_deref(),
        Some(state.api_keys[0].key.as_str())
    );
    subs.delete("team-a", &DeleteParams::default())
        .await
        .unwrap();
    wait_deleted(&subs, "team-a", sa.metadata.uid.as_deref().unwrap()).await;
    assert_eq!(env.sim.snapshot().sub_accounts[0].status, "inactive");
    env.stop().await;
}

/// Deleting a SubAccount whose sub account already has the status its `Deactivate` policy
/// sets sends nothing: the finalizer goes without a write, as `destroy` skips it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_an_already_deactivated_sub_account_writes_nothing() {
    let env = Env::start().await;
    let subs: Api<SubAccount> = env.api();
    create(&subs, "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: team-a}\nspec: {deletionPolicy: Deactivate, status: inactive}\n").await;
    let sa = wait_for(&subs, "team-a", "Ready", |s: &SubAccount| {
        s.status
            .as_ref()
            .is_some_and(|st| ready_is(s, &st.conditions, "True", None))
    })
    .await;
    assert_eq!(env.sim.snapshot().sub_accounts[0].status, "inactive");
    env.sim.clear_request_log();
    subs.delete("team-a", &DeleteParams::default())
        .await
        .unwrap();
    wait_deleted(&subs, "team-a", sa.metadata.uid.as_deref().unwrap()).await;
    assert_eq!(
        env.writes(),
        Vec::new(),
        "the sub account was written again"
    );
    assert_eq!(env.sim.snapshot().sub_accounts[0].status, "inactive");
    env.stop().await;
}

/// The skip above trusts only a list read after the deletion began: a sub account reactivated
/// at the service after the cached list was read is deactivated by the finalizer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_list_does_not_skip_the_deactivation() {
    let env = Env::start_with(Options {
        resync: Duration::from_secs(300),
        ..Default::default()
    })
    .await;
    let subs: Api<SubAccount> = env.api();
    create(&subs, "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: team-a}\nspec: {deletionPolicy: Deactivate, status: inactive}\n").await;
    let sa = wait_for(&subs, "team-a", "Ready", |s: &SubAccount| {
        s.status
            .as_ref()
            .is_some_and(|st| ready_is(s, &st.conditions, "True", None))
    })
    .await;
    let id = env.sim.snapshot().sub_accounts[0].id;
    let active = mailtarget_operator::api::UpdateSubAccount {
        status: Some("active".into()),
        ..Default::default()
    };
    env.api.update_sub_account(id, &active).await.unwrap();
    subs.delete("team-a", &DeleteParams::default())
        .await
        .unwrap();
    wait_deleted(&subs, "team-a", sa.metadata.uid.as_deref().unwrap()).await;
    assert_eq!(env.sim.snapshot().sub_accounts[0].status, "inactive");
    env.stop().await;
}

/// Existing API objects are adopted by name and by the external-id annotation under an adoption
/// policy, never duplicated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adoption_by_name_and_annotation() {
    let env = Env::start().await;
    let by_name = env
        .api
        .create_api_key(&CreateApiKey {
            name: Some("ci".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let by_id = env
        .api
        .create_api_key(&CreateApiKey {
            name: Some("legacy".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    env.sim.clear_request_log();
    let keys: Api<ApiKey> = env.api();
    create(&keys, "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: ci\n  annotations: {mailtarget.co/adoption-policy: Adopt}\nspec: {secretName: ci-key}\n").await;
    create(&keys, &format!("apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: renamed\n  annotations: {{mailtarget.co/external-id: \"{}\", mailtarget.co/adoption-policy: AdoptOrCreate}}\nspec: {{name: legacy, secretName: legacy-key}}\n", by_id.id)).await;
    let a = wait_for(&keys, "ci", "Ready", key_ready).await;
    let b = wait_for(&keys, "renamed", "Ready", key_ready).await;
    assert_eq!(a.status.unwrap().id, Some(by_name.id));
    assert_eq!(b.status.unwrap().id, Some(by_id.id));
    assert_eq!(env.sim.snapshot().api_keys.len(), 2, "no key was created");
    let posts: Vec<_> = env
        .writes()
        .into_iter()
        .filter(|w| w.method == "POST")
        .collect();
    assert!(posts.is_empty(), "adoption created keys: {posts:?}");
    env.stop().await;
}

/// A key first observed (`ObserveOnly`, its drift reported), then managed (`Full`: refused,
/// `AlreadyExists`), then adopted (the annotation added, which changes no generation) is
/// brought to its spec by the reconcile that adopts it, before `Ready` says it is in sync: the
/// fields only the detail returns are read for an object the status does not yet describe as
/// its own, not left to the next detail resync (an hour away here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adopted_key_is_in_sync_when_ready_says_so() {
    let env = Env::start_with(Options {
        resync: Duration::from_secs(300),
        ..Default::default()
    })
    .await;
    let existing = env
        .api
        .create_api_key(&CreateApiKey {
            name: Some("manual".into()),
            permission_ids: Some(vec![1]),
            ..Default::default()
        })
        .await
        .unwrap();
    let keys: Api<ApiKey> = env.api();
    create(&keys, "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: manual}\nspec: {permissionIds: [1, 2], secretName: manual-key, managementPolicy: ObserveOnly}\n").await;
    let drift = |k: &ApiKey| {
        (k.status.as_ref())
            .is_some_and(|s| ready_is(k, &s.conditions, "False", Some("DriftDetected")))
    };
    wait_for(&keys, "manual", "DriftDetected", drift).await;
    let full = json!({"spec": {"managementPolicy": "Full"}});
    let patch = PatchParams::default();
    keys.patch("manual", &patch, &Patch::Merge(&full))
        .await
        .unwrap();
    wait_for(
        &keys,
        "manual",
        "AlreadyExists",
        stalled_because("AlreadyExists"),
    )
    .await;
    let adopt = json!({"metadata": {"annotations": {"mailtarget.co/adoption-policy": "Adopt"}}});
    keys.patch("manual", &patch, &Patch::Merge(&adopt))
        .await
        .unwrap();
    let adopted = wait_for(&keys, "manual", "Ready", key_ready).await;
    assert_eq!(adopted.status.unwrap().id, Some(existing.id));
    let state = env.sim.snapshot();
    let key = state.api_keys.iter().find(|k| k.id == existing.id).unwrap();
    assert_eq!(key.permission_ids, [1, 2], "in sync when Ready says so");
    env.stop().await;
}

/// A deleted Secret, and an altered one, are written again at once, not at the next resync
/// (five minutes away here), with a `SecretRestored` Event; a Secret under a new `secretName`
/// is written without one (nothing was restored).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_deleted_or_altered_is_restored() {
    let env = Env::start_with(Options {
        resync: Duration::from_secs(300),
        ..Default::default()
    })
    .await;
    let keys: Api<ApiKey> = env.api();
    create(&keys, CI_KEY).await;
    wait_for(&keys, "ci", "Ready", key_ready).await;
    let value = env.sim.snapshot().api_keys[0].key.clone();
    let secrets: Api<Secret> = env.api();
    let old = secrets.get("ci-key").await.unwrap();
    secrets
        .delete("ci-key", &DeleteParams::default())
        .await
        .unwrap();
    let restored = wait_secret_holds(&secrets, "ci-key", "apiKey", &value, "restored").await;
    assert_ne!(
        restored.metadata.uid, old.metadata.uid,
        "a new Secret was created"
    );
    secrets
        .patch(
            "ci-key",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"apiKey": "dGFtcGVyZWQ="}})),
        )
        .await
        .unwrap();
    wait_secret_holds(
        &secrets,
        "ci-key",
        "apiKey",
        &value,
        "restored after tampering",
    )
    .await;
    // Both restores are one series of two (the recorder folds Events of one reason).
    let events: Api<k8s_openapi::api::events::v1::Event> = env.api();
    let restores = |e: &k8s_openapi::api::events::v1::Event| {
        (e.reason.as_deref() == Some("SecretRestored"))
            .then(|| e.series.as_ref().map_or(1, |s| s.count))
    };
    common::wait_event(&events, "two SecretRestored", |e| restores(e) == Some(2)).await;

    // A Secret written under a new secretName is a first write, not a restore: no Event says
    // it was written again. Events are published before the status that ends the reconcile.
    let moved = json!({"spec": {"secretName": "ci-key-2"}});
    let patched = keys
        .patch("ci", &PatchParams::default(), &Patch::Merge(&moved))
        .await
        .unwrap();
    let generation = patched.metadata.generation;
    wait_for(&keys, "ci", "the move reconciled", move |k: &ApiKey| {
        key_ready(k) && k.status.as_ref().unwrap().observed_generation == generation
    })
    .await;
    wait_secret_holds(&secrets, "ci-key-2", "apiKey", &value, "written").await;
    let listed = events.list(&Default::default()).await.unwrap().items;
    let counts: Vec<i32> = listed.iter().filter_map(restores).collect();
    assert_eq!(counts, [2], "no third restore: {listed:?}");
    env.stop().await;
}

/// A change made at the API (a rename) is corrected by the periodic resync; an API object
/// deleted out of band is created again, with a `Recreated` Warning naming both objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_drift_is_corrected_by_resync() {
    let env = Env::start_with(Options {
        resync: Duration::from_secs(1),
        ..Default::default()
    })
    .await;
    let keys: Api<ApiKey> = env.api();
    create(&keys, CI_KEY).await;
    let k = wait_for(&keys, "ci", "Ready", key_ready).await;
    let id = k.status.unwrap().id.unwrap();
    env.api
        .update_api_key(
            id,
            &UpdateApiKey {
                name: Some("renamed-by-hand".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let sim = &env.sim;
    eventually("the name is corrected", || {
        sim.snapshot()
            .api_keys
            .iter()
            .any(|k| k.id == id && k.name == "ci")
    })
    .await;
    env.api.delete_api_key(id).await.unwrap();
    eventually("the key is created again", || {
        sim.snapshot().api_keys.iter().any(|k| k.name == "ci")
    })
    .await;
    assert_eq!(sim.snapshot().api_keys.len(), 1, "exactly one key");
    let new_id = sim.snapshot().api_keys[0].id;
    wait_for(&keys, "ci", "pointing at the new key", move |k: &ApiKey| {
        k.status.as_ref().and_then(|s| s.id) == Some(new_id)
    })
    .await;
    // The recreation is told apart from the first create (a series of its own, whose note
    // names both keys), as a Warning: the key's value changed.
    let events: Api<k8s_openapi::api::events::v1::Event> = env.api();
    let recreated = common::wait_event(&events, "Recreated Warning", |e| {
        e.reason.as_deref() == Some("Recreated") && e.type_.as_deref() == Some("Warning")
    })
    .await;
    let note = recreated.note.unwrap_or_default();
    let both = [format!("API key {id} "), format!("API key {new_id} ")];
    assert!(both.iter().all(|k| note.contains(k.as_str())), "{note}");
    env.stop().await;
}

/// `managementPolicy: ObserveOnly` reports drift and missing objects but never writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_only_never_writes() {
    let env = Env::start().await;
    env.api
        .create_sub_account(&CreateSubAccount {
            name: Some("team-b".into()),
            status: Some("active".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    env.sim.clear_request_log();
    let subs: Api<SubAccount> = env.api();
    create(&subs, "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: team-b}\nspec: {status: suspended, managementPolicy: ObserveOnly}\n").await;
    create(&subs, "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: ghost}\nspec: {managementPolicy: ObserveOnly}\n").await;
    let b = wait_for(&subs, "team-b", "DriftDetected", |s: &SubAccount| {
        s.status
            .as_ref()
            .is_some_and(|st| ready_is(s, &st.conditions, "False", Some("DriftDetected")))
    })
    .await;
    assert!(
        b.status
            .as_ref()
            .unwrap()
            .conditions
            .iter()
            .any(|c| c.message.contains("spec.status"))
    );
    wait_for(&subs, "ghost", "reported missing", |s: &SubAccount| {
        s.status
            .as_ref()
            .is_some_and(|st| ready_is(s, &st.conditions, "False", Some("ExternalObjectMissing")))
    })
    .await;
    for name in ["team-b", "ghost"] {
        let obj = subs.get(name).await.unwrap();
        subs.delete(name, &DeleteParams::default()).await.unwrap();
        wait_deleted(&subs, name, obj.metadata.uid.as_deref().unwrap()).await;
    }
    assert!(
        env.writes().is_empty(),
        "ObserveOnly wrote: {:?}",
        env.writes()
    );
    assert_eq!(env.sim.snapshot().sub_accounts.len(), 1);
    assert_eq!(env.sim.snapshot().sub_accounts[0].status, "active");
    env.stop().await;
}

/// A key referencing a missing SubAccount waits with `ReferenceNotReady` and writes nothing;
/// once the SubAccount exists with that key, the key is adopted, started by the SubAccount's
/// change (the resync interval is far longer than the wait).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_to_missing_sub_account() {
    let env = Env::start_with(Options {
        resync: Duration::from_secs(600),
        ..Default::default()
    })
    .await;
    let keys: Api<ApiKey> = env.api();
    create(&keys, "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: sender}\nspec: {secretName: sender-key, subAccountRef: {name: team-c}}\n").await;
    wait_for(&keys, "sender", "ReferenceNotReady", |k: &ApiKey| {
        k.status
            .as_ref()
            .is_some_and(|s| ready_is(k, &s.conditions, "False", Some("ReferenceNotReady")))
    })
    .await;
    assert!(env.writes().is_empty());
    let subs: Api<SubAccount> = env.api();
    create(&subs, "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: team-c}\nspec:\n  apiKey: {name: sender, secretName: team-c-key}\n").await;
    let k = wait_for(&keys, "sender", "Ready", key_ready).await;
    let state = env.sim.snapshot();
    assert_eq!(
        state.api_keys.len(),
        1,
        "the sub account's first key is adopted, not duplicated"
    );
    assert_eq!(
        k.status.unwrap().sub_account_id,
        Some(state.sub_accounts[0].id)
    );
    env.stop().await;
}

/// A domain goes from pending to verified: DNS records in status, verify-txt called with
/// backoff until the flags are true, the DKIM private key in its Secret and nowhere else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn domain_pending_to_verified() {
    let env = Env::start_with(Options {
        verify_after_calls: 2,
        ..Default::default()
    })
    .await;
    let domains: Api<SendingDomain> = env.api();
    create(&domains, "apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata: {name: mail}\nspec: {domain: mail.example.com, dkimPrivateKeySecretName: mail-dkim}\n").await;
    let pending = wait_for(
        &domains,
        "mail",
        "pending with records",
        |d: &SendingDomain| {
            d.status.as_ref().is_some_and(|s| {
                s.dns_records.len() == 3
                    && ready_is(d, &s.conditions, "False", Some("VerifyingDns"))
            })
        },
    )
    .await;
    let message = &pending
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap()
        .message;
    assert!(message.contains("_domainkey.mail.example.com"), "{message}");
    let done = wait_for(&domains, "mail", "verified", |d: &SendingDomain| {
        d.status
            .as_ref()
            .is_some_and(|s| s.verified && ready_is(d, &s.conditions, "True", Some("Verified")))
    })
    .await;
    let status = done.status.unwrap();
    assert!(status.dns_records.iter().all(|r| r.verified));
    assert_eq!(status.status, vec!["verified".to_string()]);
    let verify_calls = env
        .sim
        .request_log()
        .iter()
        .filter(|r| r.path.ends_with("/verify-txt"))
        .count();
    assert_eq!(verify_calls, 2, "verify-txt only while unverified");
    // The SPF suggestion is read once, when a verify-txt call found the domain unverified
    // (not at creation), and cleared once it is verified.
    let calls: Vec<String> = env
        .sim
        .request_log()
        .iter()
        .map(|r| r.path.clone())
        .filter(|p| p.ends_with("/verify-txt") || p.ends_with("/spf-suggestion"))
        .collect();
    let suggestions: Vec<usize> = (0..calls.len())
        .filter(|i| calls[*i].ends_with("/spf-suggestion"))
        .collect();
    assert_eq!(suggestions.len(), 1, "{calls:?}");
    assert!(
        suggestions[0] >= 1,
        "read after the first verify-txt: {calls:?}"
    );
    assert_eq!(status.spf_suggestion, None, "cleared once verified");
    let secret = Api::<Secret>::namespaced(env.kube.clone(), "default")
        .get("mail-dkim")
        .await
        .unwrap();
    let pem = secret_value(&secret, "dkimPrivateKey").unwrap();
    assert!(pem.contains("PRIVATE KEY"));
    assert!(!serde_json::to_string(&status).unwrap().contains(&pem));
    // The missing Secret was read once (to find a foreign Secret of that name), then written.
    let secret_path = "/api/v1/namespaces/default/secrets/mail-dkim";
    let reads_before_write: Vec<String> = env
        .server
        .request_log()
        .iter()
        .filter(|r| r.path_and_query.starts_with(secret_path))
        .take_while(|r| r.method != "PATCH")
        .map(|r| format!("{} {} -> {}", r.method, r.path_and_query, r.status))
        .collect();
    assert_eq!(
        reads_before_write,
        vec![format!("GET {secret_path} -> 404")],
        "one read of the missing Secret before it is written"
    );
    env.stop().await;
}

/// `mailtarget.co/paused: "true"` stops reconciliation: nothing is written until it is removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_objects_are_left_alone() {
    let env = Env::start().await;
    let keys: Api<ApiKey> = env.api();
    create(
        &keys,
        &CI_KEY.replace(
            "metadata: {name: ci}",
            "metadata:\n  name: ci\n  annotations: {mailtarget.co/paused: \"true\"}",
        ),
    )
    .await;
    // A second, unpaused object proves the controller is running meanwhile.
    create(
        &keys,
        &CI_KEY
            .replace("name: ci", "name: other")
            .replace("secretName: ci-key", "secretName: other-key"),
    )
    .await;
    wait_for(&keys, "other", "Ready", key_ready).await;
    let paused = keys.get("ci").await.unwrap();
    assert!(
        paused.status.is_none() && paused.finalizers().is_empty(),
        "{paused:?}"
    );
    assert_eq!(env.sim.snapshot().api_keys.len(), 1);
    keys.patch(
        "ci",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"mailtarget.co/paused": null}}})),
    )
    .await
    .unwrap();
    wait_for(&keys, "ci", "Ready after unpausing", key_ready).await;
    assert_eq!(env.sim.snapshot().api_keys.len(), 2);
    env.stop().await;
}

/// A `mailtarget.co/paused` value other than "true" or "false" ("yes", "1") is an error, never a
/// silent "not paused": the resource is `Stalled/InvalidSpec` and nothing is written at the
/// service, also while it is being deleted (its finalizer stays); fixing the value resumes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_value_that_is_not_a_boolean_writes_nothing() {
    let env = Env::start().await;
    let keys: Api<ApiKey> = env.api();
    let invalid = |k: &ApiKey| {
        k.status.as_ref().is_some_and(|s| {
            s.conditions.iter().any(|c| {
                c.type_ == "Stalled"
                    && c.reason == "InvalidSpec"
                    && c.message.contains("mailtarget.co/paused")
            })
        })
    };
    create(
        &keys,
        &CI_KEY.replace(
            "metadata: {name: ci}",
            "metadata:\n  name: ci\n  annotations: {mailtarget.co/paused: \"yes\"}",
        ),
    )
    .await;
    wait_for(&keys, "ci", "Stalled/InvalidSpec", invalid).await;
    assert!(env.sim.snapshot().api_keys.is_empty());
    // With nothing at the service to delete, nothing holds its deletion.
    create(
        &keys,
        &CI_KEY
            .replace(
                "metadata: {name: ci}",
                "metadata:\n  name: never\n  annotations: {mailtarget.co/paused: \"yes\"}",
            )
            .replace("secretName: ci-key", "secretName: never-key")
            .replace("  name: ci\n", "  name: never\n"),
    )
    .await;
    let never = wait_for(&keys, "never", "Stalled/InvalidSpec", invalid).await;
    keys.delete("never", &Default::default()).await.unwrap();
    wait_deleted(&keys, "never", never.metadata.uid.as_deref().unwrap()).await;
    let set_paused = |value: serde_json::Value| {
        let keys = keys.clone();
        async move {
            let patch = json!({"metadata": {"annotations": {"mailtarget.co/paused": value}}});
            keys.patch("ci", &PatchParams::default(), &Patch::Merge(patch))
                .await
                .unwrap()
        }
    };
    set_paused(serde_json::Value::Null).await;
    let ready = wait_for(&keys, "ci", "Ready after the fix", key_ready).await;
    assert_eq!(env.sim.snapshot().api_keys.len(), 1);

    set_paused(json!("1")).await;
    keys.delete("ci", &Default::default()).await.unwrap();
    wait_for(&keys, "ci", "a stalled deletion", move |k: &ApiKey| {
        let deletion_refused = (k.status.as_ref())
            .is_some_and(|s| (s.conditions.iter()).any(|c| c.message.contains("is not deleted")));
        k.metadata.deletion_timestamp.is_some() && invalid(k) && deletion_refused
    })
    .await;
    assert_eq!(env.sim.snapshot().api_keys.len(), 1, "not deleted");
    set_paused(serde_json::Value::Null).await;
    wait_deleted(&keys, "ci", ready.metadata.uid.as_deref().unwrap()).await;
    assert!(env.sim.snapshot().api_keys.is_empty());
    env.stop().await;
}

/// Renaming a sub account into a name another sub account holds (names are unique at the
/// service, compared without case) is refused before any write: `Stalled/AlreadyExists` naming
/// the holder, no PUT; a free name is then taken with one PUT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rename_into_a_taken_name_writes_nothing() {
    let env = Env::start().await;
    let held = env
        .api
        .create_sub_account(&CreateSubAccount {
            name: Some("beta".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let subs: Api<SubAccount> = env.api();
    create(&subs, "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: team-a}\nspec: {name: alpha}\n").await;
    let sub_ready = |s: &SubAccount| {
        s.status
            .as_ref()
            .is_some_and(|st| ready_is(s, &st.conditions, "True", None))
    };
    wait_for(&subs, "team-a", "Ready", sub_ready).await;
    env.sim.clear_request_log();
    let rename = |name: &'static str| {
        let subs = subs.clone();
        async move {
            let patch = json!({"spec": {"name": name}});
            subs.patch("team-a", &PatchParams::default(), &Patch::Merge(patch))
                .await
                .unwrap()
        }
    };
    rename("Beta").await;
    let taken = wait_for(
        &subs,
        "team-a",
        "Stalled/AlreadyExists",
        |s: &SubAccount| {
            s.status
                .as_ref()
                .is_some_and(|st| ready_is(s, &st.conditions, "False", Some("AlreadyExists")))
        },
    )
    .await;
    let message = &taken.status.unwrap().conditions[0].message;
    assert!(message.contains(&held.id.to_string()), "{message}");
    assert!(
        common::service_writes(&env.sim).is_empty(),
        "{:?}",
        common::service_writes(&env.sim)
    );
    rename("gamma").await;
    wait_for(&subs, "team-a", "Ready after a free name", sub_ready).await;
    let names: Vec<String> = (env.sim.snapshot().sub_accounts.iter())
        .map(|s| s.name.clone())
        .collect();
    assert!(names.contains(&"gamma".to_string()), "{names:?}");
    env.stop().await;
}

/// A 400 from the API (an unknown permission id) sets `Stalled=True` with the API's message and
/// a Warning event, and is not retried until the spec changes; fixing the spec recovers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_rejection_stalls_until_the_spec_changes() {
    let env = Env::start().await;
    let keys: Api<ApiKey> = env.api();
    create(&keys, &CI_KEY.replace("[1, 2]", "[1, 99]")).await;
    let k = wait_for(&keys, "ci", "Stalled", |k: &ApiKey| {
        k.status.as_ref().is_some_and(|s| {
            s.conditions.iter().any(|c| {
                c.type_ == "Stalled"
                    && c.status == "True"
                    && c.observed_generation == k.metadata.generation
            })
        })
    })
    .await;
    let stalled = k
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Stalled")
        .unwrap();
    assert_eq!(stalled.reason, "ApiRejected");
    assert!(
        stalled.message.contains("99"),
        "the API's message is shown: {}",
        stalled.message
    );
    let posts = || {
        env.sim
            .request_log()
            .iter()
            .filter(|r| r.method == "POST")
            .count()
    };
    assert_eq!(posts(), 1, "a rejected create is not retried");
    // The Warning follows the status that holds the stall.
    let events: Api<k8s_openapi::api::events::v1::Event> = env.api();
    common::wait_event(&events, "ApiRejected Warning", |e| {
        e.reason.as_deref() == Some("ApiRejected") && e.type_.as_deref() == Some("Warning")
    })
    .await;
    keys.patch(
        "ci",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"permissionIds": [1, 2]}})),
    )
    .await
    .unwrap();
    wait_for(&keys, "ci", "Ready after the fix", key_ready).await;
    assert_eq!(posts(), 2);
    // A Created event is published.
    common::wait_event(&events, "Created", |e| {
        e.reason.as_deref() == Some("Created")
    })
    .await;
    env.stop().await;
}

fn stalled_because(reason: &'static str) -> impl Fn(&ApiKey) -> bool {
    move |k: &ApiKey| {
        k.status.as_ref().is_some_and(|s| {
            s.conditions.iter().any(|c| {
                c.type_ == "Stalled"
                    && c.status == "True"
                    && c.reason == reason
                    && c.observed_generation == k.metadata.generation
            })
        })
    }
}

/// Two ApiKeys naming the same key: the second is `Stalled`/`ConflictingOwner` and makes no
/// call; once the owner is deleted with `deletionPolicy: Orphan`, the second adopts the key at
/// its next resync, without creating another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicting_owner_takes_over_when_the_owner_goes() {
    let env = Env::start_with(Options {
        resync: Duration::from_secs(1),
        // The owner reads no detail in between, so any call would be the loser's.
        detail_resync: Some(Duration::from_secs(3600)),
        ..Default::default()
    })
    .await;
    let keys: Api<ApiKey> = env.api();
    create(
        &keys,
        &CI_KEY.replace(
            "secretName: ci-key",
            "secretName: ci-key\n  deletionPolicy: Orphan",
        ),
    )
    .await;
    let id = wait_for(&keys, "ci", "Ready", key_ready)
        .await
        .status
        .unwrap()
        .id
        .unwrap();
    env.sim.clear_request_log();
    create(
        &keys,
        &CI_KEY
            .replace(
                "{name: ci}",
                "{name: ci-again, annotations: {mailtarget.co/adoption-policy: Adopt}}",
            )
            .replace("ci-key", "ci-again-key"),
    )
    .await;
    let loser = wait_for(
        &keys,
        "ci-again",
        "ConflictingOwner",
        stalled_because("ConflictingOwner"),
    )
    .await;
    assert_eq!(loser.status.unwrap().id, None, "the loser records no id");
    // Two resyncs later the loser has still made no call of its own (list pages are shared).
    eventually("two list reads", || {
        requests_to(&env, "GET", "/api-key") >= 2
    })
    .await;
    let own: Vec<String> = env
        .sim
        .request_log()
        .iter()
        .filter(|r| !(r.method == "GET" && r.path == "/api-key"))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(own.is_empty(), "the loser makes no call: {own:?}");

    let uid = keys.get("ci").await.unwrap().uid().unwrap();
    keys.delete("ci", &DeleteParams::default()).await.unwrap();
    wait_deleted(&keys, "ci", &uid).await;
    let taken = wait_for(&keys, "ci-again", "Ready after the owner left", key_ready).await;
    assert_eq!(
        taken.status.unwrap().id,
        Some(id),
        "the same key is adopted"
    );
    let state = env.sim.snapshot();
    assert_eq!(state.api_keys.len(), 1, "no second key is created");
    assert!(
        env.sim
            .request_log()
            .iter()
            .all(|r| !(r.method == "POST" || r.method == "DELETE")),
        "nothing created or deleted after the first create: {:?}",
        env.writes()
    );
    env.stop().await;
}
