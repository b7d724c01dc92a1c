//! The real kubectl against the emulator (or the E2E_KUBECONFIG cluster): apply, server-side
//! apply, get with printer columns, -o yaml, -w, wait, delete with finalizers, create secret and
//! configmap (protobuf bodies), api-resources, validation errors.
//!
//! Skipped with a printed message when kubectl is absent, unless CI=true (then they fail).
use crate::common;

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use common::widgets;
use kube::api::{Patch, PatchParams};
use mailtarget_test_apiserver::TestCluster;
use serde_json::json;

const T: Duration = Duration::from_secs(30);

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

fn ok(what: &str, out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kubectl {what} failed\nstdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

async fn cluster_with_crd(test: &str) -> Option<TestCluster> {
    if !TestCluster::require_kubectl(test) {
        return None;
    }
    let c = TestCluster::start().await.expect("cluster starts");
    let out = c.kubectl(["apply", "-f", &fixture("widget-crd.yaml")]);
    let text = ok("apply crd", &out);
    assert!(
        text.contains("customresourcedefinition.apiextensions.k8s.io/widgets.example.com"),
        "{text}"
    );
    let wait = c.kubectl([
        "wait",
        "--for=condition=Established",
        "crd/widgets.example.com",
        "--timeout=30s",
    ]);
    ok("wait crd", &wait);
    Some(c)
}

#[tokio::test]
async fn apply_crd_then_api_resources_and_get_crd() {
    let Some(c) = cluster_with_crd("apply_crd_then_api_resources_and_get_crd").await else {
        return;
    };
    let res = ok(
        "api-resources",
        &c.kubectl(["api-resources", "--api-group=example.com"]),
    );
    let line = res
        .lines()
        .find(|l| l.starts_with("widgets"))
        .unwrap_or_else(|| panic!("{res}"));
    assert!(
        line.contains("wd") && line.contains("Widget") && line.contains("true"),
        "{line}"
    );
    let crds = ok("get crd", &c.kubectl(["get", "crd"]));
    assert!(crds.contains("widgets.example.com"), "{crds}");
    assert!(crds.contains("CREATED AT"), "{crds}");
}

#[tokio::test]
async fn apply_create_reapply_and_get_with_columns() {
    let Some(c) = cluster_with_crd("apply_create_reapply_and_get_with_columns").await else {
        return;
    };
    let created = ok(
        "apply",
        &c.kubectl(["apply", "-f", &fixture("widget-a.yaml")]),
    );
    assert!(
        created.contains("widget.example.com/widget-a created"),
        "{created}"
    );
    let unchanged = ok(
        "apply same",
        &c.kubectl(["apply", "-f", &fixture("widget-a.yaml")]),
    );
    assert!(unchanged.contains("unchanged"), "{unchanged}");
    let configured = ok(
        "apply changed",
        &c.kubectl(["apply", "-f", &fixture("widget-a-changed.yaml")]),
    );
    assert!(
        configured.contains("widget.example.com/widget-a configured"),
        "{configured}"
    );
    if let Some(s) = c.emulator() {
        assert!(
            s.request_log().iter().any(|r| r.method == "PATCH"
                && r.path_and_query.contains("/widgets/widget-a")
                && r.content_type.as_deref() == Some("application/merge-patch+json")),
            "re-apply sent a merge patch"
        );
    }
    let w = widgets(&c.client(), c.namespace())
        .get("widget-a")
        .await
        .unwrap();
    assert_eq!(w.data["spec"]["size"], 5);
    assert_eq!(w.data["spec"]["color"], "blue");

    let table = ok("get", &c.kubectl(["get", "widgets"]));
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        vec!["NAME", "DOMAIN", "SIZE", "READY", "AGE"],
        "{table}"
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    // READY has no value yet: the server sends a null cell, which kubectl prints blank.
    assert_eq!(row.len(), 4, "{table}");
    assert_eq!(&row[..3], &["widget-a", "a.example.com", "5"], "{table}");
    let short = ok(
        "get wd",
        &c.kubectl(["get", "wd", "widget-a", "--show-labels"]),
    );
    assert!(short.contains("app=demo"), "{short}");
    let yaml = ok(
        "get -o yaml",
        &c.kubectl(["get", "widget", "widget-a", "-o", "yaml"]),
    );
    assert!(yaml.contains("domain: a.example.com"), "{yaml}");
    assert!(yaml.contains("kind: Widget"), "{yaml}");
    let all_ns = ok("get -A", &c.kubectl(["get", "widgets", "-A"]));
    assert!(
        all_ns.lines().any(|l| l.starts_with(c.namespace())),
        "{all_ns}"
    );
}

#[tokio::test]
async fn server_side_apply() {
    let Some(c) = cluster_with_crd("server_side_apply").await else {
        return;
    };
    let out = ok(
        "apply --server-side",
        &c.kubectl(["apply", "--server-side", "-f", &fixture("widget-a.yaml")]),
    );
    assert!(
        out.contains("widget.example.com/widget-a serverside-applied"),
        "{out}"
    );
    let again = ok(
        "apply --server-side changed",
        &c.kubectl([
            "apply",
            "--server-side",
            "-f",
            &fixture("widget-a-changed.yaml"),
        ]),
    );
    assert!(again.contains("serverside-applied"), "{again}");
    let w = widgets(&c.client(), c.namespace())
        .get("widget-a")
        .await
        .unwrap();
    assert_eq!(w.data["spec"]["size"], 5);
    if let Some(s) = c.emulator() {
        assert!(s.request_log().iter().any(|r| r.content_type.as_deref()
            == Some("application/apply-patch+yaml")
            && r.path_and_query.contains("fieldManager=kubectl")));
    }
}

#[tokio::test]
async fn invalid_custom_resource_is_rejected_with_the_field() {
    let Some(c) = cluster_with_crd("invalid_custom_resource_is_rejected_with_the_field").await
    else {
        return;
    };
    let out = c.kubectl(["apply", "-f", &fixture("widget-invalid.yaml")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("The Widget \"widget-bad\" is invalid"),
        "{err}"
    );
    assert!(err.contains("spec.size: Invalid value: 42"), "{err}");
}

#[tokio::test]
async fn get_watch_prints_changes() {
    let Some(c) = cluster_with_crd("get_watch_prints_changes").await else {
        return;
    };
    ok(
        "apply",
        &c.kubectl(["apply", "-f", &fixture("widget-a.yaml")]),
    );
    let mut child = c
        .kubectl_spawn(["get", "widget", "widget-a", "-w"])
        .unwrap();
    let first = child.wait_for_line(T, |l| l.contains("widget-a"));
    assert!(
        first.is_some(),
        "initial row; seen {:?}",
        child.lines_seen()
    );
    let api = widgets(&c.client(), c.namespace());
    // kubectl prints the first row from a GET, then opens the watch; a change made before the
    // watch is open is folded into the synthetic ADDED event kubectl skips. Wait for the watch.
    if let Some(s) = c.emulator() {
        common::eventually("kubectl get -w is watching", T, || {
            let log = s.request_log();
            async move {
                log.iter()
                    .any(|r| r.path_and_query.contains("watch=true"))
                    .then_some(())
            }
        })
        .await;
    }
    let mut changed = None;
    for size in 3..=8 {
        api.patch(
            "widget-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": size}})),
        )
        .await
        .unwrap();
        let want = size.to_string();
        changed = child.wait_for_line(Duration::from_secs(5), |l| {
            l.contains("widget-a") && l.split_whitespace().nth(2) == Some(want.as_str())
        });
        if changed.is_some() {
            break;
        }
    }
    let seen = child.lines_seen().to_vec();
    let stderr = child.stop();
    assert!(changed.is_some(), "seen {seen:?}, stderr {stderr}");
}

#[tokio::test]
async fn wait_for_ready_condition_respects_observed_generation() {
    let Some(c) = cluster_with_crd("wait_for_ready_condition_respects_observed_generation").await
    else {
        return;
    };
    ok(
        "apply",
        &c.kubectl(["apply", "-f", &fixture("widget-a.yaml")]),
    );
    let api = widgets(&c.client(), c.namespace());
    let cond = |g: i64| {
        json!({"status": {"observedGeneration": g, "conditions": [{"type": "Ready", "status": "True",
        "reason": "Done", "message": "ok", "lastTransitionTime": "2024-01-01T00:00:00Z", "observedGeneration": g}]}})
    };
    // A Ready condition for an older generation does not satisfy kubectl wait.
    api.patch_status("widget-a", &PatchParams::default(), &Patch::Merge(cond(0)))
        .await
        .unwrap();
    let mut child = c
        .kubectl_spawn([
            "wait",
            "--for=condition=Ready",
            "widget/widget-a",
            "--timeout=30s",
        ])
        .unwrap();
    if let Some(s) = c.emulator() {
        common::eventually("kubectl wait is watching", T, || {
            let log = s.request_log();
            async move {
                log.iter()
                    .any(|r| {
                        r.path_and_query.contains("watch=true")
                            && r.path_and_query.contains("widget-a")
                    })
                    .then_some(())
            }
        })
        .await;
    }
    api.patch_status("widget-a", &PatchParams::default(), &Patch::Merge(cond(1)))
        .await
        .unwrap();
    let met = child.wait_for_line(T, |l| l.contains("condition met"));
    let stderr = child.stop();
    assert!(met.is_some(), "stderr: {stderr}");
}

#[tokio::test]
async fn wait_with_watch_list_client_uses_streaming_lists() {
    let Some(c) = cluster_with_crd("wait_with_watch_list_client_uses_streaming_lists").await else {
        return;
    };
    ok(
        "apply",
        &c.kubectl(["apply", "-f", &fixture("widget-a.yaml")]),
    );
    let api = widgets(&c.client(), c.namespace());
    let status = json!({"status": {"observedGeneration": 1, "conditions": [{"type": "Ready", "status": "True",
        "reason": "Done", "message": "ok", "lastTransitionTime": "2024-01-01T00:00:00Z", "observedGeneration": 1}]}});
    api.patch_status("widget-a", &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
    let out = c.kubectl_env(
        [
            "wait",
            "--for=condition=Ready",
            "widget/widget-a",
            "--timeout=30s",
        ],
        &[],
        &[("KUBE_FEATURE_WatchListClient", "true")],
    );
    assert!(ok("wait (watch-list)", &out).contains("condition met"));
    if let Some(s) = c.emulator() {
        assert!(
            s.request_log()
                .iter()
                .any(|r| r.path_and_query.contains("sendInitialEvents=true"))
        );
    }
}

#[tokio::test]
async fn delete_waits_for_finalizer_removal() {
    let Some(c) = cluster_with_crd("delete_waits_for_finalizer_removal").await else {
        return;
    };
    ok(
        "apply",
        &c.kubectl(["apply", "-f", &fixture("widget-a.yaml")]),
    );
    let api = widgets(&c.client(), c.namespace());
    api.patch(
        "widget-a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold"]}})),
    )
    .await
    .unwrap();
    let mut child = c
        .kubectl_spawn(["delete", "widget", "widget-a", "--timeout=30s"])
        .unwrap();
    common::eventually("deletionTimestamp set", T, || {
        let api = api.clone();
        async move {
            api.get("widget-a")
                .await
                .ok()?
                .metadata
                .deletion_timestamp
                .map(|_| ())
        }
    })
    .await;
    api.patch(
        "widget-a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let deleted = child.wait_for_line(T, |l| l.contains("deleted"));
    let stderr = child.stop();
    assert!(deleted.is_some(), "stderr: {stderr}");
    assert!(api.get_opt("widget-a").await.unwrap().is_none());
}

#[tokio::test]
async fn create_secret_and_configmap() {
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    if !TestCluster::require_kubectl("create_secret_and_configmap") {
        return;
    }
    let c = TestCluster::start().await.unwrap();
    let out = ok(
        "create secret",
        &c.kubectl(["create", "secret", "generic", "x", "--from-literal=a=b"]),
    );
    assert!(out.contains("secret/x created"), "{out}");
    let out = ok(
        "create configmap",
        &c.kubectl(["create", "configmap", "cm1", "--from-literal=k=v"]),
    );
    assert!(out.contains("configmap/cm1 created"), "{out}");
    let secrets: kube::Api<Secret> = kube::Api::namespaced(c.client(), c.namespace());
    let s = secrets.get("x").await.unwrap();
    assert_eq!(s.data.unwrap()["a"].0, b"b".to_vec());
    let cms: kube::Api<ConfigMap> = kube::Api::namespaced(c.client(), c.namespace());
    assert_eq!(cms.get("cm1").await.unwrap().data.unwrap()["k"], "v");
    let table = ok("get secrets", &c.kubectl(["get", "secrets"]));
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, vec!["NAME", "TYPE", "DATA", "AGE"], "{table}");
    if let Some(s) = c.emulator() {
        assert!(s.request_log().iter().any(|r| r.method == "POST"
            && r.content_type.as_deref() == Some("application/vnd.kubernetes.protobuf")));
    }
    // The client-side dry run piped into apply sends JSON.
    let yaml = ok(
        "dry-run",
        &c.kubectl([
            "create",
            "configmap",
            "cm2",
            "--from-literal=k=w",
            "--dry-run=client",
            "-o",
            "yaml",
        ]),
    );
    let applied = c.kubectl_with_input(["apply", "-f", "-"], yaml.as_bytes());
    assert!(ok("apply -f -", &applied).contains("configmap/cm2 created"));
}
