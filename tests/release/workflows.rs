//! The workflows' supply-chain rules: every action pinned by full commit SHA, least-privilege
//! token permissions (an OIDC token only for the jobs that sign, write access only where
//! something is published), and CI running the project's own entry point.

use serde_json::Value;

use super::{steps, string, uses, workflow, workflow_files};

/// Every `uses:` names `owner/repo[/path]@<40 hex digits>`: a tag can be moved, a commit cannot.
#[test]
fn actions_are_pinned_by_commit_sha() {
    let mut checked = 0;
    for name in workflow_files() {
        let wf = workflow(&name);
        for (job, body) in wf["jobs"].as_object().into_iter().flatten() {
            for step in body["steps"].as_array().into_iter().flatten() {
                let Some(action) = step["uses"].as_str() else {
                    continue;
                };
                let (path, rev) = action
                    .split_once('@')
                    .unwrap_or_else(|| panic!("{name} job {job}: {action} names no revision"));
                assert!(
                    path.split('/').count() >= 2,
                    "{name} job {job}: {action} is not owner/repo"
                );
                assert!(
                    rev.len() == 40 && rev.chars().all(|c| c.is_ascii_hexdigit()),
                    "{name} job {job}: {action} is not pinned by a full commit SHA"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 10, "only {checked} actions found");
}

/// A job's permissions: its own `permissions:` map, or the workflow's.
fn permissions<'a>(wf: &'a Value, job: &str) -> &'a serde_json::Map<String, Value> {
    let own = &wf["jobs"][job]["permissions"];
    let chosen = if own.is_null() {
        &wf["permissions"]
    } else {
        own
    };
    chosen
        .as_object()
        .unwrap_or_else(|| panic!("job {job}: permissions must be a map, got {chosen}"))
}

/// Whether a job runs cosign (signs, attests).
fn signs(wf: &Value, job: &str) -> bool {
    steps(wf, job)
        .iter()
        .any(|s| s["run"].as_str().is_some_and(|r| r.contains("cosign ")))
}

/// The release workflow grants nothing by default; each job asks for what it uses: an OIDC
/// token (`id-token: write`) exactly where cosign signs, `packages: write` only where something
/// is pushed to ghcr.io, `contents: write` only for the GitHub release.
#[test]
fn release_jobs_get_least_privilege() {
    let wf = workflow("release.yml");
    assert_eq!(
        wf["permissions"],
        serde_json::json!({}),
        "release.yml: top-level permissions must be {{}}"
    );
    let jobs = wf["jobs"]
        .as_object()
        .unwrap_or_else(|| panic!("release.yml has no jobs"));
    let mut signing_jobs = 0;
    for job in jobs.keys() {
        let perms = permissions(&wf, job);
        assert!(
            !wf["jobs"][job]["permissions"].is_null(),
            "release.yml job {job} declares no permissions"
        );
        let id_token = perms.get("id-token").and_then(Value::as_str) == Some("write");
        assert_eq!(
            id_token,
            signs(&wf, job),
            "release.yml job {job}: id-token: write must be granted exactly when the job signs"
        );
        signing_jobs += usize::from(id_token);
        let pushes = steps(&wf, job).iter().any(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("docker/build-push-action@"))
                || s["run"].as_str().is_some_and(|r| r.contains("helm push"))
        });
        assert_eq!(
            perms.get("packages").and_then(Value::as_str) == Some("write"),
            pushes,
            "release.yml job {job}: packages: write must be granted exactly when it pushes"
        );
        let releases = steps(&wf, job)
            .iter()
            .any(|s| s["run"].as_str().is_some_and(|r| r.contains("gh release")));
        assert_eq!(
            perms.get("contents").and_then(Value::as_str) == Some("write"),
            releases,
            "release.yml job {job}: contents: write must be granted exactly when it creates the release"
        );
    }
    assert_eq!(signing_jobs, 2, "the image job and the chart job sign");
}

/// CI runs `bash .ci/run` (what the README and every session run) on pushes to main and on
/// pull requests, with a read-only token and the toolchain the release is built with.
#[test]
fn ci_runs_the_projects_entry_point() {
    let wf = workflow("ci.yml");
    assert!(
        wf["on"]["push"]["branches"]
            .as_array()
            .is_some_and(|b| b.iter().any(|b| b == "main")),
        "ci.yml runs on pushes to main"
    );
    assert!(
        wf["on"].get("pull_request").is_some(),
        "ci.yml runs on pull requests"
    );
    assert_eq!(
        wf["permissions"],
        serde_json::json!({"contents": "read"}),
        "ci.yml: a read-only token"
    );
    let jobs = wf["jobs"]
        .as_object()
        .unwrap_or_else(|| panic!("ci.yml has no jobs"));
    let runner = jobs
        .keys()
        .find(|job| {
            steps(&wf, job)
                .iter()
                .any(|s| s["run"].as_str().map(str::trim) == Some("bash .ci/run"))
        })
        .unwrap_or_else(|| panic!("no ci.yml job runs `bash .ci/run`"));
    let toolchain = uses(&wf, runner, "dtolnay/rust-toolchain");
    assert_eq!(toolchain.len(), 1, "ci.yml installs one Rust toolchain");
    let wanted = super::dockerfile::rust_version();
    assert_eq!(
        string(
            &toolchain[0]["with"]["toolchain"],
            "rust-toolchain's toolchain"
        ),
        wanted,
        "ci.yml tests with the Rust the Dockerfile builds the release with"
    );
}
