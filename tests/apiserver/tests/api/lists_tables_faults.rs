//! Lists (paging, resourceVersion), Table answers, injected faults and the request log.
use crate::common;

use std::time::Duration;

use common::{Raw, server_with_widgets, widget, widgets};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use mailtarget_test_apiserver::RequestFilter;
use serde_json::json;

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

#[tokio::test]
async fn list_pages_with_limit_and_continue() {
    let (s, client) = server_with_widgets().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "test");
    for i in 0..5 {
        let c: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("p{i}")}})).unwrap();
        cms.create(&PostParams::default(), &c).await.unwrap();
    }
    let first = cms.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(first.items.len(), 2);
    assert_eq!(first.metadata.remaining_item_count, Some(3));
    let token = first.metadata.continue_.clone().unwrap();
    // A change after the first page does not show in later pages of the same list.
    let late: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "p9"}})).unwrap();
    cms.create(&PostParams::default(), &late).await.unwrap();
    let second = cms
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    let third = cms
        .list(
            &ListParams::default()
                .limit(2)
                .continue_token(second.metadata.continue_.as_deref().unwrap()),
        )
        .await
        .unwrap();
    let names: Vec<String> = first
        .items
        .iter()
        .chain(&second.items)
        .chain(&third.items)
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, vec!["p0", "p1", "p2", "p3", "p4"]);
    assert!(third.metadata.continue_.is_none());
    assert_eq!(
        first.metadata.resource_version,
        third.metadata.resource_version
    );
    let raw = Raw::new(&s);
    let bad = raw
        .get("/api/v1/namespaces/test/configmaps?continue=garbage")
        .await;
    assert_eq!(bad.status, 400);
}

#[tokio::test]
async fn cluster_wide_list_and_selectors() {
    let (s, client) = server_with_widgets().await;
    let raw = Raw::new(&s);
    let api = widgets(&client, "test");
    let mut a = widget("a", "a.example.com");
    a.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
    api.create(&PostParams::default(), &a).await.unwrap();
    api.create(&PostParams::default(), &widget("b", "b.example.com"))
        .await
        .unwrap();
    let all = raw.get("/apis/example.com/v1/widgets").await;
    assert_eq!(all.body["items"].as_array().unwrap().len(), 2);
    assert_eq!(all.body["kind"], "WidgetList");
    let web = raw
        .get("/apis/example.com/v1/widgets?labelSelector=app%3Dweb")
        .await;
    assert_eq!(web.body["items"].as_array().unwrap().len(), 1);
    let notweb = raw
        .get("/apis/example.com/v1/namespaces/test/widgets?labelSelector=app!%3Dweb")
        .await;
    assert_eq!(notweb.body["items"][0]["metadata"]["name"], "b");
    let by_name = raw
        .get("/apis/example.com/v1/namespaces/test/widgets?fieldSelector=metadata.name%3Da")
        .await;
    assert_eq!(by_name.body["items"].as_array().unwrap().len(), 1);
    let unsupported = raw
        .get("/apis/example.com/v1/namespaces/test/widgets?fieldSelector=spec.size%3D1")
        .await;
    assert_eq!(unsupported.status, 400);
}

#[tokio::test]
async fn tables_use_printer_columns() {
    let (s, client) = server_with_widgets().await;
    let raw = Raw::new(&s);
    let api = widgets(&client, "test");
    api.create(&PostParams::default(), &widget("t", "t.example.com"))
        .await
        .unwrap();
    api.patch_status(
        "t",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})),
    )
    .await
    .unwrap();
    let t = raw
        .send_with(
            "GET",
            "/apis/example.com/v1/namespaces/test/widgets?limit=500",
            None,
            Some(TABLE),
            None,
        )
        .await;
    assert_eq!(t.body["kind"], "Table");
    let cols: Vec<&str> = t.body["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols, vec!["Name", "Domain", "Size", "Ready", "Age"]);
    let row = &t.body["rows"][0];
    assert_eq!(row["cells"][0], "t");
    assert_eq!(row["cells"][1], "t.example.com");
    assert_eq!(row["cells"][2], 2);
    assert_eq!(row["cells"][3], "True");
    assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(row["object"]["metadata"]["namespace"], "test");
    let single = raw
        .send_with("GET", "/api/v1/namespaces/default", None, Some(TABLE), None)
        .await;
    assert_eq!(single.body["rows"][0]["cells"][1], "Active");
    let meta = raw
        .send_with(
            "GET",
            "/apis/example.com/v1/namespaces/test/widgets",
            None,
            Some("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"),
            None,
        )
        .await;
    assert_eq!(meta.body["kind"], "PartialObjectMetadataList");
    assert!(meta.body["items"][0].get("spec").is_none());
}

#[tokio::test]
async fn injected_failures_latency_and_request_log() {
    let (s, client) = server_with_widgets().await;
    let api = widgets(&client, "test");
    s.faults().fail_next(
        2,
        500,
        RequestFilter::path("/widgets/f1").with_method("GET"),
    );
    s.faults().fail_next(1, 409, RequestFilter::method("POST"));
    for _ in 0..2 {
        match api.get("f1").await.unwrap_err() {
            kube::Error::Api(st) => {
                assert_eq!(st.code, 500);
                assert_eq!(st.reason, "InternalError");
            }
            e => panic!("unexpected {e}"),
        }
    }
    match api
        .create(&PostParams::default(), &widget("f1", "f1.example.com"))
        .await
        .unwrap_err()
    {
        kube::Error::Api(st) => assert_eq!(st.reason, "Conflict"),
        e => panic!("unexpected {e}"),
    }
    // Injections are used up: the next ones go through.
    api.create(&PostParams::default(), &widget("f1", "f1.example.com"))
        .await
        .unwrap();
    s.faults().set_latency(Duration::from_millis(10));
    api.get("f1").await.unwrap();
    s.faults().set_latency(Duration::ZERO);
    let log = s.request_log();
    let gets: Vec<u16> = log
        .iter()
        .filter(|r| r.method == "GET" && r.path_and_query.ends_with("/widgets/f1"))
        .map(|r| r.status)
        .collect();
    assert_eq!(gets, vec![500, 500, 200]);
    let post = log.iter().rev().find(|r| r.method == "POST").unwrap();
    assert_eq!(post.status, 201);
    assert_eq!(post.content_type.as_deref(), Some("application/json"));
}

/// A dropped connection ends the matching request at once with no answer (a transport error at
/// the client, not a `Status`), and is counted; other requests, and the same one once the fault
/// is cleared, are answered.
#[tokio::test]
async fn dropped_connections_end_requests_unanswered() {
    let (s, client) = server_with_widgets().await;
    let api = widgets(&client, "test");
    api.create(&PostParams::default(), &widget("d1", "d1.example.com"))
        .await
        .unwrap();
    s.faults()
        .drop_connections(RequestFilter::path("/widgets/d1").with_method("GET"));
    for _ in 0..2 {
        let err = tokio::time::timeout(Duration::from_secs(10), api.get("d1"))
            .await
            .expect("a dropped connection ends the request at once")
            .unwrap_err();
        assert!(!matches!(err, kube::Error::Api(_)), "an answer: {err}");
    }
    assert_eq!(s.faults().dropped_requests(), 2);
    api.create(&PostParams::default(), &widget("d2", "d2.example.com"))
        .await
        .unwrap();
    s.faults().clear_drops();
    api.get("d1").await.unwrap();
    let gets = s
        .request_log()
        .iter()
        .filter(|r| r.method == "GET" && r.path_and_query.ends_with("/widgets/d1"))
        .count();
    assert_eq!(gets, 1, "dropped requests are not in the log");
}

#[tokio::test]
async fn unsupported_things_are_refused_loudly() {
    let (s, _client) = server_with_widgets().await;
    let raw = Raw::new(&s);
    let w = raw.get("/api/v1/watch/namespaces/test/configmaps").await;
    assert_eq!(w.status, 501);
    assert!(
        w.body["message"]
            .as_str()
            .unwrap()
            .starts_with("not implemented by the test API server")
    );
    let fin = raw
        .send(
            "PUT",
            "/api/v1/namespaces/test/finalize",
            Some("application/json"),
            Some(json!({})),
        )
        .await;
    assert_eq!(fin.status, 501);
    let pb_only = raw
        .send_with(
            "GET",
            "/api/v1/namespaces/test/configmaps",
            None,
            Some("application/vnd.kubernetes.protobuf"),
            None,
        )
        .await;
    assert_eq!(pb_only.status, 406);
    let post_item = raw
        .post("/api/v1/namespaces/test/configmaps/x", json!({}))
        .await;
    assert_eq!(post_item.status, 405);
}
