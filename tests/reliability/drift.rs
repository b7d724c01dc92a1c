//! Tests 4 and 5 of the reliability suite: changes made behind the operator's back, at the
//! service (corrected at the next resync, or reported under `ObserveOnly`) and to the Secrets
//! it writes (restored from the service without any write to it).

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use mailtarget_operator::api::{CreateApiKey, CreateSubAccount, UpdateApiKey, UpdateSubAccount};
use mailtarget_operator::crd::{ApiKey, SendingDomain, SubAccount};
use serde_json::json;

use crate::common::{api_client, eventually, wait_for, wait_secret_holds};
use crate::harness::{HasConditions, Mix, NS, Rig, ready, secret_value, wait_all_ready};

/// Waits until `name`'s `Ready` condition has `reason` and returns its message.
async fn wait_reason<K>(api: &Api<K>, name: &str, reason: &'static str) -> String
where
    K: kube::Resource
        + HasConditions
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
        + Send
        + 'static,
{
    let obj = wait_for(api, name, reason, move |o: &K| {
        ready(o.conditions()).is_some_and(|c| c.reason == reason)
    })
    .await;
    ready(obj.conditions())
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

/// A rename and a permission change of a key, a rename and status change of a sub account, and
/// the deletion of a sending domain, all made at the service, are undone by the next resync
/// (1 s here): the key and the sub account are updated in place (no create), the domain is
/// created again and its new DKIM private key replaces the old one in its Secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_at_the_service_are_corrected_at_resync() {
    let mut rig = Rig::new(Rig::sim_config()).await;
    let mix = Mix {
        sub_accounts: vec!["team-0".into()],
        company_keys: vec!["app-0".into()],
        sub_keys: vec![],
        domains: vec![("mail-0".into(), "mail0.example.com".into())],
    };
    mix.create(&rig.kube).await;
    rig.start_operator(Duration::from_secs(1));
    wait_all_ready(&rig.kube, Duration::from_secs(30)).await;
    let before = rig.sim.snapshot();
    let key_id = before
        .api_keys
        .iter()
        .find(|k| k.name == "app-0")
        .unwrap()
        .id;
    let sub_id = before.sub_accounts[0].id;
    let domain = &before.sending_domains[0];
    let client = api_client(&rig.sim);

    rig.sim.clear_request_log();
    client
        .update_api_key(
            key_id,
            &UpdateApiKey {
                name: Some("renamed-by-hand".into()),
                permission_type: Some("full".into()),
                permission_ids: Some(vec![3]),
                allowed_ip: Some(String::new()),
            },
        )
        .await
        .unwrap();
    client
        .update_sub_account(
            sub_id,
            &UpdateSubAccount {
                name: Some("renamed-team".into()),
                status: Some("suspended".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    client.delete_sending_domain(domain.id).await.unwrap();

    let sim = &rig.sim;
    eventually("the key, sub account and domain are corrected", || {
        let s = sim.snapshot();
        let key_ok = s.api_keys.iter().any(|k| {
            k.id == key_id
                && k.name == "app-0"
                && k.permission_type == "custom"
                && k.permission_ids == vec![1, 2]
                && k.allowed_ip == "198.51.100.7"
        });
        let sub_ok = s
            .sub_accounts
            .iter()
            .any(|a| a.id == sub_id && a.name == "team-0" && a.status == "active");
        let domain_ok = s
            .sending_domains
            .iter()
            .any(|d| d.domain == "mail0.example.com" && d.verified);
        key_ok && sub_ok && domain_ok
    })
    .await;
    let after = rig.sim.snapshot();
    let new_domain = after.sending_domains[0].clone();
    assert_ne!(new_domain.id, domain.id, "the domain was created again");
    let domains: Api<SendingDomain> = rig.api();
    let new_id = new_domain.id;
    wait_for(&domains, "mail-0", "pointing at the new domain", move |d| {
        d.status_id() == Some(new_id)
            && ready(d.conditions()).is_some_and(|c| c.reason == "Verified")
    })
    .await;
    let dkim = new_domain.dkim_private_key.clone();
    let secrets: Api<Secret> = Api::namespaced(rig.kube.clone(), NS);
    wait_secret_holds(
        &secrets,
        "mail-0-dkim",
        "dkimPrivateKey",
        &dkim,
        "holding the new DKIM private key",
    )
    .await;
    let creates: Vec<String> = rig
        .sim
        .request_log()
        .iter()
        .filter(|r| r.method == "POST")
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(
        creates,
        vec!["/domain/sending".to_string()],
        "only the domain is created"
    );
    assert_eq!(
        after.api_keys.len(),
        2,
        "no key created: the first key and app-0"
    );
    rig.stop_operator().await;
}

/// Under `managementPolicy: ObserveOnly`, the same kind of changes at the service are reported
/// at the next resync as `DriftDetected`, naming the field, and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_only_reports_changes_at_the_service() {
    let mut rig = Rig::new(Rig::sim_config()).await;
    let client = api_client(&rig.sim);
    let sub = client
        .create_sub_account(&CreateSubAccount {
            name: Some("watched".into()),
            status: Some("active".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let key = client
        .create_api_key(&CreateApiKey {
            name: Some("watched-key".into()),
            permission_ids: Some(vec![1]),
            ..Default::default()
        })
        .await
        .unwrap();
    let subs: Api<SubAccount> = rig.api();
    let keys: Api<ApiKey> = rig.api();
    let pp = PostParams::default();
    subs.create(&pp, &serde_yaml::from_str("apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: watched}\nspec: {status: active, managementPolicy: ObserveOnly}\n").unwrap()).await.unwrap();
    keys.create(&pp, &serde_yaml::from_str("apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: watched-key}\nspec: {permissionIds: [1], secretName: watched-key, managementPolicy: ObserveOnly}\n").unwrap()).await.unwrap();
    rig.start_operator(Duration::from_secs(1));
    wait_reason(&subs, "watched", "Observed").await;
    wait_reason(&keys, "watched-key", "Observed").await;

    client
        .update_sub_account(
            sub.id,
            &UpdateSubAccount {
                status: Some("suspended".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    client
        .update_api_key(
            key.id,
            &UpdateApiKey {
                permission_ids: Some(vec![2]),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    rig.sim.clear_request_log();
    let message = wait_reason(&subs, "watched", "DriftDetected").await;
    assert!(message.contains("spec.status"), "{message}");
    let message = wait_reason(&keys, "watched-key", "DriftDetected").await;
    assert!(message.contains("spec.permissionIds"), "{message}");
    rig.stop_operator().await;
    let writes = rig.writes();
    assert!(writes.is_empty(), "ObserveOnly wrote: {writes:?}");
    let state = rig.sim.snapshot();
    assert_eq!(state.sub_accounts[0].status, "suspended");
    assert_eq!(state.api_keys[0].permission_ids, vec![2]);
}

/// The Secrets holding a sub account's first key and a domain's DKIM private key are written
/// again after being deleted, and after being altered, with the service's values, without any
/// write to the service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_key_and_dkim_secrets_are_restored() {
    let mut rig = Rig::new(Rig::sim_config()).await;
    let mix = Mix {
        sub_accounts: vec!["team-0".into()],
        company_keys: vec![],
        sub_keys: vec![],
        domains: vec![("mail-0".into(), "mail0.example.com".into())],
    };
    mix.create(&rig.kube).await;
    rig.start_operator(Duration::from_secs(30));
    wait_all_ready(&rig.kube, Duration::from_secs(30)).await;
    let state = rig.sim.snapshot();
    let first_key = state.api_keys[0].key.clone();
    let dkim = state.sending_domains[0].dkim_private_key.clone();
    rig.sim.clear_request_log();
    let secrets: Api<Secret> = Api::namespaced(rig.kube.clone(), NS);

    for (name, data_key, value) in [
        ("team-0-first-key", "apiKey", first_key.clone()),
        ("mail-0-dkim", "dkimPrivateKey", dkim.clone()),
    ] {
        let old = secrets.get(name).await.unwrap();
        secrets
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
        let restored =
            wait_secret_holds(&secrets, name, data_key, &value, "restored after deletion").await;
        assert_ne!(
            restored.metadata.uid, old.metadata.uid,
            "{name} was created again"
        );

        secrets
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {data_key: "dGFtcGVyZWQ="}})),
            )
            .await
            .unwrap();
        wait_secret_holds(&secrets, name, data_key, &value, "restored after tampering").await;
    }
    rig.stop_operator().await;
    let writes = rig.writes();
    assert!(
        writes.is_empty(),
        "restoring a Secret wrote to the service: {writes:?}"
    );
}

/// Objects created at the service after the operator cached its lists (a key inside a new sub
/// account, a key named by an external-id annotation) are found and adopted, not reported
/// missing: a lookup that would stall the resource is confirmed against a fresh list first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_created_at_the_service_after_the_lists_were_cached_are_found() {
    let mut rig = Rig::new(Rig::sim_config()).await;
    let client = api_client(&rig.sim);
    client
        .create_api_key(&CreateApiKey {
            name: Some("warm".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let keys: Api<ApiKey> = rig.api();
    let subs: Api<SubAccount> = rig.api();
    let pp = PostParams::default();
    rig.start_operator(Duration::from_secs(60));
    keys.create(&pp, &serde_yaml::from_str("apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: warm, annotations: {mailtarget.co/adoption-policy: Adopt}}\nspec: {secretName: warm-key}\n").unwrap()).await.unwrap();
    wait_reason(&keys, "warm", "Available").await;

    // Created at the service now; the operator's key list is 30 s "fresh".
    let sub = crate::common::sub_account_with_key(&client, "late", "late-first").await;
    let later = client
        .create_api_key(&CreateApiKey {
            name: Some("later".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    rig.sim.clear_request_log();
    subs.create(&pp, &serde_yaml::from_str("apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: late}\nspec: {managementPolicy: ObserveOnly, credentialKeyName: late-first}\n").unwrap()).await.unwrap();
    keys.create(&pp, &serde_yaml::from_str("apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: late-key, annotations: {mailtarget.co/adoption-policy: Adopt}}\nspec: {name: late-first, subAccountRef: {name: late}, secretName: late-key}\n").unwrap()).await.unwrap();
    keys.create(&pp, &serde_yaml::from_str(&format!("apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: by-id\n  annotations: {{mailtarget.co/external-id: \"{}\", mailtarget.co/adoption-policy: Adopt}}\nspec: {{name: later, secretName: by-id-key}}\n", later.id)).unwrap()).await.unwrap();
    wait_reason(&keys, "late-key", "Available").await;
    wait_reason(&keys, "by-id", "Available").await;
    let state = rig.sim.snapshot();
    let first = state
        .api_keys
        .iter()
        .find(|k| k.sub_account_id == sub.id)
        .expect("the sub account's key");
    assert!(
        secret_value(&rig.kube, "late-key", "apiKey")
            .await
            .as_deref()
            == Some(first.key.as_str()),
        "Secret late-key does not hold the sub account's key"
    );
    rig.stop_operator().await;
    let writes = rig.writes();
    assert!(writes.is_empty(), "adoption wrote: {writes:?}");
}
