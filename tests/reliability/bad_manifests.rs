//! Test 6 of the reliability suite: invalid manifests applied to the test API server with the
//! project's CRDs. Each is refused by the API server (422 naming the field; 400 for an unknown
//! field under `fieldValidation=Strict`) or accepted and reported by the controller in a
//! condition saying what to fix, and none of them causes a write to the service.

use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use mailtarget_operator::api::{CreateApiKey, CreateSubAccount};
use mailtarget_operator::crd::{ApiKey, SendingDomain, SubAccount};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::common::{api_client, wait_for};
use crate::harness::{HasConditions, Rig, ready};

/// What must happen to a manifest.
enum Expect {
    /// The API server refuses it with `status`, and its message contains `field` and `says`.
    Refused {
        status: u16,
        field: &'static str,
        says: &'static str,
    },
    /// The API server accepts it; the controller sets `Ready=False` with `reason`, a message
    /// containing `says`, and (when `stalled`) `Stalled=True`.
    Reported {
        reason: &'static str,
        says: &'static str,
        stalled: bool,
    },
}

use Expect::{Refused, Reported};

fn refused(status: u16, field: &'static str, says: &'static str) -> Expect {
    Refused {
        status,
        field,
        says,
    }
}

fn stalled(reason: &'static str, says: &'static str) -> Expect {
    Reported {
        reason,
        says,
        stalled: true,
    }
}

fn object(kind: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "mailtarget.co/v1alpha1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    })
}

fn annotated(kind: &str, name: &str, annotations: Value, spec: Value) -> Value {
    let mut o = object(kind, name, spec);
    o["metadata"]["annotations"] = annotations;
    o
}

/// Applies `manifest` like `kubectl apply --server-side --validate=strict`.
async fn apply<K>(api: &Api<K>, manifest: &Value) -> Result<K, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let name = manifest["metadata"]["name"].as_str().unwrap_or_default();
    let params = PatchParams::apply("bad-manifest-test").validation_strict();
    api.patch(name, &params, &Patch::Apply(manifest)).await
}

/// Checks one manifest of kind `K` against its expectation.
async fn check<K>(api: &Api<K>, case: usize, manifest: &Value, expect: &Expect)
where
    K: Resource<DynamicType = ()>
        + HasConditions
        + Clone
        + DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
        + Send
        + 'static,
{
    let result = apply(api, manifest).await;
    match expect {
        Refused {
            status,
            field,
            says,
        } => {
            let err = match result {
                Err(kube::Error::Api(s)) => s,
                other => panic!("case {case} {manifest}: expected {status}, got {other:?}"),
            };
            assert_eq!(err.code, *status, "case {case} {manifest}: {err:?}");
            assert!(
                err.message.contains(field) && err.message.contains(says),
                "case {case}: the message names {field} and says {says:?}: {}",
                err.message
            );
        }
        Reported {
            reason,
            says,
            stalled,
        } => {
            let obj = result.unwrap_or_else(|e| panic!("case {case} {manifest}: refused: {e}"));
            let reason = *reason;
            let obj = wait_for(api, &obj.name_any(), reason, move |o: &K| {
                ready(o.conditions()).is_some_and(|c| c.reason == reason)
            })
            .await;
            let conditions = obj.conditions();
            let message = &ready(conditions).expect("Ready").message;
            assert!(
                message.contains(says),
                "case {case}: says {says:?}: {message}"
            );
            let stalled_now = conditions
                .iter()
                .any(|c| c.type_ == "Stalled" && c.status == "True");
            assert_eq!(
                stalled_now, *stalled,
                "case {case}: Stalled: {conditions:?}"
            );
            assert_eq!(
                obj.status_id(),
                None,
                "case {case}: no API object is managed"
            );
        }
    }
}

/// At least 20 bad manifests (34 here), each refused with the field named or reported in a
/// condition that says what to fix; the service sees no write at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_manifests_are_refused_or_reported_without_writes() {
    let mut rig = Rig::new(Rig::sim_config()).await;
    let client = api_client(&rig.sim);
    // Existing objects the manifests below point at.
    client
        .create_api_key(&CreateApiKey {
            name: Some("shared".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    client
        .create_sub_account(&CreateSubAccount {
            name: Some("existing".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    rig.sim.clear_request_log();
    rig.start_operator(Duration::from_secs(2));

    let long = |n: usize| "a".repeat(n);
    let keys: Api<ApiKey> = rig.api();
    let subs: Api<SubAccount> = rig.api();
    let domains: Api<SendingDomain> = rig.api();
    let key = |name: &str, spec: Value| object("ApiKey", name, spec);
    let sub = |name: &str, spec: Value| object("SubAccount", name, spec);
    let domain = |name: &str, spec: Value| object("SendingDomain", name, spec);

    // The owner of "shared" first, then an ObserveOnly SubAccount for "existing" (no writes).
    let owner = annotated(
        "ApiKey",
        "dup-a",
        json!({"mailtarget.co/adoption-policy": "Adopt"}),
        json!({"name": "shared", "secretName": "dup-a"}),
    );
    apply(&keys, &owner).await.unwrap();
    wait_for(&keys, "dup-a", "Ready", |k: &ApiKey| {
        ready(k.conditions()).is_some_and(|c| c.reason == "Available")
    })
    .await;
    apply(
        &subs,
        &sub(
            "existing",
            json!({"managementPolicy": "ObserveOnly", "status": "active"}),
        ),
    )
    .await
    .unwrap();
    wait_for(&subs, "existing", "observed", |s: &SubAccount| {
        s.status_id().is_some()
    })
    .await;
    // A paused domain, to try changing its immutable domain.
    let paused = annotated(
        "SendingDomain",
        "immutable",
        json!({"mailtarget.co/paused": "true"}),
        json!({"domain": "first.example.com"}),
    );
    apply(&domains, &paused).await.unwrap();

    let key_cases: Vec<(Value, Expect)> = vec![
        (
            key(
                "ip",
                json!({"secretName": "s", "allowedIps": ["10.0.0.300"]}),
            ),
            refused(422, "spec.allowedIps[0]", "should match"),
        ),
        (
            key(
                "cidr",
                json!({"secretName": "s", "allowedIps": ["10.0.0.0/24"]}),
            ),
            refused(422, "spec.allowedIps[0]", "should match"),
        ),
        (
            key(
                "twice",
                json!({"secretName": "s", "allowedIps": ["192.0.2.1", "192.0.2.1"]}),
            ),
            refused(422, "spec.allowedIps[1]", "Duplicate value"),
        ),
        (
            key(
                "negative",
                json!({"secretName": "s", "permissionIds": [-1]}),
            ),
            refused(422, "spec.permissionIds[0]", "greater than or equal to 0"),
        ),
        (
            key("unknown", json!({"secretName": "s", "permisionIds": [1]})),
            refused(400, "spec.permisionIds", "unknown field"),
        ),
        (
            key("nosecret", json!({"name": "k"})),
            refused(422, "spec.secretName", "Required value"),
        ),
        (
            key("long", json!({"secretName": "s", "name": long(101)})),
            refused(422, "spec.name", "Too long"),
        ),
        (
            key(
                "policy",
                json!({"secretName": "s", "deletionPolicy": "Destroy"}),
            ),
            refused(422, "spec.deletionPolicy", "Unsupported value"),
        ),
        (
            key(
                "mode",
                json!({"secretName": "s", "managementPolicy": "Sometimes"}),
            ),
            refused(422, "spec.managementPolicy", "Unsupported value"),
        ),
        (
            key(
                "emptytype",
                json!({"secretName": "s", "permissionType": ""}),
            ),
            refused(422, "spec.permissionType", "at least 1"),
        ),
        (
            key(&format!("n{}", long(253)), json!({"secretName": "s"})),
            refused(422, "metadata.name", "must be no more than 253 characters"),
        ),
        (
            key("v6", json!({"secretName": "s", "allowedIps": ["1:2"]})),
            stalled(
                "InvalidSpec",
                "spec.allowedIps[0]: \"1:2\" is not an IP address",
            ),
        ),
        (
            key("secret-name", json!({"secretName": "Bad_Name"})),
            stalled(
                "InvalidSpec",
                "spec.secretName: \"Bad_Name\" is not a valid Secret name",
            ),
        ),
        (
            annotated(
                "ApiKey",
                "badid",
                json!({"mailtarget.co/external-id": "abc"}),
                json!({"secretName": "s"}),
            ),
            stalled("InvalidSpec", "write the positive integer id"),
        ),
        (
            annotated(
                "ApiKey",
                "noid",
                json!({"mailtarget.co/external-id": "999"}),
                json!({"secretName": "s"}),
            ),
            stalled(
                "ExternalObjectNotFound",
                "API key 999, which does not exist",
            ),
        ),
        (
            key("dup-b", json!({"name": "shared", "secretName": "dup-b"})),
            stalled(
                "ConflictingOwner",
                "ApiKey default/dup-a already manages API key",
            ),
        ),
        (
            key(
                "orphan-ref",
                json!({"secretName": "s", "subAccountRef": {"name": "nope"}}),
            ),
            Reported {
                reason: "ReferenceNotReady",
                says: "SubAccount \"default/nope\" does not exist yet",
                stalled: false,
            },
        ),
    ];
    let sub_cases: Vec<(Value, Expect)> = vec![
        (
            sub("pool", json!({"ipPoolId": -3})),
            refused(422, "spec.ipPoolId", "greater than or equal to 0"),
        ),
        (
            sub("pooltype", json!({"ipPoolId": "abc"})),
            refused(422, "spec.ipPoolId", "must be of type integer"),
        ),
        (
            sub("long", json!({"name": long(101)})),
            refused(422, "spec.name", "Too long"),
        ),
        (
            sub(
                "firstkey",
                json!({"apiKey": {"secretName": "s", "permissionIds": [-5]}}),
            ),
            refused(
                422,
                "spec.apiKey.permissionIds[0]",
                "greater than or equal to 0",
            ),
        ),
        (
            sub("firstsecret", json!({"apiKey": {"name": "k"}})),
            refused(422, "spec.apiKey.secretName", "Required value"),
        ),
        (
            sub("Bad_Name", json!({})),
            refused(422, "metadata.name", "a lowercase RFC 1123 subdomain"),
        ),
        (
            sub(
                "firstsecretname",
                json!({"apiKey": {"secretName": "UPPER"}}),
            ),
            stalled(
                "InvalidSpec",
                "spec.apiKey.secretName: \"UPPER\" is not a valid Secret name",
            ),
        ),
    ];
    let domain_cases: Vec<(Value, Expect)> = vec![
        (
            domain("upper", json!({"domain": "Example.com"})),
            refused(422, "spec.domain", "should match"),
        ),
        (
            domain("idn", json!({"domain": "bücher.example"})),
            refused(422, "spec.domain", "should match"),
        ),
        (
            domain("ip", json!({"domain": "10.0.0.1"})),
            refused(422, "spec.domain", "should match"),
        ),
        (
            domain("dot", json!({"domain": "example.com."})),
            refused(422, "spec.domain", "should match"),
        ),
        (
            domain(
                "label",
                json!({"domain": format!("{}.example.com", long(64))}),
            ),
            refused(422, "spec.domain", "should match"),
        ),
        (
            domain(
                "huge",
                json!({"domain": format!("{}.com", vec![long(60); 5].join("."))}),
            ),
            refused(422, "spec.domain", "Too long"),
        ),
        (
            domain("nodomain", json!({"note": "x"})),
            refused(422, "spec.domain", "Required value"),
        ),
        (
            domain(
                "note",
                json!({"domain": "note.example.com", "note": long(1001)}),
            ),
            refused(422, "spec.note", "Too long"),
        ),
        (
            annotated(
                "SendingDomain",
                "immutable",
                json!({"mailtarget.co/paused": "true"}),
                json!({"domain": "second.example.com"}),
            ),
            refused(422, "spec.domain", "spec.domain is immutable"),
        ),
    ];
    let total = key_cases.len() + sub_cases.len() + domain_cases.len();
    assert!(total >= 20, "{total} cases");
    for (i, (manifest, expect)) in key_cases.iter().enumerate() {
        check(&keys, i, manifest, expect).await;
    }
    for (i, (manifest, expect)) in sub_cases.iter().enumerate() {
        check(&subs, 100 + i, manifest, expect).await;
    }
    for (i, (manifest, expect)) in domain_cases.iter().enumerate() {
        check(&domains, 200 + i, manifest, expect).await;
    }
    let owner = keys.get("dup-a").await.unwrap();
    assert!(
        owner.status_id().is_some(),
        "dup-a still manages \"shared\""
    );
    assert_eq!(
        ready(owner.conditions()).map(|c| c.reason.as_str()),
        Some("Available")
    );
    rig.stop_operator().await;
    let writes = rig.writes();
    assert!(writes.is_empty(), "bad manifests caused writes: {writes:?}");
    let state = rig.sim.snapshot();
    assert_eq!(state.api_keys.len(), 1);
    assert_eq!(state.sub_accounts.len(), 1);
    assert!(state.sending_domains.is_empty());
}

/// An ApiKey with 100 allowed IPs that pass the schema's pattern but are no IP address: its
/// condition spells out the first problems and counts the rest, and the Warning Event that
/// reports it is accepted by the API server (whose note limit is 1024 bytes, as
/// kube-apiserver's) with a note within that limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_problem_list_is_bounded_in_the_condition_and_the_event() {
    use k8s_openapi::api::events::v1::Event;
    let mut rig = Rig::new(Rig::sim_config()).await;
    rig.start_operator(Duration::from_secs(30));
    let keys: Api<ApiKey> = rig.api();
    // 45 characters each (the schema's maxLength), unique, and far too many groups for IPv6.
    let ips: Vec<String> = (0..100)
        .map(|i| format!("{i:04x}:{}", "0:".repeat(20)))
        .collect();
    let manifest = object(
        "ApiKey",
        "many-ips",
        json!({"secretName": "many-ips", "allowedIps": ips}),
    );
    apply(&keys, &manifest)
        .await
        .expect("the schema admits them");
    let obj = wait_for(&keys, "many-ips", "InvalidSpec", |k: &ApiKey| {
        ready(k.conditions()).is_some_and(|c| c.reason == "InvalidSpec")
    })
    .await;
    let message = ready(obj.conditions()).expect("Ready").message.clone();
    assert!(
        message.starts_with("spec.allowedIps[0]: \"0000:0:")
            && message.ends_with("; and 95 more problems"),
        "{message}"
    );
    let events: Api<Event> = rig.api();
    let event = crate::common::wait_event(&events, "InvalidSpec", |e| {
        e.reason.as_deref() == Some("InvalidSpec")
            && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("many-ips")
    })
    .await;
    let note = event.note.unwrap_or_default();
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert!(note.len() <= 1024, "{} bytes", note.len());
    assert!(note.starts_with("spec.allowedIps[0]: "), "{note}");
    rig.stop_operator().await;
    assert!(rig.writes().is_empty(), "{:?}", rig.writes());
}
