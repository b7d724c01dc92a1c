//! The workflows and the Dockerfile pass actionlint (with shellcheck over the `run:` scripts)
//! and hadolint with zero findings, at every severity. Each linter is first shown a file with
//! known mistakes, so that a linter that runs but checks nothing cannot pass the test.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::{root, workflow_files};

/// The executable `name` on PATH. When it is missing the test is skipped with a printed message,
/// except in CI (`CI=true`), where that is a failure.
///
/// # Panics
/// `name` is missing and `CI` is `true`.
fn require_tool(name: &str, test: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        let why = format!(
            "{name} is not on PATH; `python3 -m pip install -r .ci/requirements.txt` installs it"
        );
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{test}: {why} (CI=true requires it)");
        }
        println!("SKIPPED {test}: {why}");
    }
    found
}

/// Runs a linter whose JSON output is an array of findings; exit 0 means none, 1 means some.
///
/// # Panics
/// The linter cannot be run, fails otherwise, or prints something that is not a JSON array.
fn findings(command: &mut Command) -> Vec<Value> {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{command:?} failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let text = stdout.trim();
    if text.is_empty() {
        return Vec::new();
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(items)) => items,
        _ => panic!("{command:?} printed no JSON array:\n{text}"),
    }
}

fn actionlint(tool: &Path, shellcheck: &Path, dir: &Path, files: &[String]) -> Vec<Value> {
    findings(
        Command::new(tool)
            .current_dir(dir)
            .args(["-no-color", "-format", "{{json .}}", "-pyflakes="])
            .arg(format!("-shellcheck={}", shellcheck.display()))
            .args(files),
    )
}

fn hadolint(tool: &Path, dockerfile: &Path) -> Vec<Value> {
    findings(
        Command::new(tool)
            .args(["--no-color", "--format", "json"])
            .arg(dockerfile),
    )
}

/// One line per finding: `file:line:col: message [rule]`.
fn describe(items: &[Value], file: &str, rule: &str) -> String {
    items
        .iter()
        .map(|f| {
            format!(
                "{}:{}:{}: {} [{}]",
                f[file].as_str().unwrap_or("?"),
                f["line"],
                f["column"],
                f["message"].as_str().unwrap_or("?"),
                f[rule].as_str().unwrap_or("?")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A workflow with an unknown runner label, an undefined step output and an unquoted variable.
const BROKEN_WORKFLOW: &str = "name: broken
on: push
permissions: {}
jobs:
  build:
    runs-on: linux-latest
    steps:
      - run: echo $GREETING
      - run: echo ${{ steps.nothing.outputs.value }}
";

/// Every workflow passes actionlint, with shellcheck checking its `run:` scripts.
#[test]
fn workflows_pass_actionlint() {
    let test = "workflows_pass_actionlint";
    let (Some(tool), Some(shellcheck)) = (
        require_tool("actionlint", test),
        require_tool("shellcheck", test),
    ) else {
        return;
    };

    let control = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    std::fs::write(control.path().join("broken.yml"), BROKEN_WORKFLOW)
        .unwrap_or_else(|e| panic!("write: {e}"));
    let caught = actionlint(&tool, &shellcheck, control.path(), &["broken.yml".into()]);
    for kind in ["runner-label", "expression", "shellcheck"] {
        assert!(
            caught.iter().any(|f| f["kind"] == kind),
            "actionlint missed the {kind} mistake of the control workflow: {caught:#?}"
        );
    }

    let files: Vec<String> = workflow_files()
        .into_iter()
        .map(|n| format!(".github/workflows/{n}"))
        .collect();
    for expected in ["ci.yml", "release.yml"] {
        assert!(
            files.iter().any(|f| f.ends_with(expected)),
            "{expected} is missing from .github/workflows"
        );
    }
    let found = actionlint(&tool, &shellcheck, root(), &files);
    assert!(
        found.is_empty(),
        "actionlint findings:\n{}",
        describe(&found, "filepath", "kind")
    );
}

/// The Dockerfile passes hadolint (every rule, every severity).
#[test]
fn dockerfile_passes_hadolint() {
    let Some(tool) = require_tool("hadolint", "dockerfile_passes_hadolint") else {
        return;
    };

    let control = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let bad = control.path().join("Dockerfile");
    std::fs::write(
        &bad,
        "FROM debian\nRUN apt-get update && apt-get install curl\n",
    )
    .unwrap_or_else(|e| panic!("write: {e}"));
    let caught = hadolint(&tool, &bad);
    for code in ["DL3006", "DL3008"] {
        assert!(
            caught.iter().any(|f| f["code"] == code),
            "hadolint missed {code} in the control Dockerfile: {caught:#?}"
        );
    }

    let found = hadolint(&tool, &root().join("Dockerfile"));
    assert!(
        found.is_empty(),
        "hadolint findings:\n{}",
        describe(&found, "file", "code")
    );
}
