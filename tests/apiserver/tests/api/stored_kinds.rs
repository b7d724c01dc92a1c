//! The stored-only built-in kinds (Deployment, ServiceAccount, Service, the four RBAC kinds,
//! PodDisruptionBudget, NetworkPolicy): served with discovery, typed round trips, strict field validation,
//! status and generation as in kube-apiserver, and tables; nothing acts on them.
use crate::common;

use common::Raw;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, Patch, PatchParams, PostParams};
use mailtarget_test_apiserver::TestApiServer;
use serde_json::json;

fn deployment() -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "op"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "op"}},
            "template": {
                "metadata": {"labels": {"app": "op"}},
                "spec": {"containers": [{"name": "op", "image": "example.test/op:1"}]}
            }
        },
        "status": {"replicas": 5}
    }))
    .expect("valid deployment")
}

#[tokio::test]
async fn discovery_lists_the_stored_kinds() {
    let server = TestApiServer::start().await.expect("server");
    let raw = Raw::new(&server);
    for (path, name, namespaced) in [
        ("/apis/apps/v1", "deployments", true),
        ("/api/v1", "serviceaccounts", true),
        ("/api/v1", "services", true),
        ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", false),
        (
            "/apis/rbac.authorization.k8s.io/v1",
            "clusterrolebindings",
            false,
        ),
        ("/apis/rbac.authorization.k8s.io/v1", "roles", true),
        ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", true),
        ("/apis/policy/v1", "poddisruptionbudgets", true),
        ("/apis/networking.k8s.io/v1", "networkpolicies", true),
    ] {
        let list = raw.get(path).await;
        let found = list.body["resources"]
            .as_array()
            .and_then(|a| a.iter().find(|r| r["name"] == name).cloned())
            .unwrap_or_else(|| panic!("{name} missing from {path}: {}", list.body));
        assert_eq!(found["namespaced"], namespaced, "{name}");
    }
    let deploy = raw.get("/apis/apps/v1").await;
    let resources = deploy.body["resources"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(resources.iter().any(|r| r["name"] == "deployments/status"));
    let d = resources
        .iter()
        .find(|r| r["name"] == "deployments")
        .cloned()
        .unwrap_or_default();
    assert_eq!(d["shortNames"], json!(["deploy"]));
    assert_eq!(d["categories"], json!(["all"]));
}

#[tokio::test]
async fn deployments_store_spec_reset_status_and_bump_generation() {
    let server = TestApiServer::start().await.expect("server");
    let api: Api<Deployment> = Api::namespaced(server.client(), "default");
    let created = api
        .create(&PostParams::default(), &deployment())
        .await
        .expect("created");
    assert_eq!(created.metadata.generation, Some(1));
    assert!(
        created.status.is_none(),
        "status is the server's to set on create"
    );
    let patched = merge(&api, json!({"spec": {"replicas": 3}})).await;
    assert_eq!(patched.metadata.generation, Some(2));
    let labelled = merge(&api, json!({"metadata": {"labels": {"x": "y"}}})).await;
    assert_eq!(
        labelled.metadata.generation,
        Some(2),
        "metadata does not bump"
    );
    // An unconditional PUT of a built-in is allowed, unlike for custom resources.
    let mut replaced = labelled.clone();
    replaced.metadata.resource_version = None;
    api.replace("op", &PostParams::default(), &replaced)
        .await
        .expect("unconditional replace");
}

#[tokio::test]
async fn rbac_and_other_kinds_round_trip_and_reject_unknown_fields() {
    let server = TestApiServer::start().await.expect("server");
    let client = server.client();
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let role: ClusterRole = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "reader"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
    }))
    .expect("valid role");
    let stored = roles
        .create(&PostParams::default(), &role)
        .await
        .expect("created");
    assert_eq!(stored.rules, role.rules);
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "default"}]
    }))
    .expect("valid binding");
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("created");
    for (kind, api_version, plural) in [
        ("Role", "rbac.authorization.k8s.io/v1", "roles"),
        (
            "RoleBinding",
            "rbac.authorization.k8s.io/v1",
            "rolebindings",
        ),
        ("ServiceAccount", "v1", "serviceaccounts"),
        ("Service", "v1", "services"),
        ("PodDisruptionBudget", "policy/v1", "poddisruptionbudgets"),
        ("NetworkPolicy", "networking.k8s.io/v1", "networkpolicies"),
    ] {
        let base = if api_version == "v1" {
            "/api/v1".to_string()
        } else {
            format!("/apis/{api_version}")
        };
        let raw = Raw::new(&server);
        let body =
            json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}, "bogus": 1});
        let answer = raw
            .post(
                &format!("{base}/namespaces/default/{plural}?fieldValidation=Strict"),
                body,
            )
            .await;
        assert_eq!(answer.status, 400, "{kind}: {}", answer.text);
        assert!(
            answer.text.contains("unknown field"),
            "{kind}: {}",
            answer.text
        );
    }
    let sa: ServiceAccount = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "op"}}),
    )
    .expect("valid");
    Api::<ServiceAccount>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &sa)
        .await
        .expect("created");
    let svc: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "op"},
        "spec": {"selector": {"app": "op"}, "ports": [{"name": "metrics", "port": 8080, "targetPort": "metrics"}]}
    }))
    .expect("valid");
    let svc = Api::<Service>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &svc)
        .await
        .expect("created");
    assert_eq!(svc.spec.and_then(|s| s.ports).map(|p| p.len()), Some(1));
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "op"},
        "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "op"}}}
    }))
    .expect("valid");
    let pdb = Api::<PodDisruptionBudget>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &pdb)
        .await
        .expect("created");
    assert_eq!(pdb.metadata.generation, Some(1));
    let role: Role = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "lease"},
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["op"], "verbs": ["get", "patch"]}]
    }))
    .expect("valid");
    Api::<Role>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &role)
        .await
        .expect("created");
    let rb: RoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "lease"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "lease"},
        "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "default"}]
    }))
    .expect("valid");
    Api::<RoleBinding>::namespaced(client, "default")
        .create(&PostParams::default(), &rb)
        .await
        .expect("created");
}

#[tokio::test]
async fn tables_show_kubectl_columns() {
    let server = TestApiServer::start().await.expect("server");
    let api: Api<Deployment> = Api::namespaced(server.client(), "default");
    api.create(&PostParams::default(), &deployment())
        .await
        .expect("created");
    let (names, table) = table(&server, "/apis/apps/v1/namespaces/default/deployments").await;
    assert_eq!(names, ["Name", "Ready", "Up-to-date", "Available", "Age"]);
    assert_eq!(table["rows"][0]["cells"][1], "0/2");
}

/// The Table kubectl asks for at `path`, and its column names.
async fn table(server: &TestApiServer, path: &str) -> (Vec<String>, serde_json::Value) {
    let answer = Raw::new(server)
        .send_with(
            "GET",
            path,
            None,
            Some("application/json;as=Table;v=v1;g=meta.k8s.io"),
            None,
        )
        .await;
    let names = answer.body["columnDefinitions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(str::to_string))
        .collect();
    (names, answer.body)
}

/// A NetworkPolicy is stored as given, carries a generation bumped by spec changes only (as
/// kube-apiserver's networkpolicy strategy does), and its table shows kubectl's Pod-Selector
/// column.
#[tokio::test]
async fn network_policies_store_spec_bump_generation_and_show_pod_selector() {
    let server = TestApiServer::start().await.expect("server");
    let api: Api<NetworkPolicy> = Api::namespaced(server.client(), "default");
    let policy: NetworkPolicy = serde_json::from_value(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "op"},
        "spec": {
            "podSelector": {
                "matchLabels": {"app": "op", "tier": "control"},
                "matchExpressions": [{"key": "zone", "operator": "In", "values": ["b", "a"]}]
            },
            "policyTypes": ["Ingress", "Egress"],
            "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.1/32"}}], "ports": [{"port": 6443, "protocol": "TCP"}]}]
        }
    }))
    .expect("valid policy");
    let created = api
        .create(&PostParams::default(), &policy)
        .await
        .expect("created");
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(created.spec, policy.spec);
    let labelled = merge(&api, json!({"metadata": {"labels": {"x": "y"}}})).await;
    assert_eq!(
        labelled.metadata.generation,
        Some(1),
        "metadata does not bump"
    );
    let changed = merge(&api, json!({"spec": {"policyTypes": ["Egress"]}})).await;
    assert_eq!(changed.metadata.generation, Some(2));
    let (names, table) = table(
        &server,
        "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies",
    )
    .await;
    assert_eq!(names, ["Name", "Pod-Selector", "Age"]);
    assert_eq!(
        table["rows"][0]["cells"][1],
        "app=op,tier=control,zone in (a,b)"
    );
}

/// A merge patch of the object `op`.
async fn merge<K>(api: &Api<K>, patch: serde_json::Value) -> K
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch("op", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("patched")
}
