//! The chart rendered with its default values by the real Helm engine, through the script the
//! chart tests use (`tests/chart/render.py`, PyPI package `helm-python-sdk`).

use serde::Deserialize;
use serde_json::Value;

use super::{chart_dir, root};

fn render_py() -> std::process::Command {
    let mut command = std::process::Command::new("python3");
    command.arg(root().join("tests/chart/render.py"));
    command
}

/// The images of the Deployment's containers, rendered as `helm install mailtarget-operator`
/// with default values would. `None` when the Helm engine is missing, after printing why; in CI
/// (`CI=true`) that is a failure.
///
/// # Panics
/// The engine is missing in CI, the chart does not render, or it renders no single Deployment.
pub fn default_images(test: &str) -> Option<Vec<String>> {
    let check = render_py()
        .arg("check")
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3: {e}"));
    if !check.status.success() {
        let why = String::from_utf8_lossy(&check.stderr).trim().to_string();
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{test}: the Helm engine is unavailable ({why}); CI=true requires it");
        }
        println!("SKIPPED {test}: the Helm engine is unavailable ({why})");
        return None;
    }
    let out = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let rendered = render_py()
        .arg("render")
        .arg(chart_dir())
        .arg(out.path())
        .args([
            "--release",
            "mailtarget-operator",
            "--namespace",
            "mailtarget-system",
        ])
        .output()
        .unwrap_or_else(|e| panic!("cannot run render.py: {e}"));
    assert!(
        rendered.status.success(),
        "the chart does not render with default values:\n{}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let path = out.path().join("manifests.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("render.py wrote no {}: {e}", path.display()));
    let deployments: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("rendered YAML: {e}")))
        .filter(|o| o["kind"] == "Deployment")
        .collect();
    assert_eq!(deployments.len(), 1, "one Deployment in the default render");
    let containers = deployments[0]["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap_or_else(|| panic!("the Deployment has no containers"));
    Some(
        containers
            .iter()
            .map(|c| c["image"].as_str().unwrap_or_default().to_string())
            .collect(),
    )
}
