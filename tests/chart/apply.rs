//! The rendered chart applies cleanly with the real kubectl to the test API server (or to the
//! cluster named by `E2E_KUBECONFIG`): CRDs first, as Helm does, then the manifests; applying
//! again changes nothing.

use std::process::Output;

use mailtarget_test_apiserver::TestCluster;
use serde_json::json;

use super::helm::{RenderOptions, Rendered, render_ok, require_helm, root};

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn kubectl_ok(cluster: &TestCluster, args: &[&str], input: &[u8]) -> String {
    let out = cluster.kubectl_with_input(args, input);
    assert!(
        out.status.success(),
        "kubectl {args:?} failed:\n{}",
        text(&out)
    );
    text(&out)
}

/// A release name unique to the test namespace, so that cluster-scoped objects of parallel
/// runs on a real cluster do not collide.
fn release(cluster: &TestCluster) -> String {
    format!("mt-{}", cluster.namespace().trim_start_matches("e2e-"))
}

fn install_crds(cluster: &TestCluster, r: &Rendered) {
    kubectl_ok(
        cluster,
        &["apply", "--server-side", "--field-manager=helm", "-f", "-"],
        r.crds_yaml.as_bytes(),
    );
    for crd in super::helm::parse_stream(&r.crds_yaml) {
        let name = format!(
            "crd/{}",
            crd["metadata"]["name"].as_str().unwrap_or_default()
        );
        kubectl_ok(
            cluster,
            &[
                "wait",
                "--for=condition=Established",
                "--timeout=30s",
                &name,
            ],
            b"",
        );
    }
}

/// Counts objects kubectl reported as `created` (or `serverside-applied`).
fn created(out: &str) -> usize {
    out.lines()
        .filter(|l| l.ends_with(" created") || l.ends_with(" serverside-applied"))
        .count()
}

async fn finish(cluster: TestCluster, r: &Rendered) {
    // Remove the cluster-scoped objects and those outside the test namespace (a real cluster
    // keeps them otherwise); the test namespace goes with cleanup. CRDs stay: other tests may
    // use them.
    for (namespace, yaml) in by_namespace(&cluster, r) {
        let _ = cluster.kubectl_with_input(
            [
                "delete",
                "--ignore-not-found",
                "--wait=false",
                "--namespace",
                namespace.as_str(),
                "-f",
                "-",
            ],
            yaml.as_bytes(),
        );
    }
    cluster.cleanup().await;
}

/// The render's objects as one YAML stream per namespace (cluster-scoped objects with the
/// test namespace's).
fn by_namespace(cluster: &TestCluster, r: &Rendered) -> std::collections::BTreeMap<String, String> {
    let mut groups: std::collections::BTreeMap<String, String> = Default::default();
    for obj in &r.objects {
        let namespace = obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or(cluster.namespace())
            .to_string();
        let yaml = serde_yaml::to_string(obj).unwrap_or_else(|e| panic!("{e}"));
        groups
            .entry(namespace)
            .or_default()
            .push_str(&format!("---\n{yaml}"));
    }
    groups
}

/// Default values: `kubectl apply` creates every object, a second apply leaves them unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_render_applies_with_kubectl() {
    if !TestCluster::require_kubectl("default_render_applies_with_kubectl")
        || !require_helm("default_render_applies_with_kubectl")
    {
        return;
    }
    let cluster = TestCluster::start().await.expect("test cluster");
    let r = render_ok(&RenderOptions {
        release: release(&cluster),
        namespace: cluster.namespace().to_string(),
        ..Default::default()
    });
    install_crds(&cluster, &r);
    let first = kubectl_ok(&cluster, &["apply", "-f", "-"], r.yaml.as_bytes());
    assert_eq!(
        created(&first),
        r.objects.len(),
        "every object created:\n{first}"
    );
    let again = kubectl_ok(&cluster, &["apply", "-f", "-"], r.yaml.as_bytes());
    assert_eq!(
        again.lines().filter(|l| l.ends_with(" unchanged")).count(),
        r.objects.len(),
        "a second apply changes nothing:\n{again}"
    );
    let name = format!("deployment/{}-mailtarget-operator", release(&cluster));
    let shown = kubectl_ok(
        &cluster,
        &[
            "get",
            &name,
            "-o",
            "jsonpath={.spec.template.spec.containers[0].securityContext.readOnlyRootFilesystem}",
        ],
        b"",
    );
    assert_eq!(shown.trim(), "true");
    finish(cluster, &r).await;
}

/// Every option on (the ServiceMonitor CRD installed first, the watched namespaces being the
/// test's and `default`, the NetworkPolicy included): `kubectl apply --server-side`, as Flux
/// and Argo CD apply, creates every object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_options_render_applies_with_kubectl() {
    if !TestCluster::require_kubectl("all_options_render_applies_with_kubectl")
        || !require_helm("all_options_render_applies_with_kubectl")
    {
        return;
    }
    let cluster = TestCluster::start().await.expect("test cluster");
    let fixture = root().join("tests/chart/servicemonitor-crd.yaml");
    let fixture = fixture.to_string_lossy().into_owned();
    kubectl_ok(&cluster, &["apply", "--server-side", "-f", &fixture], b"");
    kubectl_ok(
        &cluster,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=30s",
            "crd/servicemonitors.monitoring.coreos.com",
        ],
        b"",
    );
    let r = render_ok(
        &RenderOptions {
            release: release(&cluster),
            namespace: cluster.namespace().to_string(),
            ..RenderOptions::all_options()
        }
        .set("watchNamespaces", json!([cluster.namespace(), "default"])),
    );
    install_crds(&cluster, &r);
    let out = apply_by_namespace(&cluster, &r);
    assert_eq!(
        created(&out),
        r.objects.len(),
        "every object applied:\n{out}"
    );
    let listed = kubectl_ok(
        &cluster,
        &[
            "get",
            "servicemonitors,poddisruptionbudgets,roles,rolebindings,secrets,services,serviceaccounts,deployments,networkpolicies,clusterroles,clusterrolebindings,clusteraccounts",
            "-A",
            "-o",
            "name",
        ],
        b"",
    );
    for obj in &r.objects {
        let kind = obj["kind"].as_str().unwrap_or_default().to_lowercase();
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        assert!(
            listed
                .lines()
                .any(|l| l.ends_with(&format!("/{name}")) && l.contains(&kind)),
            "{kind}/{name} is not in the cluster:\n{listed}"
        );
    }
    // Server-side apply again: no conflict, nothing changes.
    apply_by_namespace(&cluster, &r);
    finish(cluster, &r).await;
}

/// `kubectl apply --server-side` of the render, one namespace at a time as Helm sends each
/// object to its own namespace (kubectl refuses objects of a namespace other than its
/// context's without `--namespace`); cluster-scoped objects go with the release namespace.
fn apply_by_namespace(cluster: &TestCluster, r: &Rendered) -> String {
    let mut out = String::new();
    for (namespace, yaml) in by_namespace(cluster, r) {
        out.push_str(&kubectl_ok(
            cluster,
            &[
                "apply",
                "--server-side",
                "--field-manager=helm",
                "--namespace",
                &namespace,
                "-f",
                "-",
            ],
            yaml.as_bytes(),
        ));
    }
    out
}
