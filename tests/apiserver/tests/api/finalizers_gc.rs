//! Finalizers, deletionTimestamp, garbage collection by ownerReferences, CRD deletion.
use crate::common;

use std::time::Duration;

use common::{Raw, server_with_widgets, widget, widgets};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use serde_json::json;

fn with_finalizer(name: &str) -> kube::api::DynamicObject {
    let mut w = widget(name, &format!("{name}.example.com"));
    w.metadata.finalizers = Some(vec!["example.com/cleanup".into()]);
    w
}

#[tokio::test]
async fn delete_with_finalizer_marks_then_removal_of_last_finalizer_deletes() {
    let (_s, client) = server_with_widgets().await;
    let api = widgets(&client, "test");
    let created = api
        .create(&PostParams::default(), &with_finalizer("f"))
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let pending = api.delete("f", &DeleteParams::default()).await.unwrap();
    let obj = pending
        .left()
        .expect("object returned while finalizers remain");
    assert!(obj.metadata.deletion_timestamp.is_some());
    assert_eq!(obj.metadata.deletion_grace_period_seconds, Some(0));
    // kube-apiserver bumps `generation` when a deletion starts (registry/generic/registry
    // store.go, markAsDeleting), so generation predicates see the deletion; a second delete
    // does not bump it again.
    assert_eq!(obj.metadata.generation, Some(2));
    let still = api.get("f").await.unwrap();
    assert!(still.metadata.deletion_timestamp.is_some());
    let again = api.delete("f", &DeleteParams::default()).await.unwrap();
    assert_eq!(again.left().unwrap().metadata.generation, Some(2));

    // A new finalizer on an object being deleted is forbidden.
    let add = json!({"metadata": {"finalizers": ["example.com/cleanup", "example.com/other"]}});
    match api
        .patch("f", &PatchParams::default(), &Patch::Merge(add))
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422);
            assert!(s.message.contains("metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted"), "{}", s.message);
        }
        e => panic!("unexpected {e}"),
    }

    api.patch(
        "f",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(api.get_opt("f").await.unwrap().is_none());
}

fn owned_cm(name: &str, owner: &kube::api::DynamicObject, block: bool) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "ownerReferences": [{
            "apiVersion": "example.com/v1", "kind": "Widget", "name": owner.name_any(),
            "uid": owner.uid().unwrap(), "blockOwnerDeletion": block, "controller": true}]},
        "data": {"k": "v"}
    }))
    .unwrap()
}

#[tokio::test]
async fn background_propagation_deletes_dependents_after_owner() {
    let (s, client) = server_with_widgets().await;
    let api = widgets(&client, "test");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "test");
    let owner = api
        .create(&PostParams::default(), &widget("o", "o.example.com"))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &owned_cm("dep", &owner, false))
        .await
        .unwrap();
    let before = s.request_log().len();
    api.delete("o", &DeleteParams::background()).await.unwrap();
    assert!(api.get_opt("o").await.unwrap().is_none());
    assert!(
        cms.get_opt("dep").await.unwrap().is_none(),
        "dependent collected"
    );
    assert!(s.request_log().len() > before);
}

#[tokio::test]
async fn foreground_propagation_holds_owner_until_blocking_dependents_go() {
    let (_s, client) = server_with_widgets().await;
    let api = widgets(&client, "test");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "test");
    let owner = api
        .create(&PostParams::default(), &widget("fg", "fg.example.com"))
        .await
        .unwrap();
    let mut dep = owned_cm("held", &owner, true);
    dep.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&PostParams::default(), &dep).await.unwrap();

    api.delete("fg", &DeleteParams::foreground()).await.unwrap();
    let o = api.get("fg").await.unwrap();
    assert!(o.metadata.deletion_timestamp.is_some());
    assert!(o.finalizers().iter().any(|f| f == "foregroundDeletion"));
    let d = cms.get("held").await.unwrap();
    assert!(
        d.metadata.deletion_timestamp.is_some(),
        "dependent is being deleted"
    );

    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(cms.get_opt("held").await.unwrap().is_none());
    assert!(
        api.get_opt("fg").await.unwrap().is_none(),
        "owner released once dependents are gone"
    );
}

#[tokio::test]
async fn orphan_propagation_removes_owner_references() {
    let (_s, client) = server_with_widgets().await;
    let api = widgets(&client, "test");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "test");
    let owner = api
        .create(&PostParams::default(), &widget("orph", "orph.example.com"))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &owned_cm("kept", &owner, false))
        .await
        .unwrap();
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        ..DeleteParams::default()
    };
    api.delete("orph", &dp).await.unwrap();
    assert!(api.get_opt("orph").await.unwrap().is_none());
    let kept = cms.get("kept").await.unwrap();
    assert!(kept.metadata.owner_references.is_none());
}

#[tokio::test]
async fn preconditions_are_checked() {
    let (s, client) = server_with_widgets().await;
    let raw = Raw::new(&s);
    let api = widgets(&client, "test");
    api.create(&PostParams::default(), &widget("pre", "pre.example.com"))
        .await
        .unwrap();
    let a = raw
        .send(
            "DELETE",
            "/apis/example.com/v1/namespaces/test/widgets/pre",
            Some("application/json"),
            Some(json!({"preconditions": {"uid": "not-the-uid"}})),
        )
        .await;
    assert_eq!(a.status, 409);
    assert!(
        a.body["message"]
            .as_str()
            .unwrap()
            .contains("Precondition failed")
    );
    assert!(api.get_opt("pre").await.unwrap().is_some());
}

#[tokio::test]
async fn delete_collection_with_selector() {
    let (s, client) = server_with_widgets().await;
    let raw = Raw::new(&s);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "test");
    for (n, l) in [("a", "x"), ("b", "x"), ("c", "y")] {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": n, "labels": {"g": l}}})).unwrap();
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let r = raw
        .send(
            "DELETE",
            "/api/v1/namespaces/test/configmaps?labelSelector=g%3Dx",
            None,
            None,
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["items"].as_array().unwrap().len(), 2);
    let left: Vec<String> = cms
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| c.name_any())
        .collect();
    assert_eq!(left, vec!["c"]);
}

#[tokio::test]
async fn deleting_the_crd_deletes_objects_and_stops_serving() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let (s, client) = server_with_widgets().await;
    let raw = Raw::new(&s);
    let api = widgets(&client, "test");
    api.create(&PostParams::default(), &with_finalizer("last"))
        .await
        .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds.get("widgets.example.com").await.unwrap();
    let conds = crd.status.unwrap().conditions.unwrap();
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "NamesAccepted" && c.status == "True")
    );

    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    // Held by the instance's finalizer: still served, instance marked for deletion.
    let held = api.get("last").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    let refused = raw
        .post("/apis/example.com/v1/namespaces/test/widgets",
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "new"}, "spec": {"domain": "n.example.com"}}))
        .await;
    assert_eq!(refused.status, 405);
    api.patch(
        "last",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    common::eventually("CRD gone", Duration::from_secs(5), || {
        let crds = crds.clone();
        async move {
            crds.get_opt("widgets.example.com")
                .await
                .unwrap()
                .is_none()
                .then_some(())
        }
    })
    .await;
    assert_eq!(
        raw.get("/apis/example.com/v1/namespaces/test/widgets")
            .await
            .status,
        404
    );
    assert_eq!(raw.get("/apis/example.com/v1").await.status, 404);
}

#[tokio::test]
async fn terminating_namespace_refuses_new_content_until_emptied() {
    use k8s_openapi::api::core::v1::Namespace;
    let (_s, client) = server_with_widgets().await;
    let api = widgets(&client, "test");
    api.create(&PostParams::default(), &with_finalizer("stuck"))
        .await
        .unwrap();
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.delete("test", &DeleteParams::default()).await.unwrap();
    let ns = nss.get("test").await.unwrap();
    assert!(ns.metadata.deletion_timestamp.is_some());
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Terminating"));
    match api
        .create(&PostParams::default(), &widget("late", "late.example.com"))
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 403);
            assert_eq!(s.reason, "Forbidden");
            assert!(
                s.message.contains("because it is being terminated"),
                "{}",
                s.message
            );
        }
        e => panic!("unexpected {e}"),
    }
    api.patch(
        "stuck",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(
        nss.get_opt("test").await.unwrap().is_none(),
        "namespace removed once empty"
    );
}
