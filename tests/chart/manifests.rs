//! Every rendered manifest is the Kubernetes type it claims to be (k8s-openapi), and the
//! Deployment runs the operator as the issue asks: configuration through the operator's own
//! environment variables, hardened security context, probes, leader election.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, EnvVar};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::helm::{RenderOptions, Rendered, all_options, defaults, render_ok, require_helm};

/// Parses `v` as `T` and serializes it back; the result must equal `v`, so that no field was
/// misspelt, misplaced or of the wrong type (k8s-openapi would drop or reject it).
fn roundtrip<T: DeserializeOwned + Serialize>(v: &Value) -> Result<(), String> {
    let typed: T = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    let back = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    if &back == v {
        Ok(())
    } else {
        // Never the data of a Secret (the chart's values hold an API key).
        Err(format!(
            "fields lost or changed by the typed form:\nrendered: {}\ntyped:    {}",
            super::common::without_secret_data(Some(v)),
            super::common::without_secret_data(Some(&back))
        ))
    }
}

/// Checks one rendered object against its claimed type.
fn check_typed(obj: &Value) -> Result<(), String> {
    use k8s_openapi::api::{apps, core, networking, policy, rbac};
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default();
    match (api_version, kind) {
        ("apps/v1", "Deployment") => roundtrip::<apps::v1::Deployment>(obj),
        ("v1", "ServiceAccount") => roundtrip::<core::v1::ServiceAccount>(obj),
        ("v1", "Service") => roundtrip::<core::v1::Service>(obj),
        ("v1", "Secret") => roundtrip::<core::v1::Secret>(obj),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => roundtrip::<rbac::v1::ClusterRole>(obj),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            roundtrip::<rbac::v1::ClusterRoleBinding>(obj)
        }
        ("rbac.authorization.k8s.io/v1", "Role") => roundtrip::<rbac::v1::Role>(obj),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => roundtrip::<rbac::v1::RoleBinding>(obj),
        ("policy/v1", "PodDisruptionBudget") => roundtrip::<policy::v1::PodDisruptionBudget>(obj),
        ("networking.k8s.io/v1", "NetworkPolicy") => {
            roundtrip::<networking::v1::NetworkPolicy>(obj)
        }
        // Only as a hook: the `helm test` Pod.
        ("v1", "Pod") => roundtrip::<core::v1::Pod>(obj),
        // The operator's own type: the chart's ClusterAccount `default`.
        ("mailtarget.co/v1alpha1", "ClusterAccount") => {
            roundtrip::<mailtarget_operator::crd::ClusterAccount>(obj)
        }
        // No k8s-openapi type: checked field by field in `service_monitor_scrapes_the_service`.
        ("monitoring.coreos.com/v1", "ServiceMonitor") => Ok(()),
        _ => Err(format!("unexpected kind {api_version}/{kind}")),
    }
}

/// The renders most checks run on: defaults, every option, and the other branches.
fn renders() -> Vec<(&'static str, &'static Rendered)> {
    static OTHER: std::sync::OnceLock<Rendered> = std::sync::OnceLock::new();
    let other = OTHER.get_or_init(|| {
        render_ok(
            &RenderOptions::default()
                .set("leaderElection", json!({"enabled": false}))
                .set("credentials", json!({"existingSecret": "mine"})),
        )
    });
    vec![
        ("defaults", defaults()),
        ("all options", all_options()),
        ("no leader election, existing secret", other),
    ]
}

/// Every manifest parses as its k8s-openapi type with nothing lost, in every render; hooks and
/// CRDs too.
#[test]
fn rendered_manifests_parse_as_their_kinds() {
    if !require_helm("rendered_manifests_parse_as_their_kinds") {
        return;
    }
    for (what, r) in renders() {
        assert!(!r.objects.is_empty(), "{what}: nothing rendered");
        for obj in r.objects.iter().chain(&r.hooks) {
            if let Err(e) = check_typed(obj) {
                panic!("{what}: {}/{}: {e}", obj["kind"], obj["metadata"]["name"]);
            }
            assert!(
                obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm",
                "{what}: {} lacks the standard labels",
                obj["kind"]
            );
        }
        for crd in super::helm::parse_stream(&r.crds_yaml) {
            roundtrip::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>(&crd)
                .unwrap_or_else(|e| panic!("{what}: CRD {}: {e}", crd["metadata"]["name"]));
        }
    }
}

/// The defaults render the expected set of objects, and every option adds its object.
#[test]
fn objects_rendered_per_option() {
    if !require_helm("objects_rendered_per_option") {
        return;
    }
    let kinds = |r: &Rendered| {
        let mut k: Vec<String> = r
            .objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap_or_default().to_string())
            .collect();
        k.sort();
        k
    };
    assert_eq!(
        kinds(defaults()),
        [
            "ClusterAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Deployment",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount"
        ]
    );
    assert_eq!(
        kinds(all_options()),
        [
            "ClusterAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Deployment",
            "NetworkPolicy",
            "PodDisruptionBudget",
            "Role",
            "Role",
            "Role",
            "Role",
            "RoleBinding",
            "RoleBinding",
            "RoleBinding",
            "RoleBinding",
            "Secret",
            "Service",
            "ServiceAccount",
            "ServiceMonitor"
        ]
    );
    for r in [defaults(), all_options()] {
        let hooks: Vec<&str> = r.hooks.iter().filter_map(|h| h["kind"].as_str()).collect();
        assert_eq!(hooks, ["Pod"], "the helm test Pod is the one hook");
    }
    let no_rbac = render_ok(
        &RenderOptions::default()
            .set("rbac", json!({"create": false}))
            .set("serviceAccount", json!({"create": false, "name": "ops"})),
    );
    assert_eq!(kinds(&no_rbac), ["ClusterAccount", "Deployment", "Service"]);
    let no_test = render_ok(&RenderOptions::default().set("helmTest", json!({"enabled": false})));
    assert!(no_test.hooks.is_empty());
    let d: Deployment = typed(no_rbac.one("Deployment"));
    assert_eq!(pod_spec(&d).service_account_name.as_deref(), Some("ops"));
}

fn typed<T: DeserializeOwned>(v: &Value) -> T {
    serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{e}: {v:#}"))
}

fn pod_spec(d: &Deployment) -> &k8s_openapi::api::core::v1::PodSpec {
    d.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("a pod spec")
}

fn container(d: &Deployment) -> &Container {
    let spec = pod_spec(d);
    assert_eq!(spec.containers.len(), 1, "one container");
    &spec.containers[0]
}

fn env(c: &Container) -> BTreeMap<String, EnvVar> {
    c.env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), e.clone()))
        .collect()
}

fn env_value(c: &Container, name: &str) -> Option<String> {
    env(c).get(name).and_then(|e| e.value.clone())
}

/// The environment variables `mailtarget-operator run` reads (its clap definitions), with their
/// defaults, plus RUST_LOG (the global log filter).
fn operator_env() -> BTreeMap<String, Option<String>> {
    use clap::Args;
    let cmd = mailtarget_operator::controller::RunArgs::augment_args(clap::Command::new("run"));
    let mut out = BTreeMap::new();
    for arg in cmd.get_arguments() {
        if let Some(env) = arg.get_env() {
            let default = arg
                .get_default_values()
                .first()
                .map(|d| d.to_string_lossy().into_owned());
            out.insert(env.to_string_lossy().into_owned(), default);
        }
    }
    out.insert("RUST_LOG".into(), None);
    out
}

/// The pod runs non-root with a read-only root filesystem, no privilege escalation, no
/// capabilities and the RuntimeDefault seccomp profile; probes hit /healthz and /readyz on the
/// metrics port; the image tag defaults to appVersion.
#[test]
fn deployment_is_hardened_and_probed() {
    if !require_helm("deployment_is_hardened_and_probed") {
        return;
    }
    for (what, r) in renders() {
        let d: Deployment = typed(r.one("Deployment"));
        let pod = pod_spec(&d);
        let psc = pod.security_context.as_ref().expect("pod security context");
        assert_eq!(psc.run_as_non_root, Some(true), "{what}");
        assert_eq!(
            psc.seccomp_profile.as_ref().map(|s| s.type_.as_str()),
            Some("RuntimeDefault"),
            "{what}"
        );
        let c = container(&d);
        let sc = c
            .security_context
            .as_ref()
            .expect("container security context");
        assert_eq!(sc.run_as_non_root, Some(true), "{what}");
        assert_eq!(sc.read_only_root_filesystem, Some(true), "{what}");
        assert_eq!(sc.allow_privilege_escalation, Some(false), "{what}");
        assert_eq!(
            sc.capabilities.as_ref().and_then(|c| c.drop.clone()),
            Some(vec!["ALL".to_string()]),
            "{what}"
        );
        assert!(
            sc.capabilities
                .as_ref()
                .and_then(|c| c.add.as_ref())
                .is_none(),
            "{what}"
        );
        assert_eq!(
            sc.seccomp_profile.as_ref().map(|s| s.type_.as_str()),
            Some("RuntimeDefault"),
            "{what}"
        );
        let port = c
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some("metrics"))
            .expect("a metrics port");
        let addr = env_value(c, "METRICS_ADDR").expect("METRICS_ADDR");
        assert!(
            addr.ends_with(&format!(":{}", port.container_port)),
            "{what}: METRICS_ADDR {addr} does not use port {}",
            port.container_port
        );
        for (probe, path) in [
            (&c.liveness_probe, "/healthz"),
            (&c.readiness_probe, "/readyz"),
        ] {
            let get = probe
                .as_ref()
                .and_then(|p| p.http_get.as_ref())
                .expect("an HTTP probe");
            assert_eq!(get.path.as_deref(), Some(path), "{what}");
            assert_eq!(
                get.port,
                k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("metrics".into()),
                "{what}"
            );
        }
        assert!(
            pod.termination_grace_period_seconds.unwrap_or(0) >= 10,
            "{what}"
        );
        assert_eq!(c.args.as_deref(), Some(&["run".to_string()][..]), "{what}");
    }
    let d: Deployment = typed(defaults().one("Deployment"));
    assert_eq!(
        container(&d).image.as_deref(),
        Some(
            format!(
                "ghcr.io/mailtarget/mailtarget-operator:{}",
                env!("CARGO_PKG_VERSION")
            )
            .as_str()
        ),
        "the image tag defaults to appVersion, which is the crate version"
    );
}

/// The container sets only environment variables the operator reads, the values' defaults
/// equal the operator's own defaults, and the API key comes from the Secret.
#[test]
fn deployment_configures_the_operator_through_its_environment() {
    if !require_helm("deployment_configures_the_operator_through_its_environment") {
        return;
    }
    let known = operator_env();
    let defaults = defaults();
    let d: Deployment = typed(defaults.one("Deployment"));
    let c = container(&d);
    for name in env(c).keys() {
        assert!(
            known.contains_key(name),
            "the chart sets {name}, which `mailtarget-operator run` does not read; known: {:?}",
            known.keys()
        );
    }
    // The chart's defaults are the operator's defaults.
    for name in [
        "MAILTARGET_API_URL",
        "MAILTARGET_TRANSMISSION_URL",
        "MAILTARGET_API_TIMEOUT",
        "MAILTARGET_API_CONCURRENCY",
        "MAILTARGET_RESYNC_INTERVAL",
        "MAILTARGET_DETAIL_RESYNC_INTERVAL",
        "MAILTARGET_VERIFY_FIRST_INTERVAL",
        "MAILTARGET_VERIFY_MAX_INTERVAL",
        "MAILTARGET_RECONCILE_CONCURRENCY",
        "LEADER_ELECTION_LEASE_DURATION",
    ] {
        let chart = env_value(c, name).unwrap_or_else(|| panic!("{name} not set"));
        let operator = known.get(name).cloned().flatten();
        let same = match operator.as_deref() {
            Some(op) if op == chart => true,
            // URLs: the operator normalizes a bare host with a trailing slash.
            Some(op) => op.trim_end_matches('/') == chart.trim_end_matches('/'),
            None => false,
        };
        assert!(
            same,
            "{name}: chart default {chart:?}, operator default {operator:?}"
        );
    }
    for name in [
        "MAILTARGET_RESYNC_INTERVAL",
        "MAILTARGET_DETAIL_RESYNC_INTERVAL",
        "MAILTARGET_VERIFY_FIRST_INTERVAL",
        "MAILTARGET_VERIFY_MAX_INTERVAL",
    ] {
        let v = env_value(c, name).unwrap_or_default();
        assert!(
            humantime::parse_duration(&v).is_ok(),
            "{name}={v} is not a duration the operator parses"
        );
    }
    let all = all_options();
    let d: Deployment = typed(all.one("Deployment"));
    let c = container(&d);
    assert_eq!(
        humantime::parse_duration(&env_value(c, "MAILTARGET_RESYNC_INTERVAL").unwrap_or_default())
            .ok(),
        Some(std::time::Duration::from_secs(5400)),
        "1h30m is parsed by the operator as 90 minutes"
    );
    assert_eq!(
        env_value(c, "MAILTARGET_DETAIL_RESYNC_INTERVAL").as_deref(),
        Some("6h")
    );
    assert_eq!(
        env_value(c, "WATCH_NAMESPACE").as_deref(),
        Some("team-a,team-b")
    );
    assert_eq!(env_value(c, "LABEL_SELECTOR").as_deref(), Some("shard=a"));
    assert_eq!(env_value(c, "MAILTARGET_API_RPS").as_deref(), Some("20"));
    assert_eq!(env_value(c, "LOG_FORMAT").as_deref(), Some("text"));
    assert_eq!(env_value(c, "METRICS_ADDR").as_deref(), Some("[::]:9090"));
    for name in env(c).keys() {
        assert!(
            known.contains_key(name) || ["HTTPS_PROXY", "NO_PROXY"].contains(&name.as_str()),
            "all options: {name} is not read by the operator"
        );
    }
    // Every setting of `mailtarget-operator run` can be set through the chart, except the key
    // as a value: the chart always gives it as a file (see `volumes.rs`), which the operator
    // reads again when the kubelet updates the mounted Secret.
    for name in known.keys() {
        assert!(
            env(c).contains_key(name) || name == "MAILTARGET_API_KEY",
            "`mailtarget-operator run` reads {name}, which the chart cannot set (values-all.yaml turns every option on)"
        );
    }
    assert!(
        !env(c).contains_key("MAILTARGET_API_KEY"),
        "the key is never an environment variable (a rotated Secret would not reach it)"
    );
    // An existing Secret: referenced, not rendered.
    let existing = render_ok(&RenderOptions::default().set(
        "credentials",
        json!({"existingSecret": "mailtarget-api", "apiKeyKey": "token"}),
    ));
    assert!(existing.of_kind("Secret").is_empty());
    assert!(
        existing.notes.contains("mailtarget-api"),
        "{}",
        existing.notes
    );
    // No key anywhere: NOTES.txt tells how to create the Secret the pod waits for.
    assert!(defaults.of_kind("Secret").is_empty());
    assert!(
        defaults
            .notes
            .contains("kubectl create secret generic mailtarget-operator-credentials"),
        "{}",
        defaults.notes
    );
    assert!(
        !all.yaml.contains("test-company-key-not-a-real-one"),
        "the API key appears in clear"
    );
}

/// Leader election: on by default and whenever replicas > 1 (with the pod's namespace and name
/// from the downward API); off only on request with one replica, then the Deployment recreates
/// instead of rolling so that two pods never reconcile at once.
#[test]
fn leader_election_follows_replicas() {
    if !require_helm("leader_election_follows_replicas") {
        return;
    }
    let cases = [
        (json!(true), 1, true),
        (json!(false), 1, false),
        (json!(false), 2, true),
        (json!(true), 3, true),
    ];
    for (enabled, replicas, expect) in cases {
        let r = render_ok(
            &RenderOptions::default()
                .set("leaderElection", json!({"enabled": enabled}))
                .set("replicaCount", json!(replicas)),
        );
        let d: Deployment = typed(r.one("Deployment"));
        let c = container(&d);
        let what = format!("enabled={enabled} replicas={replicas}");
        assert_eq!(
            env_value(c, "LEADER_ELECT").as_deref(),
            Some(if expect { "true" } else { "false" }),
            "{what}"
        );
        let strategy = d
            .spec
            .as_ref()
            .and_then(|s| s.strategy.as_ref())
            .and_then(|s| s.type_.clone());
        assert_eq!(
            strategy.as_deref(),
            Some(if expect { "RollingUpdate" } else { "Recreate" }),
            "{what}"
        );
        let lease_role = r.of_kind("Role").into_iter().any(|role| {
            role["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("-leader-election"))
        });
        assert_eq!(
            lease_role, expect,
            "{what}: the Lease Role exists only with leader election"
        );
        for (name, path) in [
            ("POD_NAMESPACE", "metadata.namespace"),
            ("POD_NAME", "metadata.name"),
        ] {
            let field = env(c)
                .get(name)
                .and_then(|e| e.value_from.as_ref())
                .and_then(|v| v.field_ref.as_ref())
                .map(|f| f.field_path.clone());
            assert_eq!(field.as_deref(), Some(path), "{what}: {name}");
        }
        assert_eq!(
            d.spec.as_ref().and_then(|s| s.replicas),
            Some(replicas),
            "{what}"
        );
    }
}

/// Scheduling and pod options reach the pod spec.
#[test]
fn all_options_reach_the_pod() {
    if !require_helm("all_options_reach_the_pod") {
        return;
    }
    let all = all_options();
    let raw = all.one("Deployment");
    let pod = &raw["spec"]["template"]["spec"];
    assert_eq!(pod["nodeSelector"], json!({"kubernetes.io/os": "linux"}));
    assert_eq!(pod["tolerations"][0]["key"], "dedicated");
    assert!(pod["affinity"]["podAntiAffinity"].is_object());
    assert_eq!(pod["topologySpreadConstraints"][0]["maxSkew"], 1);
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert_eq!(pod["imagePullSecrets"], json!([{"name": "regcred"}]));
    assert_eq!(pod["terminationGracePeriodSeconds"], 60);
    assert_eq!(pod["serviceAccountName"], "mailtarget-operator-shard-a");
    assert_eq!(
        pod["containers"][0]["image"],
        "registry.example.test/mailtarget-operator@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    );
    assert_eq!(pod["containers"][0]["resources"]["limits"]["cpu"], "1");
    let meta = &raw["spec"]["template"]["metadata"];
    assert_eq!(meta["labels"]["tier"], "control");
    assert_eq!(meta["annotations"]["example.test/scrape"], "true");
    assert_eq!(raw["metadata"]["labels"]["team"], "platform");
    let pdb = all.one("PodDisruptionBudget");
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    assert!(pdb["spec"].get("minAvailable").is_none());
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"],
        raw["spec"]["selector"]["matchLabels"]
    );
}

/// The metrics Service selects the operator's pods on the metrics port, and the ServiceMonitor
/// scrapes that Service's port.
#[test]
fn service_monitor_scrapes_the_service() {
    if !require_helm("service_monitor_scrapes_the_service") {
        return;
    }
    for (what, r) in renders() {
        let svc = r.one("Service");
        let deploy = r.one("Deployment");
        let pod_labels = &deploy["spec"]["template"]["metadata"]["labels"];
        let selector = svc["spec"]["selector"].as_object().expect("a selector");
        for (k, v) in selector {
            assert_eq!(
                &pod_labels[k], v,
                "{what}: the Service does not select the pods"
            );
        }
        assert_eq!(svc["spec"]["ports"][0]["name"], "metrics", "{what}");
        assert_eq!(svc["spec"]["ports"][0]["targetPort"], "metrics", "{what}");
        for sm in r.of_kind("ServiceMonitor") {
            let labels = &svc["metadata"]["labels"];
            for (k, v) in sm["spec"]["selector"]["matchLabels"]
                .as_object()
                .expect("matchLabels")
            {
                assert_eq!(
                    &labels[k], v,
                    "{what}: the ServiceMonitor does not select the Service"
                );
            }
            assert_eq!(sm["spec"]["endpoints"][0]["port"], "metrics");
            assert_eq!(sm["spec"]["endpoints"][0]["path"], "/metrics");
            assert_eq!(sm["spec"]["endpoints"][0]["interval"], "15s");
            assert_eq!(sm["metadata"]["labels"]["release"], "kube-prometheus-stack");
            assert_eq!(
                sm["spec"]["namespaceSelector"]["matchNames"],
                json!([sm["metadata"]["namespace"]])
            );
        }
    }
}

/// The install notes say what the defaults open in a shared cluster: every namespace may use
/// the company key through ClusterAccount `default`, and the operator may read and write the
/// Secrets of every namespace; without the `default` object, the flags' key serves (and lets
/// adopt) every namespace. Each warning goes once the value that opens it is set.
#[test]
fn the_notes_warn_of_what_the_defaults_open() {
    if !require_helm("the_notes_warn_of_what_the_defaults_open") {
        return;
    }
    let defaults = defaults();
    for warning in [
        "every namespace may use ClusterAccount \"default\"",
        "Secrets of every namespace",
    ] {
        assert!(
            defaults.notes.contains(warning),
            "{warning}: {}",
            defaults.notes
        );
    }
    let narrowed = render_ok(
        &RenderOptions::default()
            .set(
                "defaultAccount",
                json!({"namespaceSelector": {"matchLabels": {"mailtarget.co/tenant": "true"}}}),
            )
            .set("watchNamespaces", json!(["team-a"])),
    );
    assert!(
        !narrowed.notes.contains("WARNING"),
        "no warning once narrowed: {}",
        narrowed.notes
    );
    let without =
        render_ok(&RenderOptions::default().set("defaultAccount", json!({"create": false})));
    assert!(
        without
            .notes
            .contains("the operator's own key serves every namespace"),
        "{}",
        without.notes
    );
}
