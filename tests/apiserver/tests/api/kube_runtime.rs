//! kube-rs runtime pieces against the emulator, unchanged: watcher (list+watch and streaming
//! lists), reflector, Controller; plus recovery from dropped watches.
use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{server_with_widgets, widget, widgets};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::{Controller, WatchStreamExt, reflector, watcher};
use serde_json::json;

const T: Duration = Duration::from_secs(20);

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"v": "0"}})).unwrap()
}

async fn sees_applied_objects(config: watcher::Config) {
    let (s, client) = server_with_widgets().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "test");
    cms.create(&PostParams::default(), &cm("pre"))
        .await
        .unwrap();
    let mut stream = watcher(cms.clone(), config).applied_objects().boxed();
    let first = tokio::time::timeout(T, stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first.name_any(), "pre");
    cms.create(&PostParams::default(), &cm("post"))
        .await
        .unwrap();
    let second = tokio::time::timeout(T, stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(second.name_any(), "post");
    // The stream survives a dropped watch: it re-watches and keeps delivering.
    s.faults().drop_watches();
    cms.patch(
        "post",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "1"}})),
    )
    .await
    .unwrap();
    let third = loop {
        let o = tokio::time::timeout(T, stream.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if o.name_any() == "post"
            && o.data.as_ref().and_then(|d| d.get("v")).map(String::as_str) == Some("1")
        {
            break o;
        }
    };
    assert_eq!(third.name_any(), "post");
}

#[tokio::test]
async fn watcher_default_mode() {
    sees_applied_objects(watcher::Config::default()).await;
}

#[tokio::test]
async fn watcher_streaming_lists() {
    sees_applied_objects(watcher::Config::default().streaming_lists()).await;
}

#[tokio::test]
async fn watcher_with_page_size_and_label_selector() {
    let (_s, client) = server_with_widgets().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "test");
    for i in 0..5 {
        let mut c = cm(&format!("c{i}"));
        c.metadata.labels = Some([("even".to_string(), (i % 2 == 0).to_string())].into());
        cms.create(&PostParams::default(), &c).await.unwrap();
    }
    let cfg = watcher::Config::default()
        .labels("even=true")
        .page_size(1)
        .any_semantic();
    let (reader, writer) = reflector::store();
    let stream = reflector(writer, watcher(cms, cfg)).applied_objects();
    tokio::spawn(stream.for_each(|_| async {}));
    tokio::time::timeout(T, reader.wait_until_ready())
        .await
        .unwrap()
        .unwrap();
    let mut names: Vec<String> = reader.state().iter().map(|c| c.name_any()).collect();
    names.sort();
    assert_eq!(names, vec!["c0", "c2", "c4"]);
}

#[tokio::test]
async fn controller_reconciles_custom_resources() {
    let (_s, client) = server_with_widgets().await;
    let api = widgets(&client, "test");
    api.create(&PostParams::default(), &widget("ctl", "ctl.example.com"))
        .await
        .unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let ctx = Arc::new((api.clone(), seen.clone()));
    let controller = Controller::new_with(api.clone(), watcher::Config::default(), common::widget_ar())
        .run(
            |obj: Arc<kube::api::DynamicObject>, ctx: Arc<(Api<kube::api::DynamicObject>, Arc<AtomicUsize>)>| async move {
                ctx.1.fetch_add(1, Ordering::SeqCst);
                let generation = obj.metadata.generation.unwrap_or_default();
                let status = json!({"status": {"observedGeneration": generation, "conditions": [
                    {"type": "Ready", "status": "True", "reason": "Reconciled", "message": "ok",
                     "lastTransitionTime": "2024-01-01T00:00:00Z", "observedGeneration": generation}]}});
                ctx.0
                    .patch_status(&obj.name_any(), &PatchParams::default(), &Patch::Merge(status))
                    .await?;
                Ok::<_, kube::Error>(Action::await_change())
            },
            |_obj, _err: &kube::Error, _ctx| Action::requeue(Duration::from_millis(100)),
            ctx,
        )
        .for_each(|_| async {});
    let handle = tokio::spawn(controller);
    common::eventually("status written by the controller", T, || {
        let api = api.clone();
        async move {
            let w = api.get("ctl").await.ok()?;
            (w.data["status"]["observedGeneration"] == 1).then_some(())
        }
    })
    .await;
    api.patch(
        "ctl",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 3}})),
    )
    .await
    .unwrap();
    common::eventually("reconciled the new generation", T, || {
        let api = api.clone();
        async move {
            let w = api.get("ctl").await.ok()?;
            (w.data["status"]["observedGeneration"] == 2).then_some(())
        }
    })
    .await;
    assert!(seen.load(Ordering::SeqCst) >= 2);
    handle.abort();
}
