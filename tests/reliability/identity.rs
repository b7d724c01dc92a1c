//! Identity and adoption: an existing API object or Secret is taken over only when the resource
//! says so (`mailtarget.co/adoption-policy`), a create is preceded by a lookup in a list newer
//! than the reconcile, and an id missing from a list is confirmed with a GET before anything is
//! created again.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::response::Response;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use mailtarget_operator::api::{Client as ApiClient, ClientConfig, CreateApiKey, RetryPolicy};
use mailtarget_operator::crd::{ApiKey, Ownership, SendingDomain};
use serde_json::{Value, json};

use crate::common::{KEY, create, eventually, wait_deleted, wait_for};
use crate::harness::{Rig, operator_client, ready_now, settings, stalled_reason};

fn stalled(reason: &'static str) -> impl Fn(&ApiKey) -> bool + Send + 'static {
    move |k: &ApiKey| stalled_reason(k).as_deref() == Some(reason)
}

fn key_yaml(name: &str, annotations: &[(&str, String)]) -> String {
    let annotations: String = annotations
        .iter()
        .map(|(k, v)| format!("    {k}: \"{v}\"\n"))
        .collect();
    let annotations = if annotations.is_empty() {
        String::new()
    } else {
        format!("  annotations:\n{annotations}")
    };
    format!(
        "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: {name}\n{annotations}spec:\n  name: {name}\n  secretName: {name}-key\n"
    )
}

async fn service_key(client: &ApiClient, name: &str) -> i64 {
    client
        .create_api_key(&CreateApiKey {
            name: Some(name.into()),
            ..Default::default()
        })
        .await
        .unwrap()
        .id
}

/// An existing key of the account is not taken over by a resource without an adoption policy,
/// by name or by an external id the operator did not write: `Stalled/AlreadyExists`, no write,
/// no Secret. With `mailtarget.co/adoption-policy: Adopt` it is adopted, without a create.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn existing_objects_need_an_adoption_policy() {
    let mut rig = Rig::new(Rig::sim_config()).await;
    let client = operator_client(&rig.sim);
    let ci = service_key(&client, "ci").await;
    let other = service_key(&client, "other-team").await;
    rig.sim.clear_request_log();
    rig.start_operator(Duration::from_secs(300));
    let keys: Api<ApiKey> = rig.api();
    let secrets: Api<Secret> = rig.api();

    create(&keys, &key_yaml("ci", &[])).await;
    let intruder = key_yaml(
        "intruder",
        &[("mailtarget.co/external-id", other.to_string())],
    );
    create(&keys, &intruder).await;
    for name in ["ci", "intruder"] {
        let k = wait_for(
            &keys,
            name,
            "Stalled/AlreadyExists",
            stalled("AlreadyExists"),
        )
        .await;
        let message = k
            .status
            .unwrap()
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Stalled")
            .unwrap()
            .message;
        assert!(
            message.contains("mailtarget.co/adoption-policy"),
            "{name}: says how to adopt: {message}"
        );
        assert!(
            secrets
                .get_opt(&format!("{name}-key"))
                .await
                .unwrap()
                .is_none(),
            "{name}: no Secret written"
        );
    }
    assert!(rig.writes().is_empty(), "no write: {:?}", rig.writes());

    keys.patch(
        "ci",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {"mailtarget.co/adoption-policy": "Adopt"}}}),
        ),
    )
    .await
    .unwrap();
    let k = wait_for(&keys, "ci", "Ready after the adoption policy", ready_now).await;
    assert_eq!(k.status.unwrap().id, Some(ci));
    let id = ci.to_string();
    wait_for(
        &keys,
        "ci",
        "recording its identity in metadata",
        move |k: &ApiKey| k.annotations().get("mailtarget.co/external-id") == Some(&id),
    )
    .await;
    assert!(secrets.get_opt("ci-key").await.unwrap().is_some());
    assert_eq!(rig.posts(), 0, "adopted, not created");
    rig.stop_operator().await;
}

/// A Secret that exists before the ApiKey names it, and that the operator did not write, is
/// never taken over: `Stalled/SecretConflict` before any write to the service (no key made
/// whose value has nowhere to go), the user's data and owners untouched, and deleting the
/// ApiKey leaves the Secret in place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_secret_is_not_taken_over() {
    a_users_secret_stays::<ApiKey>(&key_yaml("ci", &[]), "ci", "ci-key").await;
}

/// The same for a SendingDomain's DKIM private key Secret (`spec.dkimPrivateKeySecretName`):
/// no domain is created, the user's Secret keeps its data and gets no owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_secret_is_not_taken_over_for_a_dkim_key() {
    let yaml = "apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata:\n  name: mail\nspec:\n  domain: mail.example.com\n  dkimPrivateKeySecretName: mail-dkim\n";
    a_users_secret_stays::<SendingDomain>(yaml, "mail", "mail-dkim").await;
}

/// Resource `name` of kind `K` (its manifest `yaml`) names Secret `secret`, which the user wrote
/// first: see [`a_users_secret_is_not_taken_over`].
async fn a_users_secret_stays<K>(yaml: &str, name: &str, secret: &str)
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + crate::harness::HasConditions
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + serde::Serialize
        + Send
        + Sync
        + 'static,
{
    let mut rig = Rig::new(Rig::sim_config()).await;
    rig.start_operator(Duration::from_secs(300));
    let resources: Api<K> = rig.api();
    let secrets: Api<Secret> = rig.api();
    let mine: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": secret},
        "stringData": {"note": "keep me"},
    }))
    .unwrap();
    secrets.create(&PostParams::default(), &mine).await.unwrap();

    let r = create(&resources, yaml).await;
    wait_for(&resources, name, "Stalled/SecretConflict", |r: &K| {
        stalled_reason(r).as_deref() == Some("SecretConflict")
    })
    .await;
    let s = secrets.get(secret).await.unwrap();
    let data = s.data.clone().unwrap_or_default();
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        vec!["note"],
        "the user's data only"
    );
    assert!(s.owner_references().is_empty(), "no owner added");
    assert!(rig.writes().is_empty(), "no write: {:?}", rig.writes());

    resources
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
    wait_deleted(&resources, name, &r.uid().unwrap()).await;
    let s = secrets.get(secret).await.unwrap();
    assert!(
        s.data.unwrap().contains_key("note"),
        "the user's Secret stays"
    );
    rig.stop_operator().await;
}

/// A key created at the service moments before a resource naming it is applied is found by the
/// lookup that precedes the create (a list newer than the reconcile), even while the operator
/// holds a cached list from before: one key, adopted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_created_just_before_is_not_created_twice() {
    let mut rig = Rig::new(Rig::sim_config()).await;
    rig.start_operator(Duration::from_secs(300));
    let keys: Api<ApiKey> = rig.api();
    create(&keys, &key_yaml("warm", &[])).await;
    wait_for(&keys, "warm", "Ready", ready_now).await;

    let late = service_key(&operator_client(&rig.sim), "late").await;
    create(
        &keys,
        &key_yaml(
            "late",
            &[("mailtarget.co/adoption-policy", "AdoptOrCreate".into())],
        ),
    )
    .await;
    let k = wait_for(&keys, "late", "Ready", ready_now).await;
    assert_eq!(k.status.unwrap().id, Some(late));
    let named_late = rig
        .sim
        .snapshot()
        .api_keys
        .iter()
        .filter(|k| k.name == "late")
        .count();
    assert_eq!(named_late, 1, "no second key");
    rig.stop_operator().await;
}

/// A proxy to the simulator that removes the key with id `hidden` (when not 0) from every
/// `GET /api-key` list page, as offset paging does when an object is deleted between two pages.
#[derive(Clone)]
struct Proxy {
    upstream: String,
    http: reqwest::Client,
    hidden: Arc<AtomicI64>,
}

async fn forward(State(p): State<Proxy>, req: Request) -> Response {
    let (parts, status, mut bytes) = crate::common::forward(&p.http, &p.upstream, req).await;
    let hidden = p.hidden.load(Ordering::SeqCst);
    if hidden != 0 && parts.method == "GET" && parts.uri.path() == "/api-key" {
        let mut doc: Value = serde_json::from_slice(&bytes).unwrap();
        if let Some(items) = doc["apiKeys"].as_array_mut() {
            items.retain(|i| i["id"].as_i64() != Some(hidden));
        }
        bytes = serde_json::to_vec(&doc).unwrap();
    }
    crate::common::json_answer(status, bytes)
}

/// A key whose id drops out of a list (offset paging while something is deleted) is confirmed
/// with one GET of that id, and not created again: still one key, no POST.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_missing_from_a_list_is_confirmed_before_any_create() {
    let mut rig = Rig::new(Rig::sim_config()).await;
    let proxy = start_behind_proxy(&mut rig).await;
    let keys: Api<ApiKey> = rig.api();
    create(&keys, &key_yaml("ci", &[])).await;
    let k = wait_for(&keys, "ci", "Ready", ready_now).await;
    let id = k.status.unwrap().id.unwrap();

    rig.sim.clear_request_log();
    proxy.hidden.store(id, Ordering::SeqCst);
    let confirm = format!("/api-key/{id}");
    eventually("a GET of the missing id, or a create", || {
        rig.sim
            .request_log()
            .iter()
            .any(|r| (r.method == "GET" && r.path == confirm) || r.method == "POST")
    })
    .await;
    // Let a further resync read the (still hiding) list again, then check nothing was created.
    let lists_before = list_reads(&rig);
    eventually("a later list read", || list_reads(&rig) > lists_before).await;
    eventually("the reconcile after that list read", || {
        rig.sim
            .request_log()
            .iter()
            .filter(|r| r.path == confirm)
            .count()
            >= 2
            || rig.posts() > 0
    })
    .await;
    assert_eq!(rig.posts(), 0, "no second key: {:?}", rig.writes());
    assert_eq!(rig.sim.snapshot().api_keys.len(), 1);
    rig.stop_operator().await;
}

/// An id an `ObserveOnly` reconcile recorded is confirmed with one GET when it is missing from a
/// list, as an owned one is: switched to `Full` with an adoption policy while its key is out of
/// the list, the resource adopts that key and creates none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observed_id_missing_from_a_list_is_confirmed_before_any_create() {
    let mut rig = Rig::new(Rig::sim_config()).await;
    let id = service_key(&operator_client(&rig.sim), "seen").await;
    let proxy = start_behind_proxy(&mut rig).await;
    let keys: Api<ApiKey> = rig.api();
    create(
        &keys,
        "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: seen}\nspec: {secretName: seen-key, managementPolicy: ObserveOnly}\n",
    )
    .await;
    let k = wait_for(&keys, "seen", "Ready (observed)", ready_now).await;
    assert_eq!(k.status.and_then(|s| s.id), Some(id));

    rig.sim.clear_request_log();
    proxy.hidden.store(id, Ordering::SeqCst);
    // Two list reads: the operator's cached list (one fetch at a time) is then one without it.
    eventually("two list reads", || list_reads(&rig) >= 2).await;
    let adopt = json!({
        "metadata": {"annotations": {"mailtarget.co/adoption-policy": "AdoptOrCreate"}},
        "spec": {"managementPolicy": "Full"},
    });
    (keys
        .patch("seen", &PatchParams::default(), &Patch::Merge(adopt))
        .await)
        .unwrap();
    let owned = |k: &ApiKey| k.status.as_ref().and_then(|s| s.ownership) == Some(Ownership::Owned);
    let k = wait_for(&keys, "seen", "Ready and owned, or a create", move |k| {
        owned(k) && ready_now(k)
    })
    .await;
    assert_eq!(rig.posts(), 0, "no second key: {:?}", rig.writes());
    assert_eq!(
        k.status.and_then(|s| s.id),
        Some(id),
        "the observed key adopted"
    );
    assert_eq!(rig.sim.snapshot().api_keys.len(), 1);
    rig.stop_operator().await;
}

/// An `ObserveOnly` resource whose observed key was deleted at the service reads no GET of it at
/// each resync: only a reconcile that may write confirms a recorded id missing from a list
/// (a create may follow there; an observer reports what the lists show).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_of_a_deleted_key_reads_no_get_at_each_resync() {
    let mut rig = Rig::new(Rig::sim_config()).await;
    let client = operator_client(&rig.sim);
    let id = service_key(&client, "seen").await;
    rig.start_operator(Duration::from_secs(1));
    let keys: Api<ApiKey> = rig.api();
    create(
        &keys,
        "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: seen}\nspec: {secretName: seen-key, managementPolicy: ObserveOnly}\n",
    )
    .await;
    wait_for(&keys, "seen", "Ready (observed)", ready_now).await;
    assert!(client.delete_api_key(id).await.unwrap());
    rig.sim.clear_request_log();
    // Three list reads: the reconciles of the first two have ended (one resource, one at a time).
    eventually("three list reads", || list_reads(&rig) >= 3).await;
    let read = format!("/api-key/{id}");
    let gets = (rig.sim.request_log().iter())
        .filter(|r| r.method == "GET" && r.path == read)
        .count();
    assert_eq!(gets, 0, "{:?}", rig.sim.request_log());
    rig.stop_operator().await;
}

/// Starts the operator calling the simulator through a [`Proxy`], and returns the proxy.
async fn start_behind_proxy(rig: &mut Rig) -> Proxy {
    let proxy = Proxy {
        upstream: rig.sim.base_url().trim_end_matches('/').to_string(),
        http: reqwest::Client::new(),
        hidden: Arc::new(AtomicI64::new(0)),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new()
        .fallback(forward)
        .with_state(proxy.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let mut config = ClientConfig::new(
        format!("http://{addr}").parse().unwrap(),
        rig.sim.transmission_url().parse().unwrap(),
        KEY.to_string().into(),
    );
    config.retry = RetryPolicy {
        max_retries: 2,
        initial_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(200),
    };
    rig.start_operator_with(
        settings(Duration::from_secs(1)),
        ApiClient::new(config).unwrap(),
    );
    proxy
}

fn list_reads(rig: &Rig) -> usize {
    rig.sim
        .request_log()
        .iter()
        .filter(|r| r.method == "GET" && r.path == "/api-key")
        .count()
}

/// Resources written by releases that recorded the id in `status.id` only: the first reconcile
/// after the upgrade records it in metadata and keeps the object, with no write to the service
/// and no stall.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_from_status_id_only_records_the_identity() {
    let mut rig = Rig::new(Rig::sim_config()).await;
    let client = operator_client(&rig.sim);
    let id = service_key(&client, "ci").await;
    // A key inside a sub account, which an ApiKey without subAccountRef could adopt before
    // lookups kept to the account's own scope: it is kept too.
    let team = crate::common::sub_account_with_key(&client, "team", "inner").await;
    let inner = team.api_keys[0].id;
    let keys: Api<ApiKey> = rig.api();
    for (name, id) in [("ci", id), ("inner", inner)] {
        create(&keys, &key_yaml(name, &[])).await;
        keys.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"id": id, "name": name}})),
        )
        .await
        .unwrap();
    }
    // And a verified domain inside that sub account, adopted the same way.
    let team_client = client.calling_as(team.api_keys[0].key.clone()).unwrap();
    let create_domain = mailtarget_operator::api::CreateSendingDomain {
        domain: "inner.example.com".into(),
        ..Default::default()
    };
    let domain = team_client
        .create_sending_domain(&create_domain)
        .await
        .unwrap()
        .id;
    team_client.verify_txt(domain).await.unwrap();
    let domains: Api<SendingDomain> = rig.api();
    create(
        &domains,
        "apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata: {name: inner-domain}\nspec: {domain: inner.example.com}\n",
    )
    .await;
    domains
        .patch_status(
            "inner-domain",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"id": domain}})),
        )
        .await
        .unwrap();
    rig.sim.clear_request_log();
    rig.start_operator(Duration::from_secs(1));
    for (name, id) in [("ci", id), ("inner", inner)] {
        let want = id.to_string();
        let k = wait_for(
            &keys,
            name,
            "Ready with its identity in metadata",
            move |k: &ApiKey| {
                ready_now(k) && k.annotations().get("mailtarget.co/external-id") == Some(&want)
            },
        )
        .await;
        assert_eq!(k.status.as_ref().unwrap().id, Some(id));
        let stalled = k
            .status
            .unwrap()
            .conditions
            .into_iter()
            .any(|c| c.type_ == "Stalled" && c.status == "True");
        assert!(!stalled, "{name}");
    }
    // Later reconciles (resyncs) find them by the external id now recorded, "inner" outside
    // the account's own scope: still theirs, still no write.
    let before = crate::common::reconciles(&rig.metrics, "ApiKey");
    eventually("two more resyncs of each", || {
        crate::common::reconciles(&rig.metrics, "ApiKey") >= before + 4
    })
    .await;
    for (name, id) in [("ci", id), ("inner", inner)] {
        let k = keys.get(name).await.unwrap();
        assert!(ready_now(&k), "{name}: {:?}", k.status);
        assert_eq!(k.status.unwrap().id, Some(id), "{name}");
    }
    let want = domain.to_string();
    let d = wait_for(
        &domains,
        "inner-domain",
        "Ready with its identity in metadata",
        move |d: &SendingDomain| {
            ready_now(d) && d.annotations().get("mailtarget.co/external-id") == Some(&want)
        },
    )
    .await;
    assert_eq!(d.status.unwrap().id, Some(domain));
    assert!(rig.writes().is_empty(), "no write: {:?}", rig.writes());
    rig.stop_operator().await;
}

/// Observing is not owning: an `ObserveOnly` ApiKey naming another's key exports no value
/// without an adoption policy, and switching it to `Full` does not take the key over either
/// (`AlreadyExists`, no write).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observing_is_not_owning() {
    let mut rig = Rig::new(Rig::sim_config()).await;
    service_key(&operator_client(&rig.sim), "seen").await;
    rig.sim.clear_request_log();
    rig.start_operator(Duration::from_secs(300));
    let keys: Api<ApiKey> = rig.api();
    let secrets: Api<Secret> = rig.api();
    create(
        &keys,
        "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: seen}\nspec: {secretName: seen-key, managementPolicy: ObserveOnly}\n",
    )
    .await;
    wait_for(&keys, "seen", "Ready (observed)", ready_now).await;
    assert!(
        secrets.get_opt("seen-key").await.unwrap().is_none(),
        "no value exported without an adoption policy"
    );
    keys.patch(
        "seen",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"managementPolicy": "Full"}})),
    )
    .await
    .unwrap();
    wait_for(
        &keys,
        "seen",
        "Stalled/AlreadyExists",
        stalled("AlreadyExists"),
    )
    .await;
    assert!(rig.writes().is_empty(), "no write: {:?}", rig.writes());
    assert!(secrets.get_opt("seen-key").await.unwrap().is_none());
    rig.stop_operator().await;
}

/// Observing is not owning, whatever the observation concluded: an `ObserveOnly`
/// SendingDomain that observed an unverified domain (its Ready reason says the domain waits for
/// DNS, not `Observed`) and is then switched to `Full` does not take the domain over without an
/// adoption policy: `AlreadyExists`, no write, no DKIM private key exported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observing_an_unverified_domain_is_not_owning_it() {
    let mut rig = Rig::new(Rig::sim_config()).await;
    operator_client(&rig.sim)
        .create_sending_domain(&mailtarget_operator::api::CreateSendingDomain {
            domain: "seen.example".into(),
            note: None,
            assignment: None,
        })
        .await
        .unwrap();
    rig.sim.clear_request_log();
    rig.start_operator(Duration::from_secs(300));
    let domains: Api<SendingDomain> = rig.api();
    let secrets: Api<Secret> = rig.api();
    create(
        &domains,
        "apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata: {name: seen}\nspec: {domain: seen.example, dkimPrivateKeySecretName: seen-dkim, managementPolicy: ObserveOnly}\n",
    )
    .await;
    wait_for(
        &domains,
        "seen",
        "the domain observed, waiting for DNS",
        |d: &SendingDomain| {
            d.status.as_ref().is_some_and(|s| {
                s.id.is_some()
                    && mailtarget_operator::crd::conditions::find(&s.conditions, "Ready")
                        .is_some_and(|c| c.reason != "Observed")
            })
        },
    )
    .await;
    domains
        .patch(
            "seen",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"managementPolicy": "Full"}})),
        )
        .await
        .unwrap();
    wait_for(
        &domains,
        "seen",
        "Stalled/AlreadyExists",
        |d: &SendingDomain| stalled_reason(d).as_deref() == Some("AlreadyExists"),
    )
    .await;
    assert!(rig.writes().is_empty(), "no write: {:?}", rig.writes());
    assert!(secrets.get_opt("seen-dkim").await.unwrap().is_none());
    rig.stop_operator().await;
}

/// Observing what the resource owns keeps it owned: a key the ApiKey created, observed for a
/// while (`ObserveOnly`) and managed again (`Full`), stays its own: Ready, no stall, no create.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observing_an_owned_object_keeps_it_owned() {
    let mut rig = Rig::new(Rig::sim_config()).await;
    rig.start_operator(Duration::from_secs(300));
    let keys: Api<ApiKey> = rig.api();
    create(&keys, &key_yaml("own", &[])).await;
    wait_for(&keys, "own", "Ready", ready_now).await;
    let policy = |p: &str| Patch::Merge(json!({"spec": {"managementPolicy": p}}));
    let owned = |k: &ApiKey| k.status.as_ref().and_then(|s| s.ownership) == Some(Ownership::Owned);
    keys.patch("own", &PatchParams::default(), &policy("ObserveOnly"))
        .await
        .unwrap();
    wait_for(
        &keys,
        "own",
        "observed and still owned",
        move |k: &ApiKey| {
            ready_now(k)
                && k.status.as_ref().and_then(|s| s.observed_generation) == k.metadata.generation
                && owned(k)
        },
    )
    .await;
    rig.sim.clear_request_log();
    keys.patch("own", &PatchParams::default(), &policy("Full"))
        .await
        .unwrap();
    wait_for(&keys, "own", "Ready under Full again", move |k: &ApiKey| {
        ready_now(k)
            && k.status.as_ref().and_then(|s| s.observed_generation) == k.metadata.generation
            && owned(k)
    })
    .await;
    assert!(rig.writes().is_empty(), "no write: {:?}", rig.writes());
    rig.stop_operator().await;
}

/// A SubAccount that only observed its sub account does not make the keys inside it its
/// namespace's own by being switched to `Full` while paused (a paused resource is never
/// reconciled, so its status still names the observed sub account): an ApiKey naming a key
/// there gets `AlreadyExists`, no write, no Secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_sub_account_switched_to_full_does_not_own_what_it_observed() {
    let (mut rig, subs) = observe_other_sub_account().await;
    wait_for(
        &subs,
        "other",
        "observed",
        |s: &mailtarget_operator::crd::SubAccount| {
            s.status.as_ref().is_some_and(|s| s.id.is_some())
        },
    )
    .await;
    // Switched while the operator is down: its next cache holds the paused Full SubAccount
    // (never the ObserveOnly copy, which would make the test pass without the rule).
    rig.stop_operator().await;
    subs.patch(
        "other",
        &PatchParams::default(),
        &Patch::Merge(json!({
            "metadata": {"annotations": {"mailtarget.co/paused": "true"}},
            "spec": {"managementPolicy": "Full"},
        })),
    )
    .await
    .unwrap();
    rig.start_operator(Duration::from_secs(300));
    a_key_of_it_is_not_taken(rig).await;
}

/// A status written before `status.ownership` existed by a reconcile that only observed (its
/// Ready reason is `Observed`) does not own what it names: switched to `Full`, the resource
/// gets `AlreadyExists`, no write, no Secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observed_status_from_before_ownership_does_not_own() {
    let mut rig = Rig::new(Rig::sim_config()).await;
    let id = service_key(&operator_client(&rig.sim), "seen").await;
    let keys: Api<ApiKey> = rig.api();
    let secrets: Api<Secret> = rig.api();
    create(&keys, &key_yaml("seen", &[])).await;
    let ready = json!({"type": "Ready", "status": "True", "reason": "Observed",
        "message": "observed", "lastTransitionTime": "2026-01-01T00:00:00Z"});
    // Written by another field manager: the operator's applies cannot remove its `id`.
    keys.patch_status(
        "seen",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"id": id, "name": "seen", "conditions": [ready]}})),
    )
    .await
    .unwrap();
    rig.sim.clear_request_log();
    rig.start_operator(Duration::from_secs(300));
    wait_for(
        &keys,
        "seen",
        "Stalled/AlreadyExists",
        stalled("AlreadyExists"),
    )
    .await;
    assert!(rig.writes().is_empty(), "no write: {:?}", rig.writes());
    assert!(secrets.get_opt("seen-key").await.unwrap().is_none());
    rig.stop_operator().await;
}

/// A key inside a sub account that a SubAccount only observes is not the ApiKey's by name: it
/// needs an adoption policy (else a namespace could take any sub account's key by observing
/// that sub account first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_in_an_observed_sub_account_needs_a_policy() {
    let (rig, _subs) = observe_other_sub_account().await;
    a_key_of_it_is_not_taken(rig).await;
}

/// A sub account `other` with a key `other-first` at the service, and a running operator with
/// an `ObserveOnly` SubAccount `other` observing it.
async fn observe_other_sub_account() -> (Rig, Api<mailtarget_operator::crd::SubAccount>) {
    let mut rig = Rig::new(Rig::sim_config()).await;
    crate::common::sub_account_with_key(&operator_client(&rig.sim), "other", "other-first").await;
    rig.sim.clear_request_log();
    rig.start_operator(Duration::from_secs(300));
    let subs: Api<mailtarget_operator::crd::SubAccount> = rig.api();
    create(
        &subs,
        "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: other}\nspec: {managementPolicy: ObserveOnly, credentialKeyName: other-first}\n",
    )
    .await;
    (rig, subs)
}

/// An ApiKey naming the key `other-first` inside SubAccount `other` is `AlreadyExists`: no
/// write, no Secret.
async fn a_key_of_it_is_not_taken(mut rig: Rig) {
    let keys: Api<ApiKey> = rig.api();
    let secrets: Api<Secret> = rig.api();
    create(
        &keys,
        "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: steal}\nspec: {name: other-first, subAccountRef: {name: other}, secretName: steal-key}\n",
    )
    .await;
    wait_for(
        &keys,
        "steal",
        "Stalled/AlreadyExists",
        stalled("AlreadyExists"),
    )
    .await;
    assert!(secrets.get_opt("steal-key").await.unwrap().is_none());
    assert!(rig.writes().is_empty(), "no write: {:?}", rig.writes());
    rig.stop_operator().await;
}

/// In a cluster too, an external id naming a sending domain of another name is another object
/// (a domain cannot be renamed), even under an adoption policy: `Stalled/InvalidSpec`, no
/// write, no DKIM private key exported; deleting the resource leaves that domain alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_id_naming_another_domain_is_invalid() {
    let mut rig = Rig::new(Rig::sim_config()).await;
    let keep = operator_client(&rig.sim)
        .create_sending_domain(&mailtarget_operator::api::CreateSendingDomain {
            domain: "keep.example".into(),
            note: None,
            assignment: None,
        })
        .await
        .unwrap();
    rig.sim.clear_request_log();
    rig.start_operator(Duration::from_secs(300));
    let domains: Api<SendingDomain> = rig.api();
    let secrets: Api<Secret> = rig.api();
    let yaml = format!(
        "apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata:\n  name: other\n  annotations: {{mailtarget.co/external-id: \"{}\", mailtarget.co/adoption-policy: Adopt}}\nspec: {{domain: other.example, shared: true, dkimPrivateKeySecretName: other-dkim}}\n",
        keep.id
    );
    let d = create(&domains, &yaml).await;
    wait_for(
        &domains,
        "other",
        "Stalled/InvalidSpec",
        |d: &SendingDomain| stalled_reason(d).as_deref() == Some("InvalidSpec"),
    )
    .await;
    assert!(rig.writes().is_empty(), "no write: {:?}", rig.writes());
    assert!(secrets.get_opt("other-dkim").await.unwrap().is_none());

    domains
        .delete("other", &DeleteParams::default())
        .await
        .unwrap();
    wait_deleted(&domains, "other", &d.uid().unwrap()).await;
    assert!(rig.writes().is_empty(), "no write: {:?}", rig.writes());
    assert!(
        (rig.sim.snapshot().sending_domains.iter()).any(|s| s.id == keep.id),
        "the other domain stays"
    );
    rig.stop_operator().await;
}
