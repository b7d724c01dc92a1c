//! What the chart mounts into the operator pod: the credentials Secret as a file the operator
//! reads again when the kubelet updates it, the CA bundle from a ConfigMap or a Secret, and
//! `extraVolumes` / `extraVolumeMounts`.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, PodSpec, Volume, VolumeMount};
use serde_json::json;

use super::helm::{RenderOptions, Rendered, all_options, defaults, render_ok, require_helm};

fn deployment(r: &Rendered) -> Deployment {
    serde_json::from_value(r.one("Deployment").clone()).expect("a Deployment")
}

fn pod(d: &Deployment) -> &PodSpec {
    d.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("a pod spec")
}

fn container(d: &Deployment) -> &Container {
    &pod(d).containers[0]
}

fn env_value(c: &Container, name: &str) -> Option<String> {
    c.env
        .iter()
        .flatten()
        .find(|e| e.name == name)
        .and_then(|e| e.value.clone())
}

fn volume<'a>(d: &'a Deployment, name: &str) -> Option<&'a Volume> {
    pod(d).volumes.iter().flatten().find(|v| v.name == name)
}

fn mount<'a>(d: &'a Deployment, name: &str) -> Option<&'a VolumeMount> {
    container(d)
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == name)
}

/// The file the environment variable `var` names is the one the volume `name` puts there:
/// the mount's directory plus the path the volume gives the item `key`. Returns the volume.
fn file_comes_from<'a>(d: &'a Deployment, var: &str, name: &str, key: &str) -> &'a Volume {
    let path = env_value(container(d), var).unwrap_or_else(|| panic!("{var} is not set"));
    let m = mount(d, name).unwrap_or_else(|| panic!("no mount of volume {name}"));
    assert_eq!(m.read_only, Some(true), "{name} is mounted read-only");
    assert!(
        m.sub_path.is_none() && m.sub_path_expr.is_none(),
        "{name}: a subPath mount is never updated by the kubelet"
    );
    let v = volume(d, name).unwrap_or_else(|| panic!("no volume {name}"));
    let items = v
        .secret
        .as_ref()
        .and_then(|s| s.items.clone())
        .or_else(|| v.config_map.as_ref().and_then(|c| c.items.clone()))
        .unwrap_or_default();
    let item = items
        .iter()
        .find(|i| i.key == key)
        .unwrap_or_else(|| panic!("volume {name} does not project key {key}: {items:?}"));
    assert_eq!(
        path,
        format!("{}/{}", m.mount_path.trim_end_matches('/'), item.path),
        "{var} names the file of key {key}"
    );
    v
}

/// The API key reaches the operator as a file of the mounted credentials Secret (the chart's
/// or an existing one), never as an environment variable, so that a rotated Secret reaches the
/// running operator; no restart trigger is needed any more.
#[test]
fn credentials_are_a_mounted_file() {
    if !require_helm("credentials_are_a_mounted_file") {
        return;
    }
    let existing = render_ok(&RenderOptions::default().set(
        "credentials",
        json!({"existingSecret": "mailtarget-api", "apiKeyKey": "token"}),
    ));
    let cases = [
        (defaults(), "mailtarget-operator-credentials", "apiKey"),
        (
            all_options(),
            "mailtarget-operator-mt-operator-credentials",
            "key",
        ),
        (&existing, "mailtarget-api", "token"),
    ];
    for (r, secret, key) in cases {
        let d = deployment(r);
        let v = file_comes_from(&d, "MAILTARGET_API_KEY_FILE", "credentials", key);
        let source = v.secret.as_ref().expect("a Secret volume");
        assert_eq!(source.secret_name.as_deref(), Some(secret));
        assert_ne!(source.optional, Some(true), "the pod waits for the Secret");
        let annotations = d
            .spec
            .as_ref()
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.annotations.clone())
            .unwrap_or_default();
        assert!(
            !annotations.keys().any(|k| k.starts_with("checksum/")),
            "{annotations:?}"
        );
    }
    let chart_secret = all_options().one("Secret");
    assert_eq!(
        chart_secret["metadata"]["name"],
        "mailtarget-operator-mt-operator-credentials"
    );
    assert!(
        chart_secret["data"].get("key").is_some(),
        "data keys: {:?}",
        chart_secret["data"]
            .as_object()
            .map(|d| d.keys().collect::<Vec<_>>())
    );
}

/// `api.caBundle` mounts the PEM from a ConfigMap or a Secret and points MAILTARGET_CA_BUNDLE at
/// it; without it there is neither.
#[test]
fn ca_bundle_is_mounted_from_a_config_map_or_a_secret() {
    if !require_helm("ca_bundle_is_mounted_from_a_config_map_or_a_secret") {
        return;
    }
    let d = deployment(defaults());
    assert!(env_value(container(&d), "MAILTARGET_CA_BUNDLE").is_none());
    assert!(volume(&d, "ca-bundle").is_none() && mount(&d, "ca-bundle").is_none());

    let d = deployment(all_options());
    let v = file_comes_from(&d, "MAILTARGET_CA_BUNDLE", "ca-bundle", "bundle.pem");
    assert_eq!(
        v.config_map.as_ref().map(|c| c.name.as_str()),
        Some("corporate-ca")
    );

    let from_secret = render_ok(
        &RenderOptions::default().set("api.caBundle", json!({"secret": "corporate-ca-secret"})),
    );
    let d = deployment(&from_secret);
    let v = file_comes_from(&d, "MAILTARGET_CA_BUNDLE", "ca-bundle", "ca.crt");
    assert_eq!(
        v.secret.as_ref().and_then(|s| s.secret_name.as_deref()),
        Some("corporate-ca-secret")
    );
}

/// `extraVolumes` and `extraVolumeMounts` reach the pod beside the chart's own.
#[test]
fn extra_volumes_reach_the_pod() {
    if !require_helm("extra_volumes_reach_the_pod") {
        return;
    }
    let d = deployment(all_options());
    let scratch = volume(&d, "scratch").expect("the extra volume");
    assert!(scratch.empty_dir.is_some());
    assert_eq!(
        mount(&d, "scratch").map(|m| m.mount_path.as_str()),
        Some("/scratch")
    );
    assert!(volume(&d, "credentials").is_some() && volume(&d, "ca-bundle").is_some());
    let d = deployment(defaults());
    let names: Vec<&str> = pod(&d)
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(names, ["credentials"]);
}
