//! Discovery, version and OpenAPI documents.
use crate::common;

use common::{Raw, server_with_widgets};
use mailtarget_test_apiserver::TestApiServer;

#[tokio::test]
async fn version_reports_1_32() {
    let server = TestApiServer::start().await.unwrap();
    let raw = Raw::new(&server);
    let v = raw.get("/version?timeout=32s").await;
    assert_eq!(v.status, 200);
    assert_eq!(v.body["major"], "1");
    assert_eq!(v.body["minor"], "32");
    assert_eq!(v.body["gitVersion"], "v1.32.0");
    let info = server.client().apiserver_version().await.unwrap();
    assert_eq!(info.minor, "32");
}

#[tokio::test]
async fn legacy_discovery_lists_builtins_and_crd_kinds() {
    let (server, _client) = server_with_widgets().await;
    let raw = Raw::new(&server);
    let api = raw.get("/api?timeout=32s").await;
    assert_eq!(api.body["versions"], serde_json::json!(["v1"]));
    assert_eq!(api.headers["content-type"], "application/json");
    let apis = raw.get("/apis").await;
    let groups: Vec<&str> = apis.body["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    for g in [
        "apiextensions.k8s.io",
        "coordination.k8s.io",
        "events.k8s.io",
        "example.com",
    ] {
        assert!(groups.contains(&g), "{g} missing from {groups:?}");
    }
    let list = raw.get("/apis/example.com/v1").await;
    let w = list.body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "widgets")
        .unwrap()
        .clone();
    assert_eq!(w["kind"], "Widget");
    assert_eq!(w["namespaced"], true);
    assert_eq!(w["shortNames"], serde_json::json!(["wd"]));
    assert_eq!(w["categories"], serde_json::json!(["gadgets"]));
    assert!(w["verbs"].as_array().unwrap().iter().any(|v| v == "watch"));
    assert!(
        list.body["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "widgets/status")
    );
    let core = raw.get("/api/v1").await;
    assert!(
        core.body["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "secrets")
    );
    assert_eq!(raw.get("/apis/nope.example/v1").await.status, 404);
}

#[tokio::test]
async fn kube_discovery_finds_the_crd_kind() {
    let (_server, client) = server_with_widgets().await;
    let discovery = kube::Discovery::new(client).run().await.unwrap();
    let (ar, caps) = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .find(|(ar, _)| ar.kind == "Widget")
        .expect("Widget discovered");
    assert_eq!(ar.plural, "widgets");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
}

#[tokio::test]
async fn openapi_v3_serves_index_and_patch_operations() {
    let (server, _client) = server_with_widgets().await;
    let raw = Raw::new(&server);
    let idx = raw.get("/openapi/v3?timeout=32s").await;
    assert_eq!(idx.status, 200);
    for p in [
        "api/v1",
        "apis/apiextensions.k8s.io/v1",
        "apis/example.com/v1",
    ] {
        assert!(idx.body["paths"].get(p).is_some(), "{p} missing");
    }
    let doc = raw.get("/openapi/v3/apis/example.com/v1").await;
    let op =
        &doc.body["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"]["patch"];
    assert_eq!(op["x-kubernetes-group-version-kind"]["kind"], "Widget");
    assert!(
        op["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation")
    );
    let content = op["requestBody"]["content"].as_object().unwrap();
    assert!(content.contains_key("application/merge-patch+json"));
    assert!(!content.contains_key("application/strategic-merge-patch+json"));
    assert_eq!(raw.get("/openapi/v2").await.status, 404);
}

#[tokio::test]
async fn unknown_paths_are_404_status_objects() {
    let server = TestApiServer::start().await.unwrap();
    let raw = Raw::new(&server);
    let a = raw
        .get("/apis/example.com/v1/namespaces/default/widgets")
        .await;
    assert_eq!(a.status, 404);
    assert_eq!(a.body["kind"], "Status");
    assert_eq!(a.body["reason"], "NotFound");
}
