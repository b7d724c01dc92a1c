//! TestCluster in both modes: emulated, and "real cluster" through E2E_KUBECONFIG (pointed at a
//! second emulator, so the external code path runs without a cluster). One test in this binary
//! because it sets a process-wide environment variable.
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams};
use mailtarget_test_apiserver::{TestApiServer, TestCluster};
use serde_json::json;

#[tokio::test]
async fn test_cluster_emulated_and_external_modes() {
    // Emulated.
    // SAFETY: this binary holds a single test, so no other thread reads the environment.
    unsafe { std::env::remove_var("E2E_KUBECONFIG") };
    let c = TestCluster::start().await.unwrap();
    assert!(c.emulator().is_some());
    assert!(c.namespace().starts_with("e2e-"));
    let cms: Api<ConfigMap> = Api::default_namespaced(c.client());
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "here"}})).unwrap();
    let made = cms.create(&PostParams::default(), &cm).await.unwrap();
    assert_eq!(made.metadata.namespace.as_deref(), Some(c.namespace()));
    let kubeconfig = std::fs::read_to_string(c.kubeconfig_path()).unwrap();
    assert!(kubeconfig.contains(&format!("namespace: {}", c.namespace())));
    if TestCluster::kubectl_available() {
        let out = c.kubectl(["get", "configmap", "here", "-o", "name"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "configmap/here"
        );
    }
    drop(c);

    // External: E2E_KUBECONFIG names another server.
    let real = TestApiServer::start().await.unwrap();
    // SAFETY: as above.
    unsafe { std::env::set_var("E2E_KUBECONFIG", real.kubeconfig_path()) };
    let c = TestCluster::start().await.unwrap();
    unsafe { std::env::remove_var("E2E_KUBECONFIG") };
    assert!(c.emulator().is_none());
    assert_eq!(c.kubeconfig_path(), real.kubeconfig_path());
    let nss: Api<Namespace> = Api::all(real.client());
    let ns = c.namespace().to_string();
    assert!(
        nss.get_opt(&ns).await.unwrap().is_some(),
        "namespace made on the external cluster"
    );
    // Dropping deletes the namespace (on a thread of its own, so this runtime keeps going).
    tokio::task::spawn_blocking(move || drop(c)).await.unwrap();
    assert!(
        nss.get_opt(&ns).await.unwrap().is_none(),
        "namespace deleted on drop"
    );
}
