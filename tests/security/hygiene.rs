//! Test 8: secret hygiene. The operator runs through creates, adoption, failures, lost answers,
//! a restored Secret, drift, ObserveOnly and deletions with every log event captured at TRACE;
//! then its logs, the Kubernetes Events, every status and the metrics are searched for the key
//! values and DKIM private keys the simulator holds.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use mailtarget_operator::api::{CreateApiKey, UpdateApiKey};
use mailtarget_operator::crd::{ApiKey, SendingDomain, SubAccount};
use mailtarget_operator::simulator::FaultConfig;

use crate::capture;
use crate::common::{api_client, wait_deleted, wait_for};
use crate::harness::{
    HasConditions, Mix, NS, Rig, operator_client, ready, secrets_of, settings, wait_all_ready,
};

/// Serialises every object of kind `K` in [`NS`].
async fn dump<K>(api: &Api<K>) -> String
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let list = api.list(&ListParams::default()).await.expect("list");
    serde_json::to_string(&list.items).expect("json") + &format!("{:?}", list.items)
}

/// No API key value and no DKIM private key (raw or base64) appears in the operator's trace
/// logs, in Kubernetes Events, in any status or in the metrics, after a run that exercised
/// every path that handles them, including failures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_in_logs_events_status_or_metrics() {
    let captured = capture::install();
    let mut config = Rig::sim_config();
    config.faults = FaultConfig {
        error_rate: 0.2,
        drop_response_rate: 0.1,
        seed: 99,
        ..FaultConfig::default()
    };
    let mut rig = Rig::new(config).await;
    let client = api_client(&rig.sim);
    rig.sim.faults().clear();
    let legacy = client
        .create_api_key(&CreateApiKey {
            name: Some("legacy".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    rig.sim.faults().set(FaultConfig {
        error_rate: 0.2,
        drop_response_rate: 0.1,
        seed: 99,
        ..FaultConfig::default()
    });
    let mix = Mix::of(8);
    mix.create(&rig.kube).await;
    let keys: Api<ApiKey> = rig.api();
    let pp = PostParams::default();
    keys.create(&pp, &serde_yaml::from_str(&format!("apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: adopted\n  annotations: {{mailtarget.co/external-id: \"{}\"}}\nspec: {{name: legacy, secretName: adopted-key, managementPolicy: ObserveOnly}}\n", legacy.id)).unwrap()).await.unwrap();
    keys.create(&pp, &serde_yaml::from_str("apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: invalid}\nspec: {secretName: s, allowedIps: [\"1:2\"]}\n").unwrap()).await.unwrap();
    let op = operator_client(&rig.sim);
    rig.start_operator_with(settings(Duration::from_secs(1)), op);
    wait_for(&keys, "invalid", "InvalidSpec", |k: &ApiKey| {
        ready(k.conditions()).is_some_and(|c| c.reason == "InvalidSpec")
    })
    .await;
    keys.delete("invalid", &DeleteParams::default())
        .await
        .unwrap();
    wait_all_ready(&rig.kube, Duration::from_secs(60)).await;
    let mut secrets: BTreeSet<String> = secrets_of(&rig.sim.snapshot()).into_iter().collect();

    // A Secret deleted and restored, a change at the service corrected, lost answers, deletions.
    let kube_secrets: Api<Secret> = Api::namespaced(rig.kube.clone(), NS);
    let restored = kube_secrets.get("app-0-key").await.unwrap();
    kube_secrets
        .delete("app-0-key", &DeleteParams::default())
        .await
        .unwrap();
    let old_uid = restored.metadata.uid.clone();
    wait_for(&kube_secrets, "app-0-key", "restored", move |s: &Secret| {
        s.metadata.uid != old_uid
    })
    .await;
    rig.sim.faults().clear();
    let app0 = keys.get("app-0").await.unwrap().status_id().unwrap();
    client
        .update_api_key(
            app0,
            &UpdateApiKey {
                name: Some("renamed".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    rig.sim.faults().fail_next(4, 500);
    let sim = &rig.sim;
    crate::common::eventually("the rename is corrected", || {
        sim.snapshot()
            .api_keys
            .iter()
            .any(|k| k.id == app0 && k.name == "app-0")
    })
    .await;
    let domains: Api<SendingDomain> = rig.api();
    for (name, api) in [("app-0", &keys)] {
        let obj = api.get(name).await.unwrap();
        api.delete(name, &DeleteParams::default()).await.unwrap();
        wait_deleted(api, name, obj.metadata.uid.as_deref().unwrap()).await;
    }
    let domain = domains.get("mail-0").await.unwrap();
    domains
        .delete("mail-0", &DeleteParams::default())
        .await
        .unwrap();
    wait_deleted(&domains, "mail-0", domain.metadata.uid.as_deref().unwrap()).await;
    rig.stop_operator().await;
    secrets.extend(secrets_of(&rig.sim.snapshot()));

    // Everything people and tools can read.
    let logs = captured.text();
    let events: Api<Event> = Api::namespaced(rig.kube.clone(), NS);
    let events = dump(&events).await;
    let statuses = dump(&rig.api::<SubAccount>()).await
        + &dump(&rig.api::<ApiKey>()).await
        + &dump(&rig.api::<SendingDomain>()).await;
    let metrics = rig.metrics.encode();

    // The capture works and saw what it must see.
    assert!(logs.contains("TRACE"), "trace events are captured");
    assert!(logs.contains("kube"), "kube's events are captured");
    assert!(
        logs.contains("mailtarget_operator"),
        "the operator's events are captured"
    );
    // One span per reconcile naming the object, inherited by the spans of its API calls (the
    // service client's and kube's), and one info line per create.
    let in_a_reconcile = |inner: &str| {
        logs.lines().any(|l| {
            l.contains("reconcile{kind=\"ApiKey\" namespace=\"default\" name=\"")
                && l.contains(" uid=\"")
                && l.contains(inner)
        })
    };
    assert!(
        in_a_reconcile("mailtarget_api{endpoint=\"POST /api-key\""),
        "a service call inside a reconcile's span"
    );
    assert!(
        in_a_reconcile("HTTP{http.method=PATCH"),
        "a Kubernetes call inside a reconcile's span"
    );
    assert!(
        logs.lines().any(|l| l.contains(" INFO ")
            && l.contains("reason=\"Created\"")
            && l.contains("reconcile{")),
        "an info line per create"
    );
    assert!(
        events.contains("Created") && events.contains("SecretRestored"),
        "{events}"
    );
    assert!(statuses.contains("Available"), "statuses are read");
    let names: Vec<String> = keys
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|k| k.name_any())
        .collect();
    assert!(names.contains(&"adopted".to_string()), "{names:?}");
    assert!(secrets.len() >= 16, "secrets collected: {}", secrets.len());

    for (place, text) in [
        ("logs", &logs),
        ("events", &events),
        ("status", &statuses),
        ("metrics", &metrics),
    ] {
        let leaked = secrets.iter().filter(|s| text.contains(s.as_str())).count();
        assert_eq!(leaked, 0, "{leaked} secret values appear in the {place}");
    }
}
