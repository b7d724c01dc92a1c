//! Cluster-scoped custom resources (as the operator's ClusterAccount), served as kube-apiserver
//! serves them: no namespace in their paths or objects, a namespace sent in a body cleared
//! (k8s.io/apiserver `rest.EnsureObjectNamespaceMatchesRequestNamespace`: "cluster-scoped,
//! clear namespace"), no route under `/namespaces/{ns}/`, a status subresource, list and watch
//! across the cluster, and no deletion with a namespace.
use crate::common;

use std::time::Duration;

use common::{Raw, create_namespace};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use mailtarget_test_apiserver::TestApiServer;
use serde_json::json;

fn gizmo_ar() -> ApiResource {
    ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Gizmo".into(),
        plural: "gizmos".into(),
    }
}

fn gizmo(name: &str, namespace: Option<&str>) -> DynamicObject {
    let mut metadata = json!({"name": name});
    if let Some(ns) = namespace {
        metadata["namespace"] = json!(ns);
    }
    serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Gizmo",
        "metadata": metadata,
        "spec": {"size": 1}
    }))
    .expect("valid gizmo")
}

/// A server with the cluster-scoped Gizmo CRD (status subresource) and namespace `test`.
async fn server() -> (TestApiServer, kube::Client) {
    let server = TestApiServer::start().await.expect("server starts");
    let client = server.client();
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gizmos.example.com"},
        "spec": {
            "group": "example.com", "scope": "Cluster",
            "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                    "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
                }}}
            }]
        }
    }))
    .expect("typed CRD");
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .expect("CRD created");
    create_namespace(&client, "test").await;
    (server, client)
}

/// Objects live outside namespaces: a namespace in the body is cleared on create, there is no
/// route under a namespace, and discovery says `namespaced: false`.
#[tokio::test]
async fn cluster_scoped_objects_have_no_namespace() {
    let (server, client) = server().await;
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &gizmo_ar());
    let created = api
        .create(&PostParams::default(), &gizmo("a", Some("test")))
        .await
        .unwrap();
    assert_eq!(created.metadata.namespace, None, "namespace cleared");
    assert_eq!(api.get("a").await.unwrap().metadata.namespace, None);

    let raw = Raw::new(&server);
    let under_namespace = raw
        .get("/apis/example.com/v1/namespaces/test/gizmos/a")
        .await;
    assert_eq!(under_namespace.status, 404);
    let listed_in_namespace = raw.get("/apis/example.com/v1/namespaces/test/gizmos").await;
    assert_eq!(listed_in_namespace.status, 404);

    let discovery = raw.get("/apis/example.com/v1").await;
    let gizmos = discovery.body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "gizmos")
        .cloned()
        .unwrap();
    assert_eq!(gizmos["namespaced"], false);
}

/// The status subresource, server-side apply and list/watch work at cluster scope; status
/// writes leave the generation alone.
#[tokio::test]
async fn status_apply_and_watch_at_cluster_scope() {
    let (server, client) = server().await;
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &gizmo_ar());
    api.create(&PostParams::default(), &gizmo("b", None))
        .await
        .unwrap();
    let patched = api
        .patch_status(
            "b",
            &PatchParams::apply("test").force(),
            &Patch::Apply(json!({
                "apiVersion": "example.com/v1", "kind": "Gizmo",
                "status": {"ready": true}
            })),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["status"]["ready"], true);
    assert_eq!(patched.metadata.generation, Some(1));
    let applied = api
        .patch(
            "b",
            &PatchParams::apply("test").force(),
            &Patch::Apply(json!({
                "apiVersion": "example.com/v1", "kind": "Gizmo",
                "metadata": {"name": "b"}, "spec": {"size": 3}
            })),
        )
        .await
        .unwrap();
    assert_eq!(applied.metadata.generation, Some(2));
    assert_eq!(applied.metadata.namespace, None);

    let listed = api.list(&Default::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    let raw = Raw::new(&server);
    let events = raw
        .watch_events(
            "/apis/example.com/v1/gizmos?watch=true",
            1,
            Duration::from_secs(10),
        )
        .await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["type"], "ADDED");
    assert!(events[0]["object"]["metadata"].get("namespace").is_none());
}

/// Deleting a namespace leaves cluster-scoped objects alone (the namespace controller deletes
/// only namespaced objects).
#[tokio::test]
async fn namespace_deletion_leaves_cluster_scoped_objects() {
    let (_server, client) = server().await;
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &gizmo_ar());
    api.create(&PostParams::default(), &gizmo("c", None))
        .await
        .unwrap();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete("test", &DeleteParams::default())
        .await
        .unwrap();
    common::eventually("namespace test gone", Duration::from_secs(10), || {
        let namespaces = namespaces.clone();
        async move {
            namespaces
                .get_opt("test")
                .await
                .unwrap()
                .is_none()
                .then_some(())
        }
    })
    .await;
    assert!(api.get_opt("c").await.unwrap().is_some());
}

/// A namespace sent in the body of a replace or a server-side apply of a cluster-scoped object is
/// cleared too (the same rule runs before every update).
#[tokio::test]
async fn namespace_in_an_update_body_is_cleared() {
    let (_server, client) = server().await;
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &gizmo_ar());
    let mut obj = api
        .create(&PostParams::default(), &gizmo("d", None))
        .await
        .unwrap();
    obj.metadata.namespace = Some("test".into());
    obj.data["spec"]["size"] = json!(5);
    let replaced = api
        .replace("d", &PostParams::default(), &obj)
        .await
        .unwrap();
    assert_eq!(replaced.metadata.namespace, None);
    let applied = api
        .patch(
            "d",
            &PatchParams::apply("test").force(),
            &Patch::Apply(json!({
                "apiVersion": "example.com/v1", "kind": "Gizmo",
                "metadata": {"name": "d", "namespace": "test"}, "spec": {"size": 6}
            })),
        )
        .await
        .unwrap();
    assert_eq!(applied.metadata.namespace, None);
    assert_eq!(api.get("d").await.unwrap().metadata.namespace, None);
}
