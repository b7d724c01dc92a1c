//! The NetworkPolicy (`networkPolicy.enabled`): off by default; when on, it selects the
//! operator's pods and allows exactly the traffic the operator needs: the Kubernetes API, the
//! Mailtarget API and cluster DNS out, the metrics port in from the listed peers and the `helm
//! test` Pod.

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyPeer, NetworkPolicyPort,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use super::helm::{RenderOptions, Rendered, all_options, defaults, render_ok, require_helm};

fn policy(r: &Rendered) -> NetworkPolicy {
    serde_json::from_value(r.one("NetworkPolicy").clone()).expect("a NetworkPolicy")
}

fn tcp(port: i32) -> NetworkPolicyPort {
    NetworkPolicyPort {
        port: Some(IntOrString::Int(port)),
        protocol: Some("TCP".into()),
        ..Default::default()
    }
}

fn cidrs(rule: &NetworkPolicyEgressRule) -> Vec<String> {
    rule.to
        .iter()
        .flatten()
        .filter_map(|p| p.ip_block.as_ref().map(|b| b.cidr.clone()))
        .collect()
}

/// The egress rule whose peers are exactly `blocks`.
fn rule_to<'a>(p: &'a NetworkPolicy, blocks: &[&str]) -> &'a NetworkPolicyEgressRule {
    let rules = p
        .spec
        .as_ref()
        .and_then(|s| s.egress.as_ref())
        .expect("egress");
    rules
        .iter()
        .find(|r| cidrs(r) == blocks)
        .unwrap_or_else(|| panic!("no egress rule to {blocks:?}: {rules:#?}"))
}

/// True when `selector`'s matchLabels all appear in `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    selector["matchLabels"]
        .as_object()
        .is_some_and(|m| !m.is_empty() && m.iter().all(|(k, v)| &labels[k] == v))
}

/// Off by default; `networkPolicy.enabled` with the API server's addresses renders one.
#[test]
fn network_policy_is_opt_in() {
    if !require_helm("network_policy_is_opt_in") {
        return;
    }
    assert!(defaults().of_kind("NetworkPolicy").is_empty());
    let r = render_ok(&RenderOptions::default().set(
        "networkPolicy",
        json!({"enabled": true, "kubernetesApi": {"cidrs": ["10.0.0.1/32"]}}),
    ));
    let p = policy(&r);
    // Defaults: the Mailtarget API anywhere on 443; the API server on 443 and 6443.
    let api = rule_to(&p, &["0.0.0.0/0", "::/0"]);
    assert_eq!(api.ports.as_deref(), Some(&[tcp(443)][..]));
    let kube = rule_to(&p, &["10.0.0.1/32"]);
    assert_eq!(kube.ports.as_deref(), Some(&[tcp(443), tcp(6443)][..]));
}

/// Every option on: the policy selects exactly the operator's pods, lets out the API server's
/// endpoints, the Mailtarget API, DNS and the extra rule, and lets in only the metrics port
/// from the helm test Pod and the listed peers.
#[test]
fn network_policy_allows_what_the_operator_needs() {
    if !require_helm("network_policy_allows_what_the_operator_needs") {
        return;
    }
    let r = all_options();
    let raw = r.one("NetworkPolicy");
    let p = policy(r);
    let spec = p.spec.as_ref().expect("a spec");
    let deployment = r.one("Deployment");
    assert_eq!(
        raw["spec"]["podSelector"]["matchLabels"], deployment["spec"]["selector"]["matchLabels"],
        "the policy selects exactly the operator's pods"
    );
    assert_eq!(
        spec.policy_types.as_deref(),
        Some(&["Ingress".to_string(), "Egress".to_string()][..])
    );

    let kube = rule_to(&p, &["192.0.2.10/32", "192.0.2.11/32"]);
    assert_eq!(kube.ports.as_deref(), Some(&[tcp(6443)][..]));
    let api = rule_to(&p, &["198.51.100.0/24"]);
    assert_eq!(api.ports.as_deref(), Some(&[tcp(443), tcp(3128)][..]));
    let egress = spec.egress.as_ref().expect("egress");
    let dns = egress
        .iter()
        .find(|r| {
            r.to.iter().flatten().any(|peer| {
                peer.pod_selector
                    .as_ref()
                    .and_then(|s| s.match_labels.as_ref())
                    .is_some_and(|m| m.get("k8s-app").map(String::as_str) == Some("kube-dns"))
                    && peer
                        .namespace_selector
                        .as_ref()
                        .and_then(|s| s.match_labels.as_ref())
                        .is_some_and(|m| {
                            m.get("kubernetes.io/metadata.name").map(String::as_str)
                                == Some("kube-system")
                        })
            })
        })
        .expect("a rule to kube-dns in kube-system");
    let mut dns_ports: Vec<(String, i32)> = dns
        .ports
        .iter()
        .flatten()
        .map(|p| {
            let port = match &p.port {
                Some(IntOrString::Int(n)) => *n,
                other => panic!("DNS port {other:?}"),
            };
            (p.protocol.clone().unwrap_or_default(), port)
        })
        .collect();
    dns_ports.sort();
    assert_eq!(
        dns_ports,
        [("TCP".to_string(), 53), ("UDP".to_string(), 53)]
    );
    rule_to(&p, &["169.254.20.10/32"]);
    assert_eq!(
        egress.len(),
        4,
        "API server, Mailtarget, DNS, the extra rule"
    );

    let ingress = spec.ingress.as_ref().expect("ingress");
    assert_eq!(ingress.len(), 1, "only the metrics port");
    let rule = &ingress[0];
    let port_names: Vec<&IntOrString> = rule
        .ports
        .iter()
        .flatten()
        .filter_map(|p| p.port.as_ref())
        .collect();
    assert_eq!(port_names, [&IntOrString::String("metrics".into())]);
    let container_ports = &deployment["spec"]["template"]["spec"]["containers"][0]["ports"];
    assert!(
        container_ports
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p["name"] == "metrics"),
        "the named port exists on the operator container"
    );
    let peers: &Vec<NetworkPolicyPeer> = rule.from.as_ref().expect("peers");
    assert_eq!(
        peers.len(),
        2,
        "the helm test Pod and the listed Prometheus"
    );
    let test_pod = &r.hooks[0];
    let from = &raw["spec"]["ingress"][0]["from"];
    assert!(
        selects(&from[0]["podSelector"], &test_pod["metadata"]["labels"]),
        "the helm test Pod may reach the metrics port: {from:#}"
    );
    assert!(
        from[0].get("namespaceSelector").is_none(),
        "same namespace only"
    );
    assert_eq!(
        from[1]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
        "monitoring"
    );
}

/// With no peer to admit (`helmTest.enabled: false`, `metricsFrom: []`), the policy admits no
/// one: no ingress rule is rendered. A rule with an empty `from` would match every source
/// (NetworkPolicy semantics), opening the metrics port to the whole cluster, against what
/// `values.yaml` and `NOTES.txt` say.
#[test]
fn network_policy_without_peers_admits_no_one() {
    if !require_helm("network_policy_without_peers_admits_no_one") {
        return;
    }
    let r = render_ok(
        &RenderOptions::default()
            .set(
                "networkPolicy",
                json!({"enabled": true, "kubernetesApi": {"cidrs": ["10.0.0.1/32"]}}),
            )
            .set("helmTest", json!({"enabled": false})),
    );
    let p = policy(&r);
    let spec = p.spec.as_ref().expect("a spec");
    assert!(
        spec.policy_types.iter().flatten().any(|t| t == "Ingress"),
        "ingress is governed by the policy"
    );
    let rules = spec.ingress.clone().unwrap_or_default();
    assert!(
        rules.is_empty(),
        "no ingress rule without peers: {rules:#?}"
    );
}
