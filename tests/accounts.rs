//! The account kinds (ClusterAccount, Account) against the test API server and the simulator:
//! each account is checked with one authenticated read, never a write to the service; its
//! status says whether the key works and what its scope is; a changed credentials Secret is
//! used without a restart; the registry gives the account's client by name.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{Env, Options, create, eventually, ready_is, wait_for};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, PostParams};
use mailtarget_operator::api::{CreateApiKey, ListApiKeysQuery};
use mailtarget_operator::controller::accounts::{AccountName, Resolved};
use mailtarget_operator::crd::{Account, AccountStatus, ClusterAccount, KeyScope, ScopeSource};
use mailtarget_test_apiserver::RequestFilter;
use secrecy::ExposeSecret;

/// An environment whose resync is long: anything that happens within a test's bounded waits
/// was started by a watch event, not by the periodic resync.
async fn env() -> Env {
    Env::start_with(Options {
        resync: Duration::from_secs(300),
        ..Default::default()
    })
    .await
}

/// Secret `name` holding `value` under `key`.
fn secret(name: &str, key: &str, value: &str) -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            key.to_string(),
            ByteString(value.as_bytes().to_vec()),
        )])),
        ..Default::default()
    }
}

/// Writes Secret `name` in `default` holding `value` under `apiKey` (created, or replaced).
async fn put_secret(env: &Env, name: &str, value: &str) {
    common::put_key_secret(&env.kube, "default", name, value).await;
}

/// A new company key at the service: its id and value.
async fn company_key(env: &Env, name: &str) -> (i64, String) {
    let key = env
        .api
        .create_api_key(&CreateApiKey {
            name: Some(name.into()),
            ..Default::default()
        })
        .await
        .unwrap();
    (key.id, key.key.expose_secret().to_string())
}

fn cluster_accounts(env: &Env) -> Api<ClusterAccount> {
    Api::all(env.kube.clone())
}

async fn create_cluster_account(env: &Env, name: &str, secret: &str) -> ClusterAccount {
    create(
        &cluster_accounts(env),
        &format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: ClusterAccount\nmetadata: {{name: {name}}}\nspec:\n  credentials: {{secretRef: {{name: {secret}}}}}\n  apiUrl: {}\n  transmissionUrl: {}\n",
            env.sim.base_url(),
            env.sim.transmission_url()
        ),
    )
    .await
}

/// True when `Ready` has `status` (and `reason`, when given) for the current generation.
fn ready<K: kube::Resource>(
    status: Option<&AccountStatus>,
    obj: &K,
    want: &str,
    reason: Option<&str>,
) -> bool {
    status.is_some_and(|s| ready_is(obj, &s.conditions, want, reason))
}

/// Reconciles of `kind` (`ClusterAccount`, `Account`) the running operator finished, whatever
/// their result (its `mailtarget_reconciles_total`).
fn checks(env: &Env, kind: &str) -> u64 {
    common::reconciles(&env.ctx.as_ref().unwrap().metrics, kind)
}

/// The simulator's requests since its log was last cleared, as `METHOD /path?query`.
fn service_requests(env: &Env) -> Vec<String> {
    env.sim
        .request_log()
        .iter()
        .map(|r| {
            format!(
                "{} {}?{}",
                r.method,
                r.path,
                r.query.as_deref().unwrap_or_default()
            )
        })
        .collect()
}

/// Waits (through a watch, bounded) until ClusterAccount `name` is Ready having found the key
/// with id `key_id` in the key list.
async fn wait_key_id(api: &Api<ClusterAccount>, name: &str, key_id: i64) {
    wait_for(api, name, &format!("Ready with key {key_id}"), move |a| {
        ready(a.status.as_ref(), a, "True", None)
            && a.status.as_ref().and_then(|s| s.key_id) == Some(key_id)
    })
    .await;
}

fn ready_condition(status: &AccountStatus) -> &mailtarget_operator::crd::Condition {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("a Ready condition")
}

/// A ClusterAccount with a company key and another with a sub account key become Ready with
/// the scope found in the key list (the key's own entry), with no write to the service; the
/// registry then gives each one's client by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valid_keys_are_ready_with_their_scope() {
    let env = env().await;
    let (company_id, company) = company_key(&env, "operator").await;
    let sub = common::sub_account_with_key(&env.api, "team-a", "team-a-operator").await;
    let sub_key = &sub.api_keys[0];
    put_secret(&env, "company", &company).await;
    put_secret(&env, "team-a", sub_key.key.expose_secret()).await;
    env.sim.clear_request_log();

    create_cluster_account(&env, "company", "company").await;
    create_cluster_account(&env, "team-a", "team-a").await;
    let api = cluster_accounts(&env);
    let c = wait_for(&api, "company", "Ready", |a: &ClusterAccount| {
        ready(a.status.as_ref(), a, "True", Some("Authenticated"))
    })
    .await;
    let status = c.status.unwrap();
    assert_eq!(status.scope, Some(KeyScope::Company));
    assert_eq!(status.scope_source, Some(ScopeSource::KeyList));
    assert_eq!(status.key_id, Some(company_id));
    assert_eq!(status.sub_account_id, None);
    assert_eq!(status.observed_generation, c.metadata.generation);

    let t = wait_for(&api, "team-a", "Ready", |a: &ClusterAccount| {
        ready(a.status.as_ref(), a, "True", Some("Authenticated"))
    })
    .await;
    let status = t.status.unwrap();
    assert_eq!(status.scope, Some(KeyScope::SubAccount));
    assert_eq!(status.key_id, Some(sub_key.id));
    assert_eq!(status.sub_account_id, Some(sub.id));
    assert_eq!(status.sub_account_name.as_deref(), Some("team-a"));
    let status_json = serde_json::to_string(&status).unwrap();
    assert!(
        !status_json.contains(sub_key.key.expose_secret()),
        "a key value reached status"
    );

    assert!(
        env.writes().is_empty(),
        "an account check wrote to the service"
    );
    let reads = env.sim.request_log();
    assert!(
        reads
            .iter()
            .all(|r| r.method == "GET" && r.path == "/api-key"),
        "only key list reads: {:?}",
        reads
            .iter()
            .map(|r| (&r.method, &r.path))
            .collect::<Vec<_>>()
    );

    // The registry gives each account's client, whose key is the account's: the sub account key
    // sees only its sub account's keys.
    let registry = &env.ctx.as_ref().unwrap().accounts;
    let Resolved::Ready(handle) = registry.resolve(&AccountName::Cluster("team-a".into())) else {
        panic!("ClusterAccount team-a does not resolve as Ready");
    };
    assert_eq!(handle.scope, Some(KeyScope::SubAccount));
    assert!(!handle.from_flags);
    let seen = (handle.service.client())
        .list_all_api_keys(&ListApiKeysQuery::default())
        .await
        .unwrap();
    assert!(!seen.is_empty() && seen.iter().all(|k| k.sub_account_id == sub.id));
    env.stop().await;
}

/// A key the service refuses: `Ready=False`, `Unauthorized`, `Stalled`, a message naming the
/// Secret and never the key; the registry does not hand out its client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_key_is_unauthorized() {
    let env = env().await;
    put_secret(&env, "wrong", "not-a-key-of-this-company").await;
    create_cluster_account(&env, "wrong", "wrong").await;
    let a = wait_for(
        &cluster_accounts(&env),
        "wrong",
        "Unauthorized",
        |a: &ClusterAccount| ready(a.status.as_ref(), a, "False", Some("Unauthorized")),
    )
    .await;
    let status = a.status.unwrap();
    let condition = ready_condition(&status);
    // The key's absence first: the next assertion prints the message when it fails.
    assert!(!condition.message.contains("not-a-key-of-this-company"));
    assert!(
        condition.message.contains("Secret \"default/wrong\""),
        "{}",
        condition.message
    );
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.type_ == "Stalled" && c.status == "True")
    );
    assert_eq!(status.scope, None);
    let registry = &env.ctx.as_ref().unwrap().accounts;
    match registry.resolve(&AccountName::Cluster("wrong".into())) {
        Resolved::NotReady { reason } => assert_eq!(reason, "Unauthorized"),
        _ => panic!("an unauthorized account resolved otherwise"),
    }
    env.stop().await;
}

/// A missing Secret: `CredentialsNotFound` naming the Secret (in the operator's namespace); a
/// Secret without the key: the same, naming the key; once the key is there, `Ready`, through
/// the Secret watch alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_secret_is_named_and_its_creation_picked_up() {
    let env = env().await;
    let (_, company) = company_key(&env, "operator").await;
    create_cluster_account(&env, "later", "later-credentials").await;
    let api = cluster_accounts(&env);
    let a = wait_for(
        &api,
        "later",
        "CredentialsNotFound",
        |a: &ClusterAccount| ready(a.status.as_ref(), a, "False", Some("CredentialsNotFound")),
    )
    .await;
    let message = &ready_condition(a.status.as_ref().unwrap()).message;
    assert!(
        message.contains("Secret \"default/later-credentials\" not found"),
        "{message}"
    );

    // The Secret appears with another key only.
    let secrets: Api<Secret> = env.api();
    let other = secret("later-credentials", "token", &company);
    secrets
        .create(&PostParams::default(), &other)
        .await
        .unwrap();
    wait_for(
        &api,
        "later",
        "told the key is missing",
        |a: &ClusterAccount| {
            a.status.as_ref().is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.type_ == "Ready"
                        && c.reason == "CredentialsNotFound"
                        && c.message.contains("has no key \"apiKey\"")
                })
            })
        },
    )
    .await;

    put_secret(&env, "later-credentials", &company).await;
    wait_for(&api, "later", "Ready", |a: &ClusterAccount| {
        ready(a.status.as_ref(), a, "True", Some("Authenticated"))
    })
    .await;
    env.stop().await;
}

/// A key rotated in the Secret is used without a restart: after the old key is deleted at the
/// service (unnoticed until the next resync, minutes away), writing the new key to the Secret
/// makes the account authenticate with it, and the registry's client for it is the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_key_is_picked_up_without_restart() {
    let env = env().await;
    let (old_id, old) = company_key(&env, "old").await;
    let (new_id, new) = company_key(&env, "new").await;
    put_secret(&env, "rotating", &old).await;
    create_cluster_account(&env, "rotating", "rotating").await;
    let api = cluster_accounts(&env);
    wait_key_id(&api, "rotating", old_id).await;

    env.api.delete_api_key(old_id).await.unwrap();
    put_secret(&env, "rotating", &new).await;
    wait_key_id(&api, "rotating", new_id).await;
    let registry = &env.ctx.as_ref().unwrap().accounts;
    let Resolved::Ready(handle) = registry.resolve(&AccountName::Cluster("rotating".into())) else {
        panic!("not Ready in the registry");
    };
    // The old key is gone at the service: only the new one authenticates.
    (handle.service.client())
        .list_api_keys(&ListApiKeysQuery::default())
        .await
        .expect("the registry's client uses the new key");
    env.stop().await;
}

/// A namespaced Account reads its Secret from its own namespace; the scope declared in the spec
/// is reported as declared after one page of one key is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_with_a_declared_scope() {
    let env = env().await;
    let (_, company) = company_key(&env, "team-key").await;
    put_secret(&env, "second", &company).await;
    env.sim.clear_request_log();
    let accounts: Api<Account> = env.api();
    create(
        &accounts,
        &format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: Account\nmetadata: {{name: second}}\nspec:\n  credentials: {{secretRef: {{name: second}}}}\n  apiUrl: {}\n  transmissionUrl: {}\n  scope: Company\n",
            env.sim.base_url(),
            env.sim.transmission_url()
        ),
    )
    .await;
    let a = wait_for(&accounts, "second", "Ready", |a: &Account| {
        ready(a.status.as_ref(), a, "True", Some("Authenticated"))
    })
    .await;
    let status = a.status.unwrap();
    assert_eq!(status.scope, Some(KeyScope::Company));
    assert_eq!(status.scope_source, Some(ScopeSource::Declared));
    assert_eq!(status.key_id, None, "no key list read");
    assert_eq!(service_requests(&env), ["GET /api-key?page=1&size=1"]);
    let registry = &env.ctx.as_ref().unwrap().accounts;
    assert!(matches!(
        registry.resolve(&AccountName::Namespaced {
            namespace: "default".into(),
            name: "second".into()
        }),
        Resolved::Ready(_)
    ));
    env.stop().await;
}

/// `default` resolves to the operator's flags while no ClusterAccount `default` exists (once the
/// ClusterAccount cache has listed: before, it is `Pending`); the object, once there, wins;
/// deleted, the flags serve again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_cluster_account_replaces_the_flags() {
    let env = env().await;
    let registry = env.ctx.as_ref().unwrap().accounts.clone();
    let default = AccountName::default_account();
    // Once the ClusterAccount cache has listed (before, `default` is not known to be absent).
    common::eventually(
        "the flags serve default",
        || matches!(registry.resolve(&default), Resolved::Ready(h) if h.from_flags),
    )
    .await;

    let (_, company) = company_key(&env, "default-account").await;
    put_secret(&env, "default-credentials", &company).await;
    let created = create_cluster_account(&env, "default", "default-credentials").await;
    let api = cluster_accounts(&env);
    wait_for(&api, "default", "Ready", |a: &ClusterAccount| {
        ready(a.status.as_ref(), a, "True", None)
    })
    .await;
    assert!(matches!(registry.resolve(&default), Resolved::Ready(h) if !h.from_flags));

    api.delete("default", &DeleteParams::default())
        .await
        .unwrap();
    common::wait_deleted(&api, "default", &created.metadata.uid.unwrap()).await;
    common::eventually(
        "the flags serve default again",
        || matches!(registry.resolve(&default), Resolved::Ready(h) if h.from_flags),
    )
    .await;
    env.stop().await;
}

/// An invalid namespace selector is an invalid spec, reported without any call to the service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_selector_is_an_invalid_spec() {
    let env = env().await;
    // A valid key in a Secret that exists: only the invalid selector stops the check.
    let (_, key) = company_key(&env, "picky").await;
    put_secret(&env, "picky-key", &key).await;
    env.sim.clear_request_log();
    let api = cluster_accounts(&env);
    create(
        &api,
        &format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: ClusterAccount\nmetadata: {{name: picky}}\nspec:\n  credentials: {{secretRef: {{name: picky-key}}}}\n  apiUrl: {}\n  transmissionUrl: {}\n  namespaceSelector: {{matchExpressions: [{{key: team, operator: Near, values: [a]}}]}}\n",
            env.sim.base_url(),
            env.sim.transmission_url()
        ),
    )
    .await;
    let a = wait_for(&api, "picky", "InvalidSpec", |a: &ClusterAccount| {
        ready(a.status.as_ref(), a, "False", Some("InvalidSpec"))
    })
    .await;
    let message = &ready_condition(a.status.as_ref().unwrap()).message;
    assert!(message.starts_with("spec.namespaceSelector"), "{message}");
    assert!(env.sim.request_log().is_empty());
    env.stop().await;
}

/// A cluster that has only the managed kinds' CRDs (upgraded with `helm upgrade`, which installs
/// no new CRD) keeps working: the managed kinds reconcile with the flags' account while the
/// account watches retry, and `default` resolves to the flags.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_kinds_work_without_the_account_crds() {
    let env = Env::start_with(Options {
        only_managed_crds: true,
        ..Default::default()
    })
    .await;
    let keys: Api<mailtarget_operator::crd::ApiKey> = env.api();
    create(
        &keys,
        "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: ci}\nspec: {name: ci, secretName: ci-key}\n",
    )
    .await;
    wait_for(
        &keys,
        "ci",
        "Ready",
        |k: &mailtarget_operator::crd::ApiKey| {
            k.status
                .as_ref()
                .is_some_and(|s| ready_is(k, &s.conditions, "True", None))
        },
    )
    .await;
    let registry = &env.ctx.as_ref().unwrap().accounts;
    assert!(matches!(
        registry.resolve(&AccountName::default_account()),
        Resolved::Ready(h) if h.from_flags
    ));
    env.stop().await;
}

/// An operator starting with an account and its Secret in place checks the account once: the
/// Secret watch's first list (held back here, by failing it, until that check is done) names the
/// Secret version the check read, for the generation it checked, and the reconcile it starts
/// makes no call to the service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_secret_starts_no_second_check() {
    let mut env = env().await;
    let (_, key) = company_key(&env, "once").await;
    put_secret(&env, "once", &key).await;
    create_cluster_account(&env, "once", "once").await;
    wait_for(
        &cluster_accounts(&env),
        "once",
        "Ready",
        |a: &ClusterAccount| ready(a.status.as_ref(), a, "True", None),
    )
    .await;

    // The accounts' metadata-only Secret list (not the managed Secrets' watch) fails until the
    // restarted operator has checked the account.
    let secret_list = RequestFilter {
        method: Some("GET".into()),
        path_contains: Some("/api/v1/secrets?".into()),
        header: Some((
            "accept".into(),
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1".into(),
        )),
    };
    env.server.faults().fail_next(u32::MAX, 500, secret_list);
    env.sim.clear_request_log();
    env.restart_operator().await;
    eventually("the restarted operator checked the account once", || {
        checks(&env, "ClusterAccount") == 1
    })
    .await;
    let registry = env.ctx.as_ref().unwrap().accounts.clone();
    assert!(matches!(
        registry.resolve(&AccountName::Cluster("once".into())),
        Resolved::Ready(_)
    ));
    let first = service_requests(&env);
    assert_eq!(first.len(), 1, "one key list page: {first:?}");

    env.server.faults().clear_failures();
    eventually("the Secret list started another reconcile", || {
        checks(&env, "ClusterAccount") >= 2
    })
    .await;
    assert_eq!(
        service_requests(&env),
        first,
        "a Secret seen at the version already checked started a call"
    );
    env.stop().await;
}

/// A scope found in the key list is kept while the credential stays the same: each resync then
/// makes one read of one key (the authenticated call), never the key list walk; a new key in
/// the Secret is looked up in the list again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_found_scope_is_kept_until_the_key_changes() {
    let env = Env::start_with(Options {
        resync: Duration::from_secs(1),
        detail_resync: Some(Duration::from_secs(300)),
        ..Default::default()
    })
    .await;
    let (old_id, old) = company_key(&env, "kept-old").await;
    let (new_id, new) = company_key(&env, "kept-new").await;
    put_secret(&env, "kept", &old).await;
    create_cluster_account(&env, "kept", "kept").await;
    let api = cluster_accounts(&env);
    wait_key_id(&api, "kept", old_id).await;
    eventually("the first check is counted", || {
        checks(&env, "ClusterAccount") >= 1
    })
    .await;
    let first = checks(&env, "ClusterAccount");
    env.sim.clear_request_log();
    eventually("two resyncs", || {
        checks(&env, "ClusterAccount") >= first + 2
    })
    .await;
    let reads = service_requests(&env);
    assert!(
        !reads.is_empty() && reads.iter().all(|r| r == "GET /api-key?page=1&size=1"),
        "resyncs walked the key list again: {reads:?}"
    );
    let status = api.get("kept").await.unwrap().status.unwrap();
    assert_eq!(status.scope, Some(KeyScope::Company));
    assert_eq!(status.scope_source, Some(ScopeSource::KeyList));
    assert_eq!(status.key_id, Some(old_id), "the found key is still shown");

    put_secret(&env, "kept", &new).await;
    wait_key_id(&api, "kept", new_id).await;
    env.stop().await;
}

/// Calls to the service are counted per account on `/metrics`: a 401 under the Account that
/// made it, a 429 and its retry under the ClusterAccount that made them; a deleted account's
/// series are no longer served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_calls_are_counted_per_account() {
    use mailtarget_operator::controller::readiness::{Readiness, Role};
    use mailtarget_operator::controller::server::{Health, serve};
    let env = env().await;
    let ctx = env.ctx.clone().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let health = Health {
        metrics: ctx.metrics.clone(),
        readiness: std::sync::Arc::new(Readiness::new(Role::Leader)),
    };
    let addr = serve("127.0.0.1:0".parse().unwrap(), health, async move {
        let _ = stopped.await;
    })
    .await
    .unwrap();
    let scrape = || async move {
        reqwest::get(format!("http://{addr}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    /// The value of the API request counter with `code` for `account`, if served.
    fn calls(metrics: &str, code: &str, account: &str) -> Option<u64> {
        let code = format!("code=\"{code}\"");
        let account = format!("account=\"{account}\"");
        metrics
            .lines()
            .filter(|l| {
                l.starts_with("mailtarget_api_requests_total{")
                    && l.contains("endpoint=\"GET /api-key\"")
                    && l.contains(&code)
                    && l.contains(&account)
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .reduce(|a, b| a + b)
    }

    // An Account whose key the service refuses: one 401.
    put_secret(&env, "refused", "not-a-key-of-this-company").await;
    let accounts: Api<Account> = env.api();
    let refused = create(
        &accounts,
        &format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: Account\nmetadata: {{name: refused}}\nspec:\n  credentials: {{secretRef: {{name: refused}}}}\n  apiUrl: {}\n  transmissionUrl: {}\n  scope: Company\n",
            env.sim.base_url(),
            env.sim.transmission_url()
        ),
    )
    .await;
    wait_for(&accounts, "refused", "Unauthorized", |a: &Account| {
        ready(a.status.as_ref(), a, "False", Some("Unauthorized"))
    })
    .await;

    // A ClusterAccount whose first read is answered 429, then retried.
    let (_, key) = company_key(&env, "counted").await;
    put_secret(&env, "counted", &key).await;
    env.sim.faults().fail_next(1, 429);
    create_cluster_account(&env, "counted", "counted").await;
    wait_for(
        &cluster_accounts(&env),
        "counted",
        "Ready",
        |a: &ClusterAccount| ready(a.status.as_ref(), a, "True", None),
    )
    .await;

    let metrics = scrape().await;
    assert_eq!(
        calls(&metrics, "401", "Account/default/refused"),
        Some(1),
        "{metrics}"
    );
    assert_eq!(
        calls(&metrics, "429", "ClusterAccount/counted"),
        Some(1),
        "{metrics}"
    );
    assert!(
        calls(&metrics, "200", "ClusterAccount/counted").is_some_and(|n| n >= 1),
        "{metrics}"
    );
    assert_eq!(calls(&metrics, "401", "ClusterAccount/counted"), None);
    assert_eq!(calls(&metrics, "429", "Account/default/refused"), None);

    // Deleted, the Account is no longer reported.
    accounts
        .delete("refused", &DeleteParams::default())
        .await
        .unwrap();
    common::wait_deleted(&accounts, "refused", &refused.metadata.uid.unwrap()).await;
    // Polled (bounded): the operator forgets the account when its watch reports the deletion.
    let deadline = tokio::time::Instant::now() + common::WAIT;
    while scrape()
        .await
        .contains("account=\"Account/default/refused\"")
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "a deleted account's calls are still served after {:?}",
            common::WAIT
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(calls(&scrape().await, "429", "ClusterAccount/counted").is_some());
    let _ = stop.send(());
    env.stop().await;
}
