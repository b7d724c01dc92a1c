//! Watches over raw HTTP: initial events, replay from a resourceVersion, 410, bookmarks,
//! streaming lists, selectors, timeouts and dropped streams.
use crate::common;

use std::time::Duration;

use common::{Raw, server_with_widgets, widget, widgets};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use mailtarget_test_apiserver::{ServerOptions, TestApiServer};
use serde_json::json;

const T: Duration = Duration::from_secs(10);

fn cm(name: &str, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
}

#[tokio::test]
async fn watch_from_zero_sends_synthetic_added_then_changes() {
    let (s, client) = server_with_widgets().await;
    let raw = Raw::new(&s);
    let api = widgets(&client, "test");
    api.create(&PostParams::default(), &widget("w1", "w1.example.com"))
        .await
        .unwrap();
    let path = "/apis/example.com/v1/namespaces/test/widgets?fieldSelector=metadata.name%3Dw1&resourceVersion=0&watch=true";
    let watcher = {
        let raw = Raw {
            base: raw.base.clone(),
            http: raw.http.clone(),
        };
        tokio::spawn(async move { raw.watch_events(path, 2, T).await })
    };
    // The synthetic ADDED arrives first; then our change.
    common::eventually("watch open", T, || {
        let log = s.request_log();
        async move {
            log.iter()
                .any(|r| r.path_and_query.contains("watch=true"))
                .then_some(())
        }
    })
    .await;
    api.patch(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 3}})),
    )
    .await
    .unwrap();
    let events = watcher.await.unwrap();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[1]["type"], "MODIFIED");
    assert_eq!(events[1]["object"]["spec"]["size"], 3);
}

#[tokio::test]
async fn watch_from_resource_version_replays_only_newer_changes() {
    let (s, client) = server_with_widgets().await;
    let raw = Raw::new(&s);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "test");
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let list = raw.get("/api/v1/namespaces/test/configmaps").await;
    let rv = list.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    cms.create(&PostParams::default(), &cm("b", json!({})))
        .await
        .unwrap();
    cms.delete("a", &Default::default()).await.unwrap();
    let events = raw
        .watch_events(
            &format!("/api/v1/namespaces/test/configmaps?watch=true&resourceVersion={rv}"),
            2,
            T,
        )
        .await;
    let seen: Vec<(String, String)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().into(),
                e["object"]["metadata"]["name"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![("ADDED".into(), "b".into()), ("DELETED".into(), "a".into())]
    );
}

#[tokio::test]
async fn too_old_resource_version_is_410_for_watch_and_exact_list() {
    let opts = ServerOptions {
        history_window: 3,
        ..ServerOptions::default()
    };
    let s = TestApiServer::start_with(opts).await.unwrap();
    let client = s.client();
    let raw = Raw::new(&s);
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let first = cms
        .create(&PostParams::default(), &cm("x0", json!({})))
        .await
        .unwrap();
    let old_rv = first.resource_version().unwrap();
    for i in 1..6 {
        cms.create(&PostParams::default(), &cm(&format!("x{i}"), json!({})))
            .await
            .unwrap();
    }
    let events = raw
        .watch_events(
            &format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={old_rv}"),
            1,
            T,
        )
        .await;
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(events[0]["object"]["code"], 410);
    assert_eq!(events[0]["object"]["reason"], "Expired");
    let exact = raw
        .get(&format!("/api/v1/namespaces/default/configmaps?resourceVersion={old_rv}&resourceVersionMatch=Exact"))
        .await;
    assert_eq!(exact.status, 410);
    let too_new = raw
        .get("/api/v1/namespaces/default/configmaps?resourceVersion=999999")
        .await;
    assert_eq!(too_new.status, 504);
}

#[tokio::test]
async fn streaming_list_ends_initial_events_with_annotated_bookmark() {
    let (s, client) = server_with_widgets().await;
    let raw = Raw::new(&s);
    let cms: Api<ConfigMap> = Api::namespaced(client, "test");
    cms.create(&PostParams::default(), &cm("one", json!({})))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &cm("two", json!({})))
        .await
        .unwrap();
    let events = raw
        .watch_events(
            "/api/v1/namespaces/test/configmaps?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
            3,
            T,
        )
        .await;
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[1]["type"], "ADDED");
    assert_eq!(events[2]["type"], "BOOKMARK");
    assert_eq!(
        events[2]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert!(
        events[2]["object"]["metadata"]["resourceVersion"]
            .as_str()
            .is_some()
    );
    let bad = raw
        .get("/api/v1/namespaces/test/configmaps?watch=true&sendInitialEvents=true")
        .await;
    assert_eq!(bad.status, 422);
}

#[tokio::test]
async fn bookmarks_are_sent_when_allowed() {
    let opts = ServerOptions {
        bookmark_interval: Duration::from_millis(50),
        ..ServerOptions::default()
    };
    let s = TestApiServer::start_with(opts).await.unwrap();
    let raw = Raw::new(&s);
    let rv =
        raw.get("/api/v1/namespaces/default/configmaps").await.body["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();
    let events = raw
        .watch_events(&format!("/api/v1/namespaces/default/configmaps?watch=true&allowWatchBookmarks=true&resourceVersion={rv}"), 1, T)
        .await;
    assert_eq!(events[0]["type"], "BOOKMARK");
    assert_eq!(
        events[0]["object"]["metadata"]["resourceVersion"],
        rv.as_str()
    );
}

#[tokio::test]
async fn label_selector_watch_sees_objects_enter_and_leave() {
    let (s, client) = server_with_widgets().await;
    let raw = Raw::new(&s);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "test");
    cms.create(&PostParams::default(), &cm("sel", json!({"tier": "back"})))
        .await
        .unwrap();
    let rv =
        raw.get("/api/v1/namespaces/test/configmaps").await.body["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();
    let pp = PatchParams::default();
    cms.patch(
        "sel",
        &pp,
        &Patch::Merge(json!({"metadata": {"labels": {"tier": "front"}}})),
    )
    .await
    .unwrap();
    cms.patch("sel", &pp, &Patch::Merge(json!({"data": {"k": "v"}})))
        .await
        .unwrap();
    cms.patch(
        "sel",
        &pp,
        &Patch::Merge(json!({"metadata": {"labels": {"tier": null}}})),
    )
    .await
    .unwrap();
    let events = raw
        .watch_events(
            &format!("/api/v1/namespaces/test/configmaps?watch=true&resourceVersion={rv}&labelSelector=tier%20in%20(front)"),
            3,
            T,
        )
        .await;
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, vec!["ADDED", "MODIFIED", "DELETED"]);
}

#[tokio::test]
async fn timeout_seconds_and_drop_watches_end_streams() {
    let (s, _client) = server_with_widgets().await;
    let raw = Raw::new(&s);
    // timeoutSeconds=1 ends the stream by itself: the read returns before our 10 s bound.
    let started = std::time::Instant::now();
    let events = raw
        .watch_events(
            "/api/v1/namespaces/test/configmaps?watch=true&resourceVersion=1&timeoutSeconds=1",
            1,
            T,
        )
        .await;
    assert!(events.is_empty());
    assert!(started.elapsed() < T);

    let resp = raw
        .http
        .get(format!(
            "{}/api/v1/namespaces/test/configmaps?watch=true&resourceVersion=1",
            raw.base
        ))
        .send()
        .await
        .unwrap();
    s.faults().drop_watches();
    let body = tokio::time::timeout(T, resp.text())
        .await
        .expect("stream ended after drop_watches");
    assert!(body.unwrap().is_empty());
}
