//! The Helm chart `charts/mailtarget-operator`, proven with the real Helm engine (Helm v4 from
//! the PyPI package `helm-python-sdk`, driven by `tests/chart/render.py`), the k8s-openapi types,
//! the operator's own code, kubectl against the test API server, and a Lua interpreter for the
//! Argo CD health check.
//!
//! Tests that need the Helm engine or kubectl are skipped with a printed message when those are
//! missing, except in CI (`CI=true`), where they fail instead.

mod common;

#[path = "chart/apply.rs"]
mod apply;
#[path = "chart/argocd.rs"]
mod argocd;
#[path = "chart/calls.rs"]
mod calls;
#[path = "chart/default_account.rs"]
mod default_account;
#[path = "chart/helm.rs"]
mod helm;
#[path = "chart/helm_test.rs"]
mod helm_test;
#[path = "chart/manifests.rs"]
mod manifests;
#[path = "chart/network_policy.rs"]
mod network_policy;
#[path = "chart/rbac.rs"]
mod rbac;
#[path = "chart/volumes.rs"]
mod volumes;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use helm::{chart_dir, root};

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn yaml_files(dir: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| {
            (
                p.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                read(&p),
            )
        })
        .collect()
}

/// The chart ships exactly the top-level CRDs, byte for byte (copies, not symlinks, so that the
/// packaged chart carries them). After `cargo run -- crds --out-dir crds`, copy them:
/// `cp crds/*.yaml charts/mailtarget-operator/crds/`.
#[test]
fn chart_crds_equal_top_level_crds() {
    let top = yaml_files(&root().join("crds"));
    let chart = yaml_files(&chart_dir().join("crds"));
    assert!(!top.is_empty());
    assert_eq!(
        chart.keys().collect::<Vec<_>>(),
        top.keys().collect::<Vec<_>>(),
        "charts/mailtarget-operator/crds/ must hold the same files as crds/"
    );
    for (name, text) in &top {
        assert!(
            chart.get(name) == Some(text),
            "charts/mailtarget-operator/crds/{name} differs from crds/{name}: run `cp crds/*.yaml charts/mailtarget-operator/crds/`"
        );
        let link = chart_dir().join("crds").join(name);
        let meta = std::fs::symlink_metadata(&link).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !meta.file_type().is_symlink(),
            "{name} must be a copy, not a symlink"
        );
    }
}

/// Chart.yaml's appVersion is the crate version (the image tag defaults to it).
#[test]
fn app_version_is_the_crate_version() {
    let chart: Value = serde_yaml::from_str(&read(&chart_dir().join("Chart.yaml")))
        .unwrap_or_else(|e| panic!("Chart.yaml: {e}"));
    assert_eq!(chart["apiVersion"], "v2");
    assert_eq!(chart["name"], "mailtarget-operator");
    assert_eq!(
        chart["appVersion"].as_str(),
        Some(env!("CARGO_PKG_VERSION")),
        "Chart.yaml appVersion must equal the version in Cargo.toml"
    );
    let version = chart["version"].as_str().unwrap_or_default();
    let parts: Vec<&str> = version.split(['.', '-', '+']).collect();
    assert!(
        parts.len() >= 3 && parts[..3].iter().all(|p| p.parse::<u64>().is_ok()),
        "Chart.yaml version {version:?} is not SemVer"
    );
}

/// The paths of values.schema.json's declared properties, and whether each is a leaf (a value
/// rather than a group of values).
fn schema_paths(schema: &Value, prefix: &str, out: &mut Vec<(String, Value)>) {
    for (key, prop) in schema["properties"].as_object().into_iter().flatten() {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        out.push((path.clone(), prop.clone()));
        if prop.get("properties").is_some() {
            schema_paths(prop, &path, out);
        }
    }
}

/// Lines of values.yaml that define a key, with the dotted path of the key and whether a
/// comment line precedes it.
fn values_keys(text: &str) -> BTreeMap<String, bool> {
    let mut out = BTreeMap::new();
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut previous_is_comment = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() {
            previous_is_comment = false;
            continue;
        }
        if trimmed.starts_with('#') {
            previous_is_comment = true;
            continue;
        }
        let indent = line.len() - trimmed.len();
        let key = trimmed
            .split_once(':')
            .map(|(k, _)| k)
            .filter(|k| !k.starts_with('-') && !k.contains(' '));
        if let Some(key) = key {
            while stack.last().is_some_and(|(i, _)| *i >= indent) {
                stack.pop();
            }
            stack.push((indent, key.to_string()));
            let path: Vec<&str> = stack.iter().map(|(_, k)| k.as_str()).collect();
            out.insert(path.join("."), previous_is_comment);
        }
        previous_is_comment = false;
    }
    out
}

/// `path` and its ancestors, longest first (`a.b.c`, `a.b`, `a`).
fn with_ancestors(path: &str) -> Vec<String> {
    let parts: Vec<&str> = path.split('.').collect();
    (1..=parts.len())
        .rev()
        .map(|n| parts[..n].join("."))
        .collect()
}

/// Every value is documented: a description in values.schema.json, a comment above it (or
/// above the group it belongs to, for Kubernetes structures such as `resources`) in
/// values.yaml, and a row in docs/helm.md's values reference.
#[test]
fn every_value_is_documented() {
    let schema: Value = serde_json::from_str(&read(&chart_dir().join("values.schema.json")))
        .unwrap_or_else(|e| panic!("values.schema.json: {e}"));
    let values = values_keys(&read(&chart_dir().join("values.yaml")));
    let docs = read(&root().join("docs/helm.md"));
    let mut paths = Vec::new();
    schema_paths(&schema, "", &mut paths);
    assert!(paths.len() > 40, "{}", paths.len());
    for (path, prop) in &paths {
        if path == "global" {
            continue;
        }
        assert!(
            prop["description"].as_str().is_some_and(|d| !d.is_empty()),
            "values.schema.json: {path} has no description"
        );
        if prop.get("properties").is_some() {
            continue;
        }
        let lineage = with_ancestors(path);
        if values.contains_key(path) {
            assert!(
                lineage.iter().any(|p| values.get(p) == Some(&true)),
                "values.yaml: {path} has no comment above it"
            );
        }
        assert!(
            lineage.iter().any(|p| docs.contains(&format!("| `{p}` |"))),
            "docs/helm.md's values reference lacks `{path}`"
        );
    }
    // And nothing in values.yaml escapes the schema's declared properties (free-form maps aside).
    for path in values.keys() {
        let covered = with_ancestors(path).iter().enumerate().any(|(i, p)| {
            paths
                .iter()
                .any(|(d, v)| d == p && (i == 0 || v.get("properties").is_none()))
        });
        assert!(
            covered,
            "values.yaml: {path} is not declared in values.schema.json"
        );
    }
}

/// The Dockerfile builds the `mailtarget-operator` binary and runs it as the non-root user the
/// chart's security context names.
#[test]
fn dockerfile_matches_the_chart() {
    let dockerfile = read(&root().join("Dockerfile"));
    assert!(
        dockerfile.contains("--bin mailtarget-operator"),
        "the Dockerfile builds the mailtarget-operator binary"
    );
    let stages =
        dockerfile.matches("\nFROM ").count() + usize::from(dockerfile.starts_with("FROM "));
    assert!(stages >= 2, "multi-stage build expected");
    let runtime = dockerfile.rsplit("\nFROM ").next().unwrap_or_default();
    assert!(
        runtime.contains("USER 65532:65532"),
        "the runtime stage runs as 65532"
    );
    let values: Value = serde_yaml::from_str(&read(&chart_dir().join("values.yaml")))
        .unwrap_or_else(|e| panic!("values.yaml: {e}"));
    assert_eq!(values["podSecurityContext"]["runAsUser"], 65532);
    assert_eq!(values["podSecurityContext"]["runAsGroup"], 65532);
    let ignore = read(&root().join(".dockerignore"));
    assert!(
        ignore.lines().any(|l| l.trim() == "target"),
        ".dockerignore leaves target/ out"
    );
}
