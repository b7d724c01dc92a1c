//! Managed resources and the accounts they name (`spec.accountRef`), against the test API
//! server and the simulator: a resource is reconciled through its account's key, a namespace
//! the account does not allow makes no call at all, adoption through a ClusterAccount is the
//! right of the namespaces it names, a SubAccount needs a company key, and a resource waiting
//! for its account goes on as soon as the account is ready.

mod common;

use std::time::Duration;

use common::{Env, Options, create, ready_is, service_writes, wait_for, wait_secret_holds};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, PostParams};
use mailtarget_operator::api::CreateApiKey;
use mailtarget_operator::crd::{ApiKey, ClusterAccount, SendingDomain, SubAccount};
use mailtarget_operator::simulator::{Simulator, SimulatorConfig};
use secrecy::ExposeSecret;

/// Options whose resync is long: what happens within a test's bounded waits was started by a
/// watch event or an account change, not by the periodic resync.
fn options() -> Options {
    Options {
        resync: Duration::from_secs(300),
        ..Default::default()
    }
}

/// An environment with [`options`].
async fn env() -> Env {
    Env::start_with(options()).await
}

/// Creates namespace `name` with `labels`.
async fn namespace(env: &Env, name: &str, labels: &[(&str, &str)]) {
    common::create_namespace(&env.kube, name, labels).await;
}

/// Writes Secret `namespace/name` holding `value` under `apiKey`.
async fn put_secret(env: &Env, namespace: &str, name: &str, value: &str) {
    common::put_key_secret(&env.kube, namespace, name, value).await;
}

/// Creates ClusterAccount `name` on `sim` with its key in Secret `default/<name>-key`, the
/// spec lines `extra` added, and waits until it is Ready.
async fn cluster_account(env: &Env, sim: &Simulator, name: &str, key: &str, extra: &str) {
    put_secret(env, "default", &format!("{name}-key"), key).await;
    let api: Api<ClusterAccount> = Api::all(env.kube.clone());
    create(
        &api,
        &format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: ClusterAccount\nmetadata: {{name: {name}}}\nspec:\n  credentials: {{secretRef: {{name: {name}-key}}}}\n  apiUrl: {}\n  transmissionUrl: {}\n{extra}",
            sim.base_url(),
            sim.transmission_url()
        ),
    )
    .await;
    wait_for(&api, name, "Ready", |a: &ClusterAccount| {
        a.status
            .as_ref()
            .is_some_and(|s| ready_is(a, &s.conditions, "True", None))
    })
    .await;
}

/// The key of the second company's simulator in the tests that have one.
const SECOND_COMPANY_KEY: &str = "second-company-key";

/// Creates Account `namespace/name` of the company `sim` simulates ([`SECOND_COMPANY_KEY`], declared a company
/// key, in Secret `<name>-key` of the namespace, written first) and returns it as created.
async fn company_account(
    env: &Env,
    sim: &Simulator,
    namespace: &str,
    name: &str,
) -> mailtarget_operator::crd::Account {
    put_secret(env, namespace, &format!("{name}-key"), SECOND_COMPANY_KEY).await;
    let accounts: Api<mailtarget_operator::crd::Account> =
        Api::namespaced(env.kube.clone(), namespace);
    create(
        &accounts,
        &format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: Account\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec:\n  credentials: {{secretRef: {{name: {name}-key}}}}\n  apiUrl: {}\n  transmissionUrl: {}\n  scope: Company\n",
            sim.base_url(),
            sim.transmission_url()
        ),
    )
    .await
}

/// Waits until ApiKey `namespace/name` has `Ready` `status` with `reason`; returns it.
async fn key_ready(env: &Env, namespace: &str, name: &str, status: &str, reason: &str) -> ApiKey {
    let api: Api<ApiKey> = Api::namespaced(env.kube.clone(), namespace);
    let (status, reason) = (status.to_string(), reason.to_string());
    wait_for(
        &api,
        name,
        &format!("{status}/{reason}"),
        move |k: &ApiKey| {
            k.status
                .as_ref()
                .is_some_and(|s| ready_is(k, &s.conditions, &status, Some(&reason)))
        },
    )
    .await
}

/// The simulator's requests other than an account check (`GET /api-key?page=1&size=1`, the
/// one read that checks an account with a declared scope, which may run again when its Secret's
/// watch starts): what reconciles of managed resources asked.
fn resource_requests(sim: &Simulator) -> Vec<mailtarget_operator::simulator::RequestRecord> {
    sim.request_log()
        .into_iter()
        .filter(|r| !(r.path == "/api-key" && r.query.as_deref() == Some("page=1&size=1")))
        .collect()
}

/// The message of `Ready` of `key`.
fn ready_message(key: &ApiKey) -> String {
    key.status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

/// ApiKey `name` in `namespace`, with the spec lines `extra`.
async fn api_key(env: &Env, namespace: &str, name: &str, extra: &str) -> ApiKey {
    let api: Api<ApiKey> = Api::namespaced(env.kube.clone(), namespace);
    create(
        &api,
        &format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec:\n  secretName: {name}-key\n{extra}"
        ),
    )
    .await
}

/// A ClusterAccount with a namespace selector: a resource of a namespace it selects is created
/// through it; one of a namespace it does not select is `Stalled/AccountNotAllowed` and the
/// service receives no request at all for it, also when it names (by id or by name) an object
/// another namespace manages: it learns nothing of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_outside_the_selector_makes_no_call() {
    let env = env().await;
    namespace(&env, "team-a", &[("tenant", "true")]).await;
    namespace(&env, "team-b", &[]).await;
    cluster_account(
        &env,
        &env.sim,
        "shared",
        common::KEY,
        "  scope: Company\n  namespaceSelector: {matchLabels: {tenant: \"true\"}}\n",
    )
    .await;

    env.sim.clear_request_log();
    api_key(&env, "team-b", "app", "  accountRef: {name: shared}\n").await;
    let refused = key_ready(&env, "team-b", "app", "False", "AccountNotAllowed").await;
    let message = ready_message(&refused);
    assert!(
        message.contains("ClusterAccount \"shared\"") && message.contains("\"team-b\""),
        "{message}"
    );
    let for_resources = resource_requests(&env.sim);
    assert!(
        for_resources.is_empty(),
        "no request for a refused namespace: {for_resources:?}"
    );

    api_key(&env, "team-a", "app", "  accountRef: {name: shared}\n").await;
    let made = key_ready(&env, "team-a", "app", "True", "Available").await;
    let id = made.status.unwrap().id.unwrap();
    assert!(env.sim.snapshot().api_keys.iter().any(|k| k.id == id));
    // Still nothing for team-b: team-a's key is the only one created.
    let refused = key_ready(&env, "team-b", "app", "False", "AccountNotAllowed").await;
    assert!(refused.status.unwrap().id.is_none());
    // A refused namespace learns nothing of what others manage through the account: naming
    // team-a's key by id, or by name, is the same refusal, not a conflict with its owner.
    let keys: Api<ApiKey> = Api::namespaced(env.kube.clone(), "team-b");
    create(
        &keys,
        &format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: by-id\n  namespace: team-b\n  annotations: {{mailtarget.co/external-id: \"{id}\"}}\nspec:\n  accountRef: {{name: shared}}\n  secretName: by-id-key\n"
        ),
    )
    .await;
    key_ready(&env, "team-b", "by-id", "False", "AccountNotAllowed").await;
    let by_name = "  name: app\n  accountRef: {name: shared}\n";
    api_key(&env, "team-b", "by-name", by_name).await;
    key_ready(&env, "team-b", "by-name", "False", "AccountNotAllowed").await;
    assert_eq!(
        service_writes(&env.sim).len(),
        1,
        "{:?}",
        service_writes(&env.sim)
    );
    env.stop().await;
}

/// An ApiKey naming an Account of its namespace is created at that account's company (a second
/// simulator), not the default's; an ApiKey of the same name through `default` in the same
/// namespace is another object of another company: no conflict between the two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_is_created_through_the_account_it_names() {
    let env = env().await;
    let second = Simulator::start(SimulatorConfig::new(SECOND_COMPANY_KEY))
        .await
        .unwrap();
    namespace(&env, "team-a", &[]).await;
    company_account(&env, &second, "team-a", "billing").await;
    env.sim.clear_request_log();

    api_key(
        &env,
        "team-a",
        "mail",
        "  name: mail\n  accountRef: {kind: Account, name: billing}\n",
    )
    .await;
    api_key(&env, "team-a", "mail-default", "  name: mail\n").await;
    let through_billing = key_ready(&env, "team-a", "mail", "True", "Available").await;
    key_ready(&env, "team-a", "mail-default", "True", "Available").await;

    let id = through_billing.status.unwrap().id.unwrap();
    let at_second = second.snapshot();
    let made = at_second
        .api_keys
        .iter()
        .find(|k| k.id == id && k.name == "mail")
        .expect("the key at the second company");
    let secrets: Api<Secret> = Api::namespaced(env.kube.clone(), "team-a");
    wait_secret_holds(
        &secrets,
        "mail-key",
        "apiKey",
        &made.key,
        "the second company's key value",
    )
    .await;
    let creates_at_default: Vec<_> = service_writes(&env.sim)
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect();
    assert_eq!(
        creates_at_default.len(),
        1,
        "only mail-default's key is created at the default company: {creates_at_default:?}"
    );
    env.stop().await;
}

/// A resource naming an account that does not exist waits (`Reconciling/AccountNotReady`,
/// no call); once the account is created and checked, the resource goes on at once (the
/// resync is 5 minutes away: the account's change started it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_waits_for_its_account_and_goes_on_when_ready() {
    let env = env().await;
    env.sim.clear_request_log();
    api_key(&env, "default", "early", "  accountRef: {name: later}\n").await;
    let waiting = key_ready(&env, "default", "early", "False", "AccountNotReady").await;
    assert!(
        ready_message(&waiting).contains("ClusterAccount \"later\" does not exist"),
        "{}",
        ready_message(&waiting)
    );
    assert!(resource_requests(&env.sim).is_empty());

    cluster_account(&env, &env.sim, "later", common::KEY, "  scope: Company\n").await;
    key_ready(&env, "default", "early", "True", "Available").await;
    env.stop().await;
}

/// Sub account `team` (created with its key `team-operator`) and ClusterAccount `team` holding
/// that key (declared `scope: SubAccount`), Ready; the sub account and the key's value.
async fn team_account(env: &Env) -> (mailtarget_operator::api::SubAccountDetail, String) {
    let team = common::sub_account_with_key(&env.api, "team", "team-operator").await;
    let key = team.api_keys[0].key.expose_secret().to_string();
    cluster_account(env, &env.sim, "team", &key, "  scope: SubAccount\n").await;
    (team, key)
}

/// A SubAccount through an account whose key is a sub account key is
/// `Stalled/AccountScopeInsufficient`, with no write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_account_needs_a_company_key() {
    let env = env().await;
    team_account(&env).await;
    env.sim.clear_request_log();

    let subs: Api<SubAccount> = env.api();
    create(
        &subs,
        "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: nested}\nspec:\n  accountRef: {name: team}\n",
    )
    .await;
    let refused = wait_for(
        &subs,
        "nested",
        "AccountScopeInsufficient",
        |s: &SubAccount| {
            s.status.as_ref().is_some_and(|st| {
                ready_is(s, &st.conditions, "False", Some("AccountScopeInsufficient"))
            })
        },
    )
    .await;
    assert!(refused.status.unwrap().id.is_none());
    assert!(resource_requests(&env.sim).is_empty());
    env.stop().await;
}

/// Through an account whose key is a sub account's, an ApiKey's name is looked up where its
/// keys are (that sub account), as through a company key among the company's: an existing key
/// of the same name is found (`AlreadyExists` without an adoption policy, no write), never
/// created a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_through_a_sub_account_key_are_found() {
    let env = env().await;
    let (team, key) = team_account(&env).await;
    let team_client = env.api.calling_as(key.clone().into()).unwrap();
    let existing = team_client
        .create_api_key(&CreateApiKey {
            name: Some("app".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(existing.sub_account_id, team.id);
    env.sim.clear_request_log();
    api_key(&env, "default", "app", "  accountRef: {name: team}\n").await;
    key_ready(&env, "default", "app", "False", "AlreadyExists").await;
    assert!(
        service_writes(&env.sim).is_empty(),
        "{:?}",
        service_writes(&env.sim)
    );
    env.stop().await;
}

/// Adoption through a ClusterAccount without `adoptionNamespaceSelector` is the operator
/// namespace's right only: a tenant's ApiKey asking to adopt an existing key (by name with the
/// adoption policy, or by external-id) is `Stalled/AdoptionNotAllowed` with no call and no
/// Secret, and holds no claim against the same ApiKey in the operator's namespace, which adopts
/// it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adoption_is_the_right_of_the_namespaces_the_account_names() {
    let env = env().await;
    namespace(&env, "a-tenant", &[]).await;
    let existing = env
        .api
        .create_api_key(&CreateApiKey {
            name: Some("shared".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    cluster_account(&env, &env.sim, "default", common::KEY, "  scope: Company\n").await;
    env.sim.clear_request_log();

    let by_name = "  name: shared\n";
    let api: Api<ApiKey> = Api::namespaced(env.kube.clone(), "a-tenant");
    let policy = "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: by-name\n  namespace: a-tenant\n  annotations: {mailtarget.co/adoption-policy: Adopt}\nspec: {name: shared, secretName: by-name-key}\n";
    create(&api, policy).await;
    let external = format!(
        "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: by-id\n  namespace: a-tenant\n  annotations: {{mailtarget.co/external-id: \"{}\"}}\nspec: {{name: other, secretName: by-id-key}}\n",
        existing.id
    );
    create(&api, &external).await;
    for name in ["by-name", "by-id"] {
        let refused = key_ready(&env, "a-tenant", name, "False", "AdoptionNotAllowed").await;
        assert!(refused.status.unwrap().id.is_none(), "{name}");
    }
    assert!(resource_requests(&env.sim).is_empty());
    let secrets: Api<Secret> = Api::namespaced(env.kube.clone(), "a-tenant");
    for name in ["by-name-key", "by-id-key"] {
        assert!(secrets.get_opt(name).await.unwrap().is_none(), "{name}");
    }

    // The tenant's refused ApiKey is older (or as old, and its namespace sorts first): were it
    // a rival, it would hold the claim on "shared" and the adopter would be ConflictingOwner.
    let own: Api<ApiKey> = env.api();
    create(
        &own,
        &format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: adopter\n  annotations: {{mailtarget.co/adoption-policy: Adopt}}\nspec:\n  secretName: adopter-key\n{by_name}"
        ),
    )
    .await;
    let adopted = key_ready(&env, "default", "adopter", "True", "Available").await;
    assert_eq!(adopted.status.unwrap().id, Some(existing.id));
    assert!(
        service_writes(&env.sim).is_empty(),
        "adoption writes nothing"
    );
    env.stop().await;
}

/// A namespace reaches into no sub account by observing it. An `ObserveOnly` SubAccount does
/// not own its sub account, so placing objects inside it uses an object the namespace did not
/// create: an adoption. Through a ClusterAccount that does not let namespace `a-tenant` adopt,
/// its SubAccount observing the sub account another namespace's SubAccount manages hosts
/// nothing (`ConflictingOwner`), nor one observing a sub account no resource manages
/// (`AdoptionNotAllowed`): an ApiKey and a SendingDomain placed inside either are refused with
/// no write and no Secret (they were created inside with the sub account's credential, their
/// key value and DKIM private key written to the tenant's Secrets).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observing_a_sub_account_reaches_nothing_inside_it() {
    let env = env().await;
    namespace(&env, "a-tenant", &[]).await;
    namespace(&env, "owners", &[]).await;
    cluster_account(&env, &env.sim, "default", common::KEY, "  scope: Company\n").await;
    let owners: Api<SubAccount> = Api::namespaced(env.kube.clone(), "owners");
    let owned = "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: owned, namespace: owners}\nspec: {}\n";
    create(&owners, owned).await;
    ready::<SubAccount>(&env, "owners", "owned", "True", "Available").await;
    common::sub_account_with_key(&env.api, "loose", "loose-first").await;
    env.sim.clear_request_log();

    let subs: Api<SubAccount> = Api::namespaced(env.kube.clone(), "a-tenant");
    let observers = [
        (
            "spy-owned",
            "owned",
            "mailtarget-operator",
            "ConflictingOwner",
        ),
        ("spy-loose", "loose", "loose-first", "AdoptionNotAllowed"),
    ];
    for (name, observed, credential, _) in observers {
        let yaml = format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {{name: {name}, namespace: a-tenant}}\nspec: {{name: {observed}, managementPolicy: ObserveOnly, credentialKeyName: {credential}}}\n"
        );
        create(&subs, &yaml).await;
        ready::<SubAccount>(&env, "a-tenant", name, "True", "Observed").await;
    }
    let domains: Api<SendingDomain> = Api::namespaced(env.kube.clone(), "a-tenant");
    for (sub, _, _, reason) in observers {
        let inside = format!("  subAccountRef: {{name: {sub}}}\n");
        api_key(&env, "a-tenant", &format!("{sub}-key"), &inside).await;
        let domain = format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata: {{name: {sub}-mail, namespace: a-tenant}}\nspec:\n  domain: {sub}.example.com\n  dkimPrivateKeySecretName: {sub}-dkim\n{inside}"
        );
        create(&domains, &domain).await;
        let key = key_ready(&env, "a-tenant", &format!("{sub}-key"), "False", reason).await;
        // The SubAccount that manages it is another namespace's: not named.
        let said = ready_message(&key);
        assert!(!said.contains("owners"), "{said}");
        assert!(key.status.unwrap().id.is_none(), "{sub}");
        let mail = format!("{sub}-mail");
        ready::<SendingDomain>(&env, "a-tenant", &mail, "False", reason).await;
    }
    assert!(
        service_writes(&env.sim).is_empty(),
        "{:?}",
        service_writes(&env.sim)
    );
    let secrets: Api<Secret> = Api::namespaced(env.kube.clone(), "a-tenant");
    for (sub, _, _, _) in observers {
        for name in [format!("{sub}-key-key"), format!("{sub}-dkim")] {
            assert!(secrets.get_opt(&name).await.unwrap().is_none(), "{name}");
        }
    }

    // The operator's namespace may adopt through the account: its SubAccount observing the
    // sub account no resource manages hosts a new key.
    let inside = key_inside_observed(&env, "loose", "  credentialKeyName: loose-first\n").await;
    assert!(inside.is_some_and(|id| id != 0), "inside the sub account");
    env.stop().await;
}

/// Creates, in the operator's namespace, SubAccount `watch` observing sub account `name` (with
/// the spec lines `extra`) and ApiKey `inside` placed inside it; waits until the key is
/// Ready/Available and returns the sub account it is in (`status.subAccountId`).
async fn key_inside_observed(env: &Env, name: &str, extra: &str) -> Option<i64> {
    let platform: Api<SubAccount> = env.api();
    let watch = format!(
        "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {{name: watch}}\nspec:\n  name: {name}\n  managementPolicy: ObserveOnly\n{extra}"
    );
    create(&platform, &watch).await;
    ready::<SubAccount>(env, "default", "watch", "True", "Observed").await;
    api_key(env, "default", "inside", "  subAccountRef: {name: watch}\n").await;
    let made = key_ready(env, "default", "inside", "True", "Available").await;
    made.status.unwrap().sub_account_id
}

/// A SubAccount its account refuses outright (its namespace left the account's
/// `namespaceSelector` after it created its sub account) holds no claim on the sub account it
/// recorded: the operator's namespace, which may adopt through the account, observes that sub
/// account and places a key inside it. Were the refused SubAccount a rival, the key would be
/// `ConflictingOwner`, and a namespace the account no longer serves would still block others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_sub_account_holds_no_claim_on_what_it_recorded() {
    use k8s_openapi::api::core::v1::Namespace;
    let env = env().await;
    namespace(&env, "owners", &[("tenant", "served")]).await;
    let selector = "  namespaceSelector: {matchExpressions: [{key: tenant, operator: NotIn, values: [refused]}]}\n";
    let extra = format!("  scope: Company\n{selector}");
    cluster_account(&env, &env.sim, "default", common::KEY, &extra).await;
    let owners: Api<SubAccount> = Api::namespaced(env.kube.clone(), "owners");
    let owned = "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: owned, namespace: owners}\nspec: {}\n";
    create(&owners, owned).await;
    let made = ready::<SubAccount>(&env, "owners", "owned", "True", "Available").await;
    let id = made.status.unwrap().id.unwrap();

    let namespaces: Api<Namespace> = Api::all(env.kube.clone());
    let relabel = serde_json::json!({"metadata": {"labels": {"tenant": "refused"}}});
    namespaces
        .patch("owners", &PatchParams::default(), &Patch::Merge(&relabel))
        .await
        .unwrap();
    let refused = ready::<SubAccount>(&env, "owners", "owned", "False", "AccountNotAllowed").await;
    assert_eq!(refused.status.unwrap().id, Some(id), "its record stays");

    assert_eq!(key_inside_observed(&env, "owned", "").await, Some(id));
    env.stop().await;
}

/// `spec.accountRef` cannot change once set, nor be set on a resource made without it (unless
/// to the default it already has): the API server refuses the update.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_account_of_a_resource_is_immutable() {
    let env = env().await;
    let keys: Api<ApiKey> = env.api();
    api_key(&env, "default", "fixed", "").await;
    let patch = |account: serde_json::Value| {
        let keys = keys.clone();
        async move {
            keys.patch(
                "fixed",
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"spec": {"accountRef": account}})),
            )
            .await
        }
    };
    patch(serde_json::json!({"name": "default"}))
        .await
        .expect("writing out the default is no change");
    let refused = patch(serde_json::json!({"name": "other"}))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("a refusal from the API server: {refused}")
    };
    assert_eq!(status.code, 422);
    assert!(
        status.message.contains("spec.accountRef is immutable"),
        "{}",
        status.message
    );
    env.stop().await;
}

/// Upgrade: an ApiKey of a tenant namespace that adopted (or created) its key under
/// `adoption-policy: AdoptOrCreate` through the flags' `default` keeps it when the ClusterAccount
/// `default` (adoption: the operator's namespace only) appears: owning is not adopting again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owned_object_stays_owned_when_adoption_is_restricted() {
    let env = env().await;
    namespace(&env, "team-a", &[]).await;
    let api: Api<ApiKey> = Api::namespaced(env.kube.clone(), "team-a");
    create(
        &api,
        "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: app\n  namespace: team-a\n  annotations: {mailtarget.co/adoption-policy: AdoptOrCreate}\nspec: {secretName: app-key}\n",
    )
    .await;
    let owned = key_ready(&env, "team-a", "app", "True", "Available").await;
    let id = owned.status.unwrap().id;
    assert!(id.is_some());

    env.sim.clear_request_log();
    cluster_account(&env, &env.sim, "default", common::KEY, "  scope: Company\n").await;
    // The account's change reconciles the key again (its first read through the new account's
    // lists); it must stay Ready on its object.
    common::eventually("the key reconciled through the new default", || {
        resource_requests(&env.sim)
            .iter()
            .any(|r| r.method == "GET" && r.path == "/api-key")
    })
    .await;
    let key = key_ready(&env, "team-a", "app", "True", "Available").await;
    assert_eq!(key.status.unwrap().id, id);
    env.stop().await;
}

/// `accountRef: null` (the field is optional) is the default account, and later updates of
/// the resource are accepted (a transition rule must not fail on a null value).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_null_account_ref_is_the_default() {
    let env = env().await;
    let keys: Api<ApiKey> = env.api();
    api_key(&env, "default", "nulled", "  accountRef: null\n").await;
    key_ready(&env, "default", "nulled", "True", "Available").await;
    keys.patch(
        "nulled",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"labels": {"team": "a"}}})),
    )
    .await
    .expect("an update of a resource whose accountRef is null");
    env.stop().await;
}

/// Deleting a resource deletes its object through the account it names; while that account
/// cannot be used (its credentials Secret gone), the deletion waits with the finalizer in
/// place and says why in `Ready`, and completes once the Secret is back. An Account in use
/// carries the in-use finalizer: deleting it leaves it in place (`Deleting`, naming the
/// resource that uses it, which gets no new work through it) until that resource is deleted
/// through it; then it goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_goes_through_the_named_account_and_waits_for_it() {
    let env = env().await;
    let second = Simulator::start(SimulatorConfig::new(SECOND_COMPANY_KEY))
        .await
        .unwrap();
    let accounts: Api<mailtarget_operator::crd::Account> = env.api();
    let made = company_account(&env, &second, "default", "billing").await;
    let through = "  accountRef: {kind: Account, name: billing}\n";
    api_key(&env, "default", "gone", through).await;
    let key = key_ready(&env, "default", "gone", "True", "Available").await;
    let id = key.status.as_ref().unwrap().id.unwrap();
    wait_for(&accounts, "billing", "in use", in_use).await;

    let secrets: Api<Secret> = env.api();
    secrets
        .delete("billing-key", &Default::default())
        .await
        .unwrap();
    // The operator has seen the account fail (its Secret watch may lag the API server): the
    // key, reconciled as a dependent of the account, says so before its deletion starts.
    key_ready(&env, "default", "gone", "False", "AccountNotReady").await;
    let keys: Api<ApiKey> = env.api();
    keys.delete("gone", &Default::default()).await.unwrap();
    let waiting = key_ready(&env, "default", "gone", "False", "AccountNotReady").await;
    assert!(waiting.metadata.deletion_timestamp.is_some());
    let message = ready_message(&waiting);
    assert!(
        message.contains("deleting the object at the service failed"),
        "the deletion was tried and waits: {message}"
    );
    assert!(second.snapshot().api_keys.iter().any(|k| k.id == id));

    put_secret(&env, "default", "billing-key", SECOND_COMPANY_KEY).await;
    common::wait_deleted(&keys, "gone", key.metadata.uid.as_deref().unwrap()).await;
    assert!(!second.snapshot().api_keys.iter().any(|k| k.id == id));
    wait_for(&accounts, "billing", "no longer in use", |a| !in_use(a)).await;

    // Deleting the Account while a key uses it: the Account stays until the key is gone.
    api_key(&env, "default", "last", through).await;
    let last = key_ready(&env, "default", "last", "True", "Available").await;
    let last_id = last.status.as_ref().unwrap().id.unwrap();
    wait_for(&accounts, "billing", "in use", in_use).await;
    accounts
        .delete("billing", &Default::default())
        .await
        .unwrap();
    let deleting = wait_for(&accounts, "billing", "Deleting", |a| {
        a.status
            .as_ref()
            .is_some_and(|s| ready_is(a, &s.conditions, "False", Some("Deleting")))
    })
    .await;
    let message = (deleting.status.unwrap().conditions.into_iter())
        .find(|c| c.type_ == "Ready")
        .unwrap()
        .message;
    assert!(message.contains("ApiKey default/last"), "{message}");
    let refused = key_ready(&env, "default", "last", "False", "AccountNotReady").await;
    assert!(ready_message(&refused).contains("is being deleted"));
    keys.delete("last", &Default::default()).await.unwrap();
    common::wait_deleted(&keys, "last", last.metadata.uid.as_deref().unwrap()).await;
    assert!(!second.snapshot().api_keys.iter().any(|k| k.id == last_id));
    common::wait_deleted(&accounts, "billing", made.metadata.uid.as_deref().unwrap()).await;
    assert!(
        service_writes(&env.sim).is_empty(),
        "nothing written at the default company"
    );
    env.stop().await;
}

/// True when Account `a` carries the in-use finalizer.
fn in_use(a: &mailtarget_operator::crd::Account) -> bool {
    use kube::ResourceExt;
    a.finalizers().iter().any(|f| f == "mailtarget.co/in-use")
}

/// The create-pending marker is trusted only as the operator wrote it: a user who writes one
/// onto a new ApiKey (to pass an existing company key off as a create of its own after a crash)
/// gets `AlreadyExists`, no write, no Secret; deleting that ApiKey leaves the key alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_create_pending_marker_adopts_nothing() {
    let env = env().await;
    let existing = env
        .api
        .create_api_key(&CreateApiKey {
            name: Some("prod-mailer".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    env.sim.clear_request_log();
    let keys: Api<ApiKey> = env.api();
    create(
        &keys,
        "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: forged\n  annotations: {mailtarget.co/create-pending: \"2026-11-24T00:00:00Z\"}\nspec: {name: prod-mailer, secretName: forged-key}\n",
    )
    .await;
    let refused = key_ready(&env, "default", "forged", "False", "AlreadyExists").await;
    assert!(refused.status.as_ref().unwrap().id.is_none());
    assert!(service_writes(&env.sim).is_empty());
    let secrets: Api<Secret> = env.api();
    assert!(secrets.get_opt("forged-key").await.unwrap().is_none());

    keys.delete("forged", &Default::default()).await.unwrap();
    common::wait_deleted(&keys, "forged", refused.metadata.uid.as_deref().unwrap()).await;
    assert!(
        env.sim
            .snapshot()
            .api_keys
            .iter()
            .any(|k| k.id == existing.id),
        "the company's key survives"
    );
    env.stop().await;
}

/// The operator's `--default-adoption-policy` applies only where the account lets the
/// namespace adopt, Secrets included: a tenant's ApiKey (through a ClusterAccount without
/// `adoptionNamespaceSelector`) naming a Secret the user wrote is `Stalled/SecretConflict`, with
/// no write to the service, and the Secret keeps its data and gets no owner (with an owner, it
/// would be deleted with the ApiKey).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_adoption_policy_takes_over_no_secret_where_adoption_is_not_allowed() {
    let env = Env::start_with(Options {
        default_adoption_policy: Some(mailtarget_operator::crd::AdoptionPolicy::AdoptOrCreate),
        ..options()
    })
    .await;
    namespace(&env, "tenant", &[]).await;
    cluster_account(&env, &env.sim, "default", common::KEY, "  scope: Company\n").await;
    let secrets: Api<Secret> = Api::namespaced(env.kube.clone(), "tenant");
    let mine: Secret = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "app-key", "namespace": "tenant"},
        "stringData": {"note": "keep me"},
    }))
    .unwrap();
    secrets.create(&PostParams::default(), &mine).await.unwrap();
    env.sim.clear_request_log();

    api_key(&env, "tenant", "app", "").await;
    key_ready(&env, "tenant", "app", "False", "SecretConflict").await;
    let kept = secrets.get("app-key").await.unwrap();
    let data = kept.data.unwrap_or_default();
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        ["note"],
        "the user's data only"
    );
    assert!(kept.metadata.owner_references.is_none(), "no owner added");
    assert!(
        service_writes(&env.sim).is_empty(),
        "{:?}",
        service_writes(&env.sim)
    );

    // In the operator's namespace, which may adopt through the account, the default policy
    // takes the Secret over, as documented: the key is written beside the user's data.
    let own: Api<Secret> = env.api();
    let mine: Secret = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "app-key"},
        "stringData": {"note": "keep me"},
    }))
    .unwrap();
    own.create(&PostParams::default(), &mine).await.unwrap();
    api_key(&env, "default", "app", "").await;
    key_ready(&env, "default", "app", "True", "Available").await;
    let taken = own.get("app-key").await.unwrap();
    let data = taken.data.unwrap_or_default();
    assert!(
        data.contains_key("apiKey") && data.contains_key("note"),
        "{:?}",
        data.keys()
    );
    assert!(taken.metadata.owner_references.is_some(), "owned now");
    env.stop().await;
}

/// A proxy to a simulator that answers the key value `value` holds (when set) in place of the
/// real one in every single-key answer (`POST /api-key`, `/api-key/{id}`): a service of the
/// tenant's own choosing, behind an Account whose `apiUrl` a tenant may set.
#[derive(Clone)]
struct ChosenValue {
    upstream: String,
    http: reqwest::Client,
    value: std::sync::Arc<std::sync::Mutex<Option<String>>>,
}

async fn forward_with_chosen_value(
    axum::extract::State(p): axum::extract::State<ChosenValue>,
    request: axum::extract::Request,
) -> axum::response::Response {
    let (parts, status, mut bytes) = common::forward(&p.http, &p.upstream, request).await;
    let single_key = parts.uri.path().starts_with("/api-key")
        && (parts.method == "POST" || parts.uri.path() != "/api-key");
    let chosen = p.value.lock().unwrap().clone();
    if let (true, true, Some(chosen)) = (single_key, status.is_success(), chosen) {
        let mut doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        doc["key"] = serde_json::Value::String(chosen);
        bytes = serde_json::to_vec(&doc).unwrap();
    }
    common::json_answer(status, bytes)
}

/// A tenant cannot sign a create-pending marker with the operator's Secret digest. The tenant
/// points an Account of its namespace at a service of its choosing, which answers a key whose
/// value is the very text a pending marker's MAC covers (its victim ApiKey's UID and a time):
/// the operator writes that value into the tenant's Secret with its keyed digest beside it.
/// Copied into a `mailtarget.co/create-pending` marker on the victim, which names a company
/// key the tenant may not adopt, that digest must not pass for the operator's marker: the
/// victim stays `AlreadyExists`, with no Secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_digest_signs_no_pending_marker() {
    let env = env().await;
    namespace(&env, "tenant", &[]).await;
    env.api
        .create_api_key(&CreateApiKey {
            name: Some("prod-mailer".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    cluster_account(&env, &env.sim, "default", common::KEY, "  scope: Company\n").await;
    let second = Simulator::start(SimulatorConfig::new(SECOND_COMPANY_KEY))
        .await
        .unwrap();
    let proxy = ChosenValue {
        upstream: second.base_url().trim_end_matches('/').to_string(),
        http: reqwest::Client::new(),
        value: Default::default(),
    };
    let app = axum::Router::new()
        .fallback(forward_with_chosen_value)
        .with_state(proxy.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    put_secret(&env, "tenant", "own-key", SECOND_COMPANY_KEY).await;
    let accounts: Api<mailtarget_operator::crd::Account> =
        Api::namespaced(env.kube.clone(), "tenant");
    create(
        &accounts,
        &format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: Account\nmetadata: {{name: own, namespace: tenant}}\nspec:\n  credentials: {{secretRef: {{name: own-key}}}}\n  apiUrl: {address}\n  transmissionUrl: {address}\n  scope: Company\n"
        ),
    )
    .await;

    api_key(&env, "tenant", "victim", "  name: prod-mailer\n").await;
    let victim = key_ready(&env, "tenant", "victim", "False", "AlreadyExists").await;
    let uid = victim.metadata.uid.clone().unwrap();
    let time = "2026-11-24T00:00:00Z";
    let signed = format!("mailtarget-operator/create-pending/v1\0{uid}\0{time}");
    *proxy.value.lock().unwrap() = Some(signed.clone());
    let bait = "  accountRef: {kind: Account, name: own}\n";
    api_key(&env, "tenant", "bait", bait).await;
    key_ready(&env, "tenant", "bait", "True", "Available").await;
    let secrets: Api<Secret> = Api::namespaced(env.kube.clone(), "tenant");
    let written = secrets.get("bait-key").await.unwrap();
    assert_eq!(
        written.data.unwrap()["apiKey"].0,
        signed.as_bytes(),
        "the chosen value is written"
    );
    let digest = written.metadata.annotations.unwrap()["mailtarget.co/data-digest"].clone();

    env.sim.clear_request_log();
    let keys: Api<ApiKey> = Api::namespaced(env.kube.clone(), "tenant");
    // The spec change bumps the generation: the Ready condition computed for it comes from a
    // reconcile that saw the marker.
    let forged = serde_json::json!({
        "metadata": {"annotations": {"mailtarget.co/create-pending": format!("{time} {digest}")}},
        "spec": {"deletionPolicy": "Orphan"},
    });
    keys.patch("victim", &PatchParams::default(), &Patch::Merge(&forged))
        .await
        .unwrap();
    let victim = key_ready(&env, "tenant", "victim", "False", "AlreadyExists").await;
    assert_eq!(victim.metadata.generation, Some(2));
    assert!(victim.status.unwrap().id.is_none());
    assert!(secrets.get_opt("victim-key").await.unwrap().is_none());
    assert!(service_writes(&env.sim).is_empty());
    env.stop().await;
}

/// Creates every SubAccount, ApiKey and SendingDomain of the example file
/// `examples/tenants/<file>` (its Namespaces are created by the test).
async fn apply_example(env: &Env, file: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/tenants")
        .join(file);
    let text = std::fs::read_to_string(path).unwrap();
    for doc in text.split("\n---\n") {
        let value: serde_yaml::Value = serde_yaml::from_str(doc).unwrap();
        let namespace = value["metadata"]["namespace"].as_str().unwrap_or("default");
        match value["kind"].as_str().unwrap() {
            "SubAccount" => {
                create(
                    &Api::<SubAccount>::namespaced(env.kube.clone(), namespace),
                    doc,
                )
                .await;
            }
            "ApiKey" => {
                create(&Api::<ApiKey>::namespaced(env.kube.clone(), namespace), doc).await;
            }
            "SendingDomain" => {
                let api = Api::<SendingDomain>::namespaced(env.kube.clone(), namespace);
                create(&api, doc).await;
            }
            other => panic!("unexpected kind {other}"),
        }
    }
}

/// Waits until the `Ready` condition of `namespace/name` of kind `K` has `status` and
/// `reason`.
async fn ready<K>(env: &Env, namespace: &str, name: &str, status: &str, reason: &str) -> K
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    K: mailtarget_operator::engine::ManagedResource,
{
    let api: Api<K> = Api::namespaced(env.kube.clone(), namespace);
    let (status, reason) = (status.to_string(), reason.to_string());
    wait_for(&api, name, &format!("{status}/{reason}"), move |r: &K| {
        let s = mailtarget_operator::engine::ManagedResource::last_status(r);
        ready_is(
            r,
            mailtarget_operator::engine::ManagedStatus::conditions(&s),
            &status,
            Some(&reason),
        )
    })
    .await
}

/// Two tenants, as `examples/tenants/` declares them: SubAccounts in the platform namespace,
/// each team's domain and keys in its own namespace, created inside its own sub account with
/// that sub account's credential (`subAccountId` at the service), the keys' values in the
/// team's Secrets. Then team a tries to reach team b's objects: by referencing team b's
/// SubAccount (`ReferenceNotAllowed`, no call), by team b's key id inside its own sub account
/// (even with an adoption policy: not found), by team b's domain name (`AlreadyExists`): no
/// write, no Secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tenant_works_inside_its_own_sub_account() {
    let env = env().await;
    for ns in ["platform", "team-a", "team-b"] {
        namespace(&env, ns, &[]).await;
    }
    apply_example(&env, "10-platform.yaml").await;
    apply_example(&env, "20-team-a.yaml").await;
    apply_example(&env, "20-team-b.yaml").await;
    for sub in ["tenant-a", "tenant-b"] {
        let s: SubAccount = ready(&env, "platform", sub, "True", "Available").await;
        let credential = s.status.unwrap().credential.expect("credential shown");
        assert_eq!(credential.name, "mailtarget-operator");
    }
    for team in ["team-a", "team-b"] {
        ready::<ApiKey>(&env, team, "sender", "True", "Available").await;
        ready::<ApiKey>(&env, team, "analytics", "True", "Available").await;
        ready::<SendingDomain>(&env, team, "mail", "True", "Verified").await;
    }
    let state = env.sim.snapshot();
    for team in ["a", "b"] {
        let sub = (state.sub_accounts.iter())
            .find(|s| s.name == format!("tenant-{team}"))
            .unwrap();
        let mut inside: Vec<&str> = (state.api_keys.iter())
            .filter(|k| k.sub_account_id == sub.id)
            .map(|k| k.name.as_str())
            .collect();
        inside.sort_unstable();
        let (analytics, sender) = (
            format!("team-{team}-analytics"),
            format!("team-{team}-sender"),
        );
        assert_eq!(
            inside,
            ["mailtarget-operator", analytics.as_str(), sender.as_str()]
        );
        let domain = (state.sending_domains.iter())
            .find(|d| d.domain == format!("mail.team-{team}.example.com"))
            .unwrap();
        assert_eq!(domain.sub_account_id, sub.id, "team {team}'s domain inside");
        let value = (state.api_keys.iter()).find(|k| k.name == sender).unwrap();
        let secrets: Api<Secret> = Api::namespaced(env.kube.clone(), &format!("team-{team}"));
        let what = format!("team {team}'s sender key");
        wait_secret_holds(&secrets, "sender-key", "apiKey", &value.key, &what).await;
    }
    let theirs = (state.api_keys.iter())
        .find(|k| k.name == "team-b-sender")
        .unwrap()
        .id;

    env.sim.clear_request_log();
    api_key(
        &env,
        "team-a",
        "reach",
        "  subAccountRef: {name: tenant-b, namespace: platform}\n",
    )
    .await;
    let refused = key_ready(&env, "team-a", "reach", "False", "ReferenceNotAllowed").await;
    assert!(ready_message(&refused).contains("spec.allowedNamespaces"));
    // A SubAccount of another namespace that does not exist reads the same: names cannot be
    // probed.
    api_key(
        &env,
        "team-a",
        "probe",
        "  subAccountRef: {name: nobody, namespace: platform}\n",
    )
    .await;
    let probed = key_ready(&env, "team-a", "probe", "False", "ReferenceNotAllowed").await;
    assert_eq!(
        ready_message(&probed).replace("nobody", "tenant-b"),
        ready_message(&refused)
    );
    let asked = resource_requests(&env.sim);
    assert!(
        asked.is_empty(),
        "no call for a refused reference: {asked:?}"
    );

    let keys: Api<ApiKey> = Api::namespaced(env.kube.clone(), "team-a");
    create(
        &keys,
        &format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: stolen\n  namespace: team-a\n  annotations: {{mailtarget.co/external-id: \"{theirs}\", mailtarget.co/adoption-policy: Adopt}}\nspec:\n  subAccountRef: {{name: tenant-a, namespace: platform}}\n  secretName: stolen-key\n"
        ),
    )
    .await;
    let stolen = key_ready(&env, "team-a", "stolen", "False", "ExternalObjectNotFound").await;
    assert!(stolen.status.unwrap().id.is_none());
    let domains: Api<SendingDomain> = Api::namespaced(env.kube.clone(), "team-a");
    create(
        &domains,
        "apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata: {name: taken, namespace: team-a}\nspec:\n  domain: mail.team-b.example.com\n  subAccountRef: {name: tenant-a, namespace: platform}\n  dkimPrivateKeySecretName: taken-dkim\n",
    )
    .await;
    ready::<SendingDomain>(&env, "team-a", "taken", "False", "AlreadyExists").await;
    assert!(
        service_writes(&env.sim).is_empty(),
        "{:?}",
        service_writes(&env.sim)
    );
    let secrets: Api<Secret> = Api::namespaced(env.kube.clone(), "team-a");
    for name in ["reach-key", "probe-key", "stolen-key", "taken-dkim"] {
        assert!(
            secrets.get_opt(name).await.unwrap().is_none(),
            "no Secret {name}"
        );
    }
    env.stop().await;
}

/// The shared-cluster setup the docs recommend: ClusterAccount `default` lets only the
/// platform namespace use it, and the teams' objects are placed inside their sub accounts by
/// SubAccounts of that namespace. The teams' keys and domains are the platform's use of the
/// account, inside the sub account its SubAccount lets them into (with that sub account's
/// credential): they converge. A team's own use of the account is refused alike, with no call
/// and no claim (`AccountNotAllowed` for its own namespace, telling nothing else): a
/// company-level key of its own, a key through a SubAccount that does not let it in (squatting
/// another team's name, which that team then gets), a domain through a namespace that does not
/// exist. The keys inside hold their claims against a second resource for one of them
/// (`ConflictingOwner`), and are deleted with their resources, also once the SubAccount no
/// longer lets their namespace in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_company_account_of_the_platform_alone_still_serves_the_tenants_inside() {
    let env = env().await;
    for ns in ["platform", "team-a", "team-b"] {
        namespace(&env, ns, &[]).await;
    }
    let platform_only = "  scope: Company\n  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: platform}}\n";
    cluster_account(&env, &env.sim, "default", common::KEY, platform_only).await;
    apply_example(&env, "10-platform.yaml").await;
    apply_example(&env, "20-team-a.yaml").await;
    // Everything of the platform and of team a settled (its domain verified: no verify-txt is
    // due any more), so that the calls counted below are the refused resources' alone.
    ready::<ApiKey>(&env, "team-a", "sender", "True", "Available").await;
    ready::<ApiKey>(&env, "team-a", "analytics", "True", "Available").await;
    ready::<SendingDomain>(&env, "team-a", "mail", "True", "Verified").await;
    for sub in ["tenant-a", "tenant-b"] {
        ready::<SubAccount>(&env, "platform", sub, "True", "Available").await;
    }

    // Team a's own uses of the account: a company-level key; a key squatting the name of team
    // b's key still to come, through team b's SubAccount, which does not let it in; a domain
    // through a SubAccount of a namespace that does not exist. Each is its own namespace's use,
    // refused alike (it learns nothing of the others), with no call, and claims nothing.
    env.sim.clear_request_log();
    api_key(&env, "team-a", "company-level", "").await;
    let squat = "  name: team-b-sender\n  subAccountRef: {name: tenant-b, namespace: platform}\n";
    api_key(&env, "team-a", "squat", squat).await;
    let domains: Api<SendingDomain> = Api::namespaced(env.kube.clone(), "team-a");
    create(
        &domains,
        "apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata: {name: nowhere, namespace: team-a}\nspec:\n  domain: corp.example.com\n  subAccountRef: {name: any, namespace: nowhere}\n",
    )
    .await;
    let mut messages = Vec::new();
    for name in ["company-level", "squat"] {
        let refused = key_ready(&env, "team-a", name, "False", "AccountNotAllowed").await;
        messages.push(ready_message(&refused));
    }
    let nowhere: SendingDomain =
        ready(&env, "team-a", "nowhere", "False", "AccountNotAllowed").await;
    let condition = (nowhere.status.unwrap().conditions.into_iter())
        .find(|c| c.type_ == "Ready")
        .unwrap();
    messages.push(condition.message);
    assert!(messages.iter().all(|m| *m == messages[0]), "{messages:?}");
    assert!(messages[0].contains("\"team-a\""), "{messages:?}");
    let asked = resource_requests(&env.sim);
    assert!(asked.is_empty(), "no call for a refused use: {asked:?}");

    // Team b's objects converge inside its sub account: the squat holds no claim.
    apply_example(&env, "20-team-b.yaml").await;
    for key in ["sender", "analytics"] {
        ready::<ApiKey>(&env, "team-b", key, "True", "Available").await;
    }
    ready::<SendingDomain>(&env, "team-b", "mail", "True", "Verified").await;
    let state = env.sim.snapshot();
    for team in ["a", "b"] {
        let sender = (state.api_keys.iter()).find(|k| k.name == format!("team-{team}-sender"));
        let tenant = (state.sub_accounts.iter()).find(|s| s.name == format!("tenant-{team}"));
        assert_eq!(
            sender.unwrap().sub_account_id,
            tenant.unwrap().id,
            "team {team}'s key inside its sub account"
        );
    }

    // The team's keys inside hold their claims: a second resource for one of them conflicts.
    env.sim.clear_request_log();
    api_key(
        &env,
        "team-a",
        "twin",
        "  name: team-a-sender\n  subAccountRef: {name: tenant-a, namespace: platform}\n",
    )
    .await;
    key_ready(&env, "team-a", "twin", "False", "ConflictingOwner").await;
    let writes = service_writes(&env.sim);
    assert!(writes.is_empty(), "no write for a refused use: {writes:?}");
    let secrets: Api<Secret> = Api::namespaced(env.kube.clone(), "team-a");
    for name in ["company-level-key", "squat-key", "twin-key"] {
        assert!(secrets.get_opt(name).await.unwrap().is_none(), "{name}");
    }

    // Its own object is deleted with the resource, also once the SubAccount no longer lets the
    // namespace in (as garbage collection removes what an owner made): nothing stays stuck.
    let subs: Api<SubAccount> = Api::namespaced(env.kube.clone(), "platform");
    let nobody = serde_json::json!({"spec": {"allowedNamespaces": {"matchLabels": {"kubernetes.io/metadata.name": "nobody"}}}});
    subs.patch("tenant-a", &PatchParams::default(), &Patch::Merge(&nobody))
        .await
        .unwrap();
    let keys: Api<ApiKey> = Api::namespaced(env.kube.clone(), "team-a");
    let analytics = keys.get("analytics").await.unwrap();
    let id = analytics.status.as_ref().and_then(|s| s.id).unwrap();
    keys.delete("analytics", &Default::default()).await.unwrap();
    common::wait_deleted(
        &keys,
        "analytics",
        analytics.metadata.uid.as_deref().unwrap(),
    )
    .await;
    let state = env.sim.snapshot();
    assert!(
        state.api_keys.iter().all(|k| k.id != id),
        "deleted at the service"
    );
    env.stop().await;
}

/// The operator's credential inside a sub account is no tenant's: an ApiKey placed there that
/// names it (by name or by external-id) is `Stalled/CredentialReserved` with no write and no
/// Secret. A credential deleted at the service shows as `CredentialMissing` on its SubAccount
/// at its next resync and on a resource placed inside afterwards (no write), and deleting an
/// object placed inside then goes through the company key: the key is deleted at the service
/// and the resource is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_credential_is_reserved_and_its_loss_is_shown() {
    // A short resync: the loss is seen at the next one (the cached key list is that old).
    let env = short_resync_env(&["team-a"]).await;
    let credential = tenant(&env, "a").await;
    let inside = "  subAccountRef: {name: tenant-a, namespace: platform}\n";
    api_key(&env, "team-a", "app", inside).await;
    key_ready(&env, "team-a", "app", "True", "Available").await;
    let app = (env.sim.snapshot().api_keys.into_iter())
        .find(|k| k.name == "app")
        .unwrap()
        .id;

    env.sim.clear_request_log();
    api_key(
        &env,
        "team-a",
        "grab",
        &format!("  name: mailtarget-operator\n{inside}"),
    )
    .await;
    key_ready(&env, "team-a", "grab", "False", "CredentialReserved").await;
    let keys: Api<ApiKey> = Api::namespaced(env.kube.clone(), "team-a");
    create(
        &keys,
        &format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: by-id\n  namespace: team-a\n  annotations: {{mailtarget.co/external-id: \"{}\", mailtarget.co/adoption-policy: Adopt}}\nspec:\n  secretName: by-id-key\n{inside}",
            credential.id
        ),
    )
    .await;
    key_ready(&env, "team-a", "by-id", "False", "CredentialReserved").await;
    // Nor from outside the sub account: a resource without subAccountRef reaches the company's
    // own keys only, so neither the credential nor another key inside the sub account, from a
    // tenant's namespace or the SubAccount's (by-id gone first: it claims the same id).
    let uid = keys.get("by-id").await.unwrap().metadata.uid.unwrap();
    keys.delete("by-id", &Default::default()).await.unwrap();
    common::wait_deleted(&keys, "by-id", &uid).await;
    let inside_client = calling_as(&env, &credential);
    let loose = CreateApiKey {
        name: Some("loose".into()),
        ..Default::default()
    };
    let loose = inside_client.create_api_key(&loose).await.unwrap().id;
    env.sim.clear_request_log();
    let outside = [
        ("team-a", credential.id),
        ("platform", credential.id),
        ("platform", loose),
    ];
    for (i, (namespace, id)) in outside.into_iter().enumerate() {
        let keys: Api<ApiKey> = Api::namespaced(env.kube.clone(), namespace);
        create(
            &keys,
            &format!(
                "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: outside-{i}\n  namespace: {namespace}\n  annotations: {{mailtarget.co/external-id: \"{id}\", mailtarget.co/adoption-policy: Adopt}}\nspec:\n  secretName: outside-{i}-key\n"
            ),
        )
        .await;
        let name = format!("outside-{i}");
        key_ready(&env, namespace, &name, "False", "ExternalObjectNotFound").await;
        let secrets: Api<Secret> = Api::namespaced(env.kube.clone(), namespace);
        let secret = format!("{name}-key");
        assert!(
            secrets.get_opt(&secret).await.unwrap().is_none(),
            "{secret}"
        );
        // Gone before the next one: two of them naming one id would be ConflictingOwner.
        let uid = keys.get(&name).await.unwrap().metadata.uid.unwrap();
        keys.delete(&name, &Default::default()).await.unwrap();
        common::wait_deleted(&keys, &name, &uid).await;
    }
    assert!(
        service_writes(&env.sim).is_empty(),
        "{:?}",
        service_writes(&env.sim)
    );
    let secrets: Api<Secret> = Api::namespaced(env.kube.clone(), "team-a");
    for name in ["grab-key", "by-id-key"] {
        assert!(
            secrets.get_opt(name).await.unwrap().is_none(),
            "no Secret {name}"
        );
    }

    // The credential is deleted at the service: seen at the SubAccount's next resync.
    assert!(env.api.delete_api_key(credential.id).await.unwrap());
    ready::<SubAccount>(&env, "platform", "tenant-a", "False", "CredentialMissing").await;
    env.sim.clear_request_log();
    api_key(&env, "team-a", "late", inside).await;
    let missing = key_ready(&env, "team-a", "late", "False", "CredentialMissing").await;
    assert!(ready_message(&missing).contains("mailtarget-operator"));
    assert!(
        service_writes(&env.sim).is_empty(),
        "{:?}",
        service_writes(&env.sim)
    );

    // Deleting the key placed inside goes through the company key.
    let uid = keys.get("app").await.unwrap().metadata.uid.unwrap();
    keys.delete("app", &Default::default()).await.unwrap();
    common::wait_deleted(&keys, "app", &uid).await;
    assert!(
        env.sim.snapshot().api_keys.iter().all(|k| k.id != app),
        "the key deleted at the service"
    );
    env.stop().await;
}

/// A SendingDomain without subAccountRef reaches the company's own domains only: a domain inside
/// a tenant's sub account, named by its domain or by external-id, is neither adopted nor
/// created from outside it, whatever the adoption policy: no write, no DKIM private key
/// exported (the domain's detail carries it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_domain_inside_a_sub_account_is_not_reached_from_outside() {
    let env = short_resync_env(&["team-a"]).await;
    let credential = tenant(&env, "a").await;
    let inside = calling_as(&env, &credential);
    let create_domain = mailtarget_operator::api::CreateSendingDomain {
        domain: "tenant-a.example.com".into(),
        ..Default::default()
    };
    let domain = inside.create_sending_domain(&create_domain).await.unwrap();
    env.sim.clear_request_log();
    let domains: Api<SendingDomain> = Api::namespaced(env.kube.clone(), "team-a");
    let by_id = format!(", mailtarget.co/external-id: \"{}\"", domain.id);
    for (name, annotation, reason) in [
        ("by-name", String::new(), "AlreadyExists"),
        ("by-id", by_id, "ExternalObjectNotFound"),
    ] {
        create(
            &domains,
            &format!(
                "apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata:\n  name: {name}\n  namespace: team-a\n  annotations: {{mailtarget.co/adoption-policy: Adopt{annotation}}}\nspec:\n  domain: tenant-a.example.com\n  dkimPrivateKeySecretName: {name}-dkim\n"
            ),
        )
        .await;
        ready::<SendingDomain>(&env, "team-a", name, "False", reason).await;
        let secrets: Api<Secret> = Api::namespaced(env.kube.clone(), "team-a");
        let secret = format!("{name}-dkim");
        assert!(
            secrets.get_opt(&secret).await.unwrap().is_none(),
            "{secret}"
        );
        // Gone before the next one: two resources naming one domain would conflict.
        let uid = domains.get(name).await.unwrap().metadata.uid.unwrap();
        domains.delete(name, &Default::default()).await.unwrap();
        common::wait_deleted(&domains, name, &uid).await;
    }
    assert!(
        service_writes(&env.sim).is_empty(),
        "{:?}",
        service_writes(&env.sim)
    );
    assert!(
        env.sim
            .snapshot()
            .sending_domains
            .iter()
            .any(|d| d.id == domain.id)
    );
    env.stop().await;
}

/// A 401 with one sub account's credential stops that sub account only (product design: a
/// 401 with a sub account credential is a condition on that SubAccount and the objects inside
/// it, never on the company account). The service refuses tenant a's credential (its allowed IPs
/// exclude the operator; the key is still listed): a change to team a's key is
/// `Stalled/CredentialRefused` naming the SubAccount, which shows `CredentialRefused` at its
/// next resync, while the same change to team b's key converges, and deleting another key of
/// team a meanwhile goes through the company key. Once the credential is accepted again, both
/// come back and team a's change lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_on_one_sub_account_leaves_the_others_converging() {
    // A short resync: the SubAccount checks a refused credential at its next reconcile.
    let env = short_resync_env(&["team-a", "team-b"]).await;
    let subs: Api<SubAccount> = Api::namespaced(env.kube.clone(), "platform");
    let mut credentials = Vec::new();
    for team in ["a", "b"] {
        credentials.push(tenant(&env, team).await.id);
        let inside = format!(
            "  name: app-{team}\n  subAccountRef: {{name: tenant-{team}, namespace: platform}}\n"
        );
        api_key(&env, &format!("team-{team}"), "app", &inside).await;
        key_ready(&env, &format!("team-{team}"), "app", "True", "Available").await;
    }
    let inside_a = "  subAccountRef: {name: tenant-a, namespace: platform}\n";
    let old = api_key(&env, "team-a", "old", inside_a).await;
    let old_id = (key_ready(&env, "team-a", "old", "True", "Available").await)
        .status
        .and_then(|s| s.id)
        .unwrap();
    let permission_type = |name: &str| {
        (env.sim.snapshot().api_keys.into_iter())
            .find(|k| k.name == name)
            .map(|k| k.permission_type)
    };

    // Tenant a's credential is refused from the operator's address.
    let restrict = |allowed: &str| mailtarget_operator::api::UpdateApiKey {
        allowed_ip: Some(allowed.into()),
        ..Default::default()
    };
    env.api
        .update_api_key(credentials[0], &restrict("192.0.2.1"))
        .await
        .unwrap();
    let change = serde_json::json!({"spec": {"permissionType": "sending"}});
    for team in ["a", "b"] {
        let keys: Api<ApiKey> = Api::namespaced(env.kube.clone(), &format!("team-{team}"));
        keys.patch("app", &PatchParams::default(), &Patch::Merge(&change))
            .await
            .unwrap();
    }
    wait_for(
        &Api::<ApiKey>::namespaced(env.kube.clone(), "team-b"),
        "app",
        "Ready with the change",
        |k: &ApiKey| {
            k.status.as_ref().is_some_and(|s| {
                ready_is(k, &s.conditions, "True", Some("Available"))
                    && s.permission_type.as_deref() == Some("sending")
            })
        },
    )
    .await;
    assert_eq!(permission_type("app-b").as_deref(), Some("sending"));
    let refused = key_ready(&env, "team-a", "app", "False", "CredentialRefused").await;
    let message = ready_message(&refused);
    assert!(
        message.contains("SubAccount \"platform/tenant-a\""),
        "{message}"
    );
    assert!(message.contains(&credentials[0].to_string()), "{message}");
    assert_ne!(permission_type("app-a").as_deref(), Some("sending"));
    let sub: SubAccount = ready(&env, "platform", "tenant-a", "False", "CredentialRefused").await;
    assert!(sub.status.unwrap().credential.is_some(), "still listed");
    let other: SubAccount = subs.get("tenant-b").await.unwrap();
    let s = other.status.as_ref().unwrap();
    assert!(ready_is(&other, &s.conditions, "True", Some("Available")));

    // Deleting a key inside tenant a meanwhile goes through the company key: no cleanup waits
    // on the refused credential.
    env.sim.clear_request_log();
    let keys_a: Api<ApiKey> = Api::namespaced(env.kube.clone(), "team-a");
    keys_a.delete("old", &Default::default()).await.unwrap();
    common::wait_deleted(&keys_a, "old", old.metadata.uid.as_deref().unwrap()).await;
    assert!(!env.sim.snapshot().api_keys.iter().any(|k| k.id == old_id));
    let deletes: Vec<u16> = (env.sim.request_log().into_iter())
        .filter(|r| r.method == "DELETE" && r.path == format!("/api-key/{old_id}"))
        .map(|r| r.status)
        .collect();
    assert_eq!(deletes, [200], "one delete, accepted");

    // Accepted again: the SubAccount is Ready and team a's change lands.
    env.api
        .update_api_key(credentials[0], &restrict(""))
        .await
        .unwrap();
    ready::<SubAccount>(&env, "platform", "tenant-a", "True", "Available").await;
    key_ready(&env, "team-a", "app", "True", "Available").await;
    assert_eq!(permission_type("app-a").as_deref(), Some("sending"));
    env.stop().await;
}

/// An operator with a 2 s resync, and the namespaces `platform` and `teams`.
async fn short_resync_env(teams: &[&str]) -> Env {
    let env = Env::start_with(Options {
        resync: Duration::from_secs(2),
        ..Default::default()
    })
    .await;
    for ns in std::iter::once(&"platform").chain(teams) {
        namespace(&env, ns, &[]).await;
    }
    env
}

/// The company's client calling as `credential` (a tenant's, see [`tenant`]), its value read
/// from the simulator.
fn calling_as(
    env: &Env,
    credential: &mailtarget_operator::crd::subaccount::NamedId,
) -> mailtarget_operator::api::Client {
    let value = (env.sim.snapshot().api_keys.into_iter())
        .find(|k| k.id == credential.id)
        .unwrap()
        .key;
    env.api.calling_as(value.into()).unwrap()
}

/// Creates SubAccount `platform/tenant-<team>` allowing namespace `team-<team>`, waits until it
/// is Ready and returns its credential as its status shows it.
async fn tenant(env: &Env, team: &str) -> mailtarget_operator::crd::subaccount::NamedId {
    let subs: Api<SubAccount> = Api::namespaced(env.kube.clone(), "platform");
    create(
        &subs,
        &format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {{name: tenant-{team}, namespace: platform}}\nspec:\n  allowedNamespaces: {{matchLabels: {{kubernetes.io/metadata.name: team-{team}}}}}\n"
        ),
    )
    .await;
    let name = format!("tenant-{team}");
    let sub: SubAccount = ready(env, "platform", &name, "True", "Available").await;
    sub.status.unwrap().credential.expect("credential shown")
}

/// Deleting whole namespaces leaves nothing stuck and nothing behind (the Kubernetes namespace
/// controller deletes every object in them at once, in no set order): team a's key and domain,
/// created inside tenant a's sub account (its SubAccount in another namespace), are deleted at
/// the service; team b's namespace holds everything itself (an Account of a second company
/// with its credentials Secret, a SubAccount through it, a key inside that sub account and one
/// directly through the Account): the Account is held by its in-use finalizer until its users
/// are cleaned up through it, with the last key that passed its check although its Secret went
/// first; the keys are deleted and the sub account deactivated at the second company. Both
/// namespaces end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_namespaces_leaves_nothing_stuck() {
    use k8s_openapi::api::core::v1::Namespace;
    let env = env().await;
    let second = Simulator::start(SimulatorConfig::new(SECOND_COMPANY_KEY))
        .await
        .unwrap();
    for ns in ["platform", "team-a", "team-b"] {
        namespace(&env, ns, &[]).await;
    }
    tenant(&env, "a").await;
    let inside_a = "  subAccountRef: {name: tenant-a, namespace: platform}\n";
    api_key(&env, "team-a", "app", inside_a).await;
    let domains: Api<SendingDomain> = Api::namespaced(env.kube.clone(), "team-a");
    create(
        &domains,
        &format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata: {{name: mail, namespace: team-a}}\nspec:\n  domain: mail.team-a.example.com\n  dkimPrivateKeySecretName: mail-dkim\n{inside_a}"
        ),
    )
    .await;

    let accounts: Api<mailtarget_operator::crd::Account> =
        Api::namespaced(env.kube.clone(), "team-b");
    company_account(&env, &second, "team-b", "own").await;
    let through = "  accountRef: {kind: Account, name: own}\n";
    let subs: Api<SubAccount> = Api::namespaced(env.kube.clone(), "team-b");
    create(
        &subs,
        &format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {{name: shop, namespace: team-b}}\nspec:\n  deletionPolicy: Deactivate\n{through}"
        ),
    )
    .await;
    api_key(&env, "team-b", "direct", through).await;
    api_key(
        &env,
        "team-b",
        "inside",
        &format!("{through}  subAccountRef: {{name: shop}}\n"),
    )
    .await;

    ready::<ApiKey>(&env, "team-a", "app", "True", "Available").await;
    ready::<SendingDomain>(&env, "team-a", "mail", "True", "Verified").await;
    ready::<SubAccount>(&env, "team-b", "shop", "True", "Available").await;
    ready::<ApiKey>(&env, "team-b", "direct", "True", "Available").await;
    ready::<ApiKey>(&env, "team-b", "inside", "True", "Available").await;
    wait_for(&accounts, "own", "in use", in_use).await;
    let first = env.sim.snapshot();
    let tenant_a = (first.sub_accounts.iter())
        .find(|s| s.name == "tenant-a")
        .unwrap()
        .id;
    let inside_tenant_a = |state: &mailtarget_operator::simulator::SimulatorState| {
        let mut names: Vec<String> = (state.api_keys.iter())
            .filter(|k| k.sub_account_id == tenant_a)
            .map(|k| k.name.clone())
            .collect();
        names.extend(
            (state.sending_domains.iter())
                .filter(|d| d.sub_account_id == tenant_a)
                .map(|d| d.domain.clone()),
        );
        names.sort();
        names
    };
    assert_eq!(
        inside_tenant_a(&first),
        ["app", "mail.team-a.example.com", "mailtarget-operator"]
    );

    // The Account's Secret goes first (the namespace controller deletes in no set order, and
    // the operator's watches may see the Account's deletion after its Secret's): the cleanups
    // through it then use the last key that passed its check.
    let secrets: Api<Secret> = Api::namespaced(env.kube.clone(), "team-b");
    secrets
        .delete("own-key", &Default::default())
        .await
        .unwrap();
    wait_for(&accounts, "own", "CredentialsNotFound", |a| {
        a.status
            .as_ref()
            .is_some_and(|s| ready_is(a, &s.conditions, "False", Some("CredentialsNotFound")))
    })
    .await;
    let namespaces: Api<Namespace> = Api::all(env.kube.clone());
    let mut uids = Vec::new();
    for ns in ["team-a", "team-b"] {
        uids.push(namespaces.get(ns).await.unwrap().metadata.uid.unwrap());
        namespaces.delete(ns, &Default::default()).await.unwrap();
    }
    for (ns, uid) in ["team-a", "team-b"].iter().zip(&uids) {
        common::wait_deleted(&namespaces, ns, uid).await;
    }

    assert_eq!(
        inside_tenant_a(&env.sim.snapshot()),
        ["mailtarget-operator"],
        "team a's key and domain are deleted inside tenant a; the credential stays"
    );
    let at_second = second.snapshot();
    let keys: Vec<&str> = (at_second.api_keys.iter())
        .map(|k| k.name.as_str())
        .collect();
    assert_eq!(
        keys,
        ["mailtarget-operator"],
        "team b's keys are deleted; the sub account's credential stays with it"
    );
    let shop = (at_second.sub_accounts.iter())
        .find(|s| s.name == "shop")
        .unwrap();
    assert_eq!(shop.status, "inactive", "the sub account is deactivated");
    env.stop().await;
}

/// A resource whose namespace reaches the operator's Namespace cache only after its reconcile
/// looked for it there (the Namespace watch lagging) goes on as soon as the namespace arrives,
/// not at the next resync: here the SubAccount it is placed in selects namespaces by label, and
/// nothing else about the key or the SubAccount changes meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_late_in_the_cache_holds_nothing_up() {
    let env = env().await;
    let faults = a_key_waiting_for_its_namespace(&env).await;
    faults.clear_drops();
    key_ready(&env, "team-late", "app", "True", "Available").await;
    env.stop().await;
}

/// SubAccount `platform/tenant-late`, which selects namespaces labelled `team: late`, Available;
/// then, with the operator's Namespace watch cut off (its GETs' connections dropped until
/// `clear_drops`), namespace `team-late` so labelled and its ApiKey `app` placed in that
/// SubAccount, which waits (`ReferenceNotReady`: the namespace is not in the operator's cache).
async fn a_key_waiting_for_its_namespace(env: &Env) -> mailtarget_test_apiserver::Faults {
    use mailtarget_test_apiserver::RequestFilter;
    namespace(env, "platform", &[]).await;
    let subs: Api<SubAccount> = Api::namespaced(env.kube.clone(), "platform");
    create(
        &subs,
        "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: tenant-late, namespace: platform}\nspec:\n  name: tenant-late\n  allowedNamespaces:\n    matchLabels: {team: late}\n",
    )
    .await;
    ready::<SubAccount>(env, "platform", "tenant-late", "True", "Available").await;
    let faults = env.server.faults();
    faults.drop_connections(RequestFilter::path("/api/v1/namespaces?").with_method("GET"));
    faults.drop_watches();
    namespace(env, "team-late", &[("team", "late")]).await;
    let reference = "  subAccountRef: {name: tenant-late, namespace: platform}\n";
    api_key(env, "team-late", "app", reference).await;
    let waiting = key_ready(env, "team-late", "app", "False", "ReferenceNotReady").await;
    assert!(
        ready_message(&waiting).contains("not in the operator's cache yet"),
        "{}",
        ready_message(&waiting)
    );
    faults
}

/// As above, when the namespace reaches the cache through a relist: the Namespace watch was
/// away for longer than the API server keeps events, so its resumption is answered 410 Expired
/// and the watch lists again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_relisted_late_holds_nothing_up() {
    use k8s_openapi::api::core::v1::ConfigMap;
    const WINDOW: usize = 20;
    let env = Env::start_with(Options {
        history_window: Some(WINDOW),
        ..options()
    })
    .await;
    let faults = a_key_waiting_for_its_namespace(&env).await;
    // More changes than the server keeps: the watch cannot resume where it stopped.
    let maps: Api<ConfigMap> = Api::namespaced(env.kube.clone(), "platform");
    for i in 0..=WINDOW {
        let mut map = ConfigMap::default();
        map.metadata.name = Some(format!("filler-{i}"));
        maps.create(&PostParams::default(), &map).await.unwrap();
    }
    let lists_before = namespace_lists(&env);
    faults.clear_drops();
    key_ready(&env, "team-late", "app", "True", "Available").await;
    assert!(
        namespace_lists(&env) > lists_before,
        "the Namespace watch listed again"
    );
    env.stop().await;
}

/// Lists of Namespaces (not watches) the test API server answered so far.
fn namespace_lists(env: &Env) -> usize {
    (env.server.request_log().iter())
        .filter(|r| r.method == "GET" && r.path_and_query.starts_with("/api/v1/namespaces?"))
        .filter(|r| !r.path_and_query.contains("watch=true"))
        .count()
}
