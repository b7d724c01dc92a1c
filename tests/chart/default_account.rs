//! The ClusterAccount `default` the chart creates from its credentials and api values: the
//! account resources without `accountRef` use, its Secret the credentials Secret in the release
//! namespace (where the operator is told ClusterAccount Secrets live).

use mailtarget_operator::crd::{ClusterAccount, KeyScope, RequestBudget};
use serde_json::json;

use super::helm::{RenderOptions, Rendered, all_options, defaults, render_ok, require_helm};

fn account(r: &Rendered) -> ClusterAccount {
    serde_json::from_value(r.one("ClusterAccount").clone())
        .unwrap_or_else(|e| panic!("the ClusterAccount does not parse: {e}"))
}

/// The value of the operator's environment variable `name` in the render's Deployment.
fn env(r: &Rendered, name: &str) -> Option<String> {
    r.one("Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"] == name)
        .and_then(|e| e["value"].as_str().map(str::to_string))
}

/// Defaults: `default`, cluster-scoped (no namespace), reading the credentials Secret the
/// Deployment mounts, with the api values' addresses and budget and the company scope; no
/// selector (every namespace may use it; only the release namespace may adopt).
#[test]
fn default_account_follows_the_credentials_and_api_values() {
    if !require_helm("default_account_follows_the_credentials_and_api_values") {
        return;
    }
    let r = defaults();
    let a = account(r);
    assert_eq!(a.metadata.name.as_deref(), Some("default"));
    assert_eq!(a.metadata.namespace, None, "cluster-scoped");
    let c = &a.spec.connection;
    assert_eq!(
        c.credentials.secret_ref.name,
        "mailtarget-operator-credentials"
    );
    assert_eq!(c.credentials.secret_ref.key, "apiKey");
    assert_eq!(c.api_url, "https://apiconfig.mailtarget.co");
    assert_eq!(c.transmission_url, "https://transmission.mailtarget.co/v1");
    assert_eq!(c.request_budget, RequestBudget::default());
    assert_eq!(c.scope, Some(KeyScope::Company));
    assert!(a.spec.namespace_selector.is_none());
    assert!(a.spec.adoption_namespace_selector.is_none());
    // The Deployment mounts the same Secret, and tells the operator its Secrets are in the
    // release namespace.
    let volumes = &r.one("Deployment")["spec"]["template"]["spec"]["volumes"];
    let mounted = volumes
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == "credentials")
        .map(|v| v["secret"]["secretName"].clone());
    assert_eq!(mounted, Some(json!("mailtarget-operator-credentials")));
    assert_eq!(
        env(r, "MAILTARGET_CLUSTER_RESOURCE_NAMESPACE").as_deref(),
        Some("mailtarget-system")
    );
}

/// Every option: the chart-created Secret's key, the api values' addresses, concurrency and
/// rate, and both selectors as given.
#[test]
fn default_account_takes_every_option() {
    if !require_helm("default_account_takes_every_option") {
        return;
    }
    let r = all_options();
    let a = account(r);
    let c = &a.spec.connection;
    let secret = r.one("Secret");
    assert_eq!(
        Some(c.credentials.secret_ref.name.as_str()),
        secret["metadata"]["name"].as_str()
    );
    assert_eq!(c.credentials.secret_ref.key, "key");
    assert!(secret["data"].get("key").is_some());
    assert_eq!(c.api_url, "https://apiconfig.example.test");
    assert_eq!(c.transmission_url, "https://transmission.example.test/v1");
    assert_eq!(
        c.request_budget,
        RequestBudget {
            requests_per_second: Some(20),
            concurrency: 4
        }
    );
    let selector = a.spec.namespace_selector.expect("namespaceSelector");
    assert_eq!(
        selector
            .match_labels
            .unwrap_or_default()
            .get("mailtarget.co/tenant"),
        Some(&"true".to_string())
    );
    let adoption = a
        .spec
        .adoption_namespace_selector
        .expect("adoptionNamespaceSelector");
    assert_eq!(
        adoption.match_expressions.unwrap_or_default()[0].operator,
        "In"
    );

    // An existing Secret is referenced by name and key; `create: false` renders none.
    let existing = render_ok(&RenderOptions::default().set(
        "credentials",
        json!({"existingSecret": "mailtarget-api", "apiKeyKey": "token"}),
    ));
    let c = account(&existing).spec.connection;
    assert_eq!(c.credentials.secret_ref.name, "mailtarget-api");
    assert_eq!(c.credentials.secret_ref.key, "token");
    let none = render_ok(&RenderOptions::default().set("defaultAccount", json!({"create": false})));
    assert!(none.of_kind("ClusterAccount").is_empty());
}
