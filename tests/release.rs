//! Release engineering, checked without a release: the GitHub Actions workflows and the Dockerfile
//! pass their maintained linters (actionlint with shellcheck, hadolint) with zero findings, and
//! what `.github/workflows/release.yml` publishes agrees with the chart, the crate version, the
//! Dockerfile and the docs, including docs/gitops.md's Flux example that installs it. The
//! workflow itself can only run on GitHub, on a tag.
//!
//! The linters come from PyPI (`.ci/requirements.txt`, installed by `.ci/run`). Tests that need
//! one are skipped with a printed message when it is missing, except in CI (`CI=true`), where
//! they fail instead.

#[path = "release/dockerfile.rs"]
mod dockerfile;
#[path = "release/flux.rs"]
mod flux;
#[path = "release/lint.rs"]
mod lint;
#[path = "release/publish.rs"]
mod publish;
#[path = "release/render.rs"]
mod render;
#[path = "release/workflows.rs"]
mod workflows;

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The repository root.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The chart directory.
fn chart_dir() -> PathBuf {
    root().join("charts/mailtarget-operator")
}

/// The text of a file of the repository.
///
/// # Panics
/// The file cannot be read.
fn read(relative: &str) -> String {
    let path = root().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A YAML file of the repository, parsed (YAML 1.2: `on` is a string key, not a boolean).
///
/// # Panics
/// The file cannot be read or is not YAML.
fn yaml(relative: &str) -> Value {
    serde_yaml::from_str(&read(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// `.github/workflows/<name>`, parsed.
fn workflow(name: &str) -> Value {
    yaml(&format!(".github/workflows/{name}"))
}

/// The chart's values.yaml and Chart.yaml, parsed.
fn chart_files() -> (Value, Value) {
    let dir = chart_dir();
    let parse = |name: &str| -> Value {
        let path = dir.join(name);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    (parse("values.yaml"), parse("Chart.yaml"))
}

/// The steps of `job` in a parsed workflow.
fn steps<'a>(workflow: &'a Value, job: &str) -> &'a [Value] {
    workflow["jobs"][job]["steps"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_else(|| panic!("job {job} has no steps"))
}

/// The steps of `job` that use the action `owner/name` (any version).
fn uses<'a>(workflow: &'a Value, job: &str, action: &str) -> Vec<&'a Value> {
    steps(workflow, job)
        .iter()
        .filter(|s| {
            s["uses"]
                .as_str()
                .and_then(|u| u.split_once('@'))
                .is_some_and(|(name, _)| name.eq_ignore_ascii_case(action))
        })
        .collect()
}

/// A string field, or a panic naming it.
fn string<'a>(value: &'a Value, what: &str) -> &'a str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {value}"))
}

/// The workflow files, sorted.
fn workflow_files() -> Vec<String> {
    let dir = root().join(".github/workflows");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            Path::new(n)
                .extension()
                .is_some_and(|x| x == "yml" || x == "yaml")
        })
        .collect();
    names.sort();
    names
}
