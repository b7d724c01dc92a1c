//! The Dockerfile builds what the workflow publishes: a builder running on the build platform
//! that cross-compiles for each target platform the workflow asks for, and a minimal runtime
//! stage (distroless static or scratch) running as the numeric non-root user the chart's
//! security context names.

use serde_json::Value;

use super::{chart_files, read, string, uses, workflow};

/// One instruction: its keyword in upper case and its arguments, continuation lines joined.
#[derive(Debug)]
pub struct Instruction {
    pub keyword: String,
    pub args: String,
}

/// The Dockerfile's instructions, in order (comments and the parser directive left out).
pub fn instructions() -> Vec<Instruction> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in read("Dockerfile").lines() {
        let trimmed = line.trim();
        if pending.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        if let Some(body) = trimmed.strip_suffix('\\') {
            pending.push_str(body);
            pending.push(' ');
            continue;
        }
        pending.push_str(trimmed);
        let (keyword, args) = pending
            .split_once(char::is_whitespace)
            .unwrap_or((&pending, ""));
        out.push(Instruction {
            keyword: keyword.to_ascii_uppercase(),
            args: args.trim().to_string(),
        });
        pending.clear();
    }
    out
}

/// The stages: each FROM and the instructions up to the next.
fn stages() -> Vec<Vec<Instruction>> {
    let mut stages: Vec<Vec<Instruction>> = Vec::new();
    for instruction in instructions() {
        if instruction.keyword == "FROM" {
            stages.push(Vec::new());
        }
        if let Some(stage) = stages.last_mut() {
            stage.push(instruction);
        }
    }
    stages
}

/// The default of the global `ARG RUST_VERSION`.
pub fn rust_version() -> String {
    instructions()
        .iter()
        .take_while(|i| i.keyword != "FROM")
        .find_map(|i| {
            (i.keyword == "ARG")
                .then(|| i.args.strip_prefix("RUST_VERSION="))
                .flatten()
        })
        .unwrap_or_else(|| panic!("the Dockerfile declares no global ARG RUST_VERSION=<version>"))
        .to_string()
}

/// The runtime stage (the last, the default build target) is distroless static or scratch and
/// runs as a numeric non-root user and group, the ones values.yaml's podSecurityContext names.
#[test]
fn runtime_stage_is_minimal_and_non_root() {
    let stages = stages();
    assert!(stages.len() >= 2, "a multi-stage build");
    let runtime = stages.last().unwrap_or_else(|| unreachable!());
    let base = runtime[0]
        .args
        .split_whitespace()
        .last()
        .unwrap_or_default();
    assert!(
        base == "scratch" || base.starts_with("gcr.io/distroless/static"),
        "the runtime base {base} is neither distroless/static nor scratch"
    );
    assert!(
        !runtime.iter().any(|i| i.keyword == "RUN"),
        "the runtime stage runs nothing (it has no shell)"
    );
    let users: Vec<&str> = runtime
        .iter()
        .filter(|i| i.keyword == "USER")
        .map(|i| i.args.as_str())
        .collect();
    assert_eq!(users.len(), 1, "one USER in the runtime stage: {users:?}");
    let (uid, gid) = users[0]
        .split_once(':')
        .unwrap_or_else(|| panic!("USER {} names no group", users[0]));
    let (uid, gid): (u64, u64) = match (uid.parse(), gid.parse()) {
        (Ok(u), Ok(g)) => (u, g),
        _ => panic!(
            "USER {} is not numeric (runAsNonRoot needs a uid)",
            users[0]
        ),
    };
    assert!(uid > 0 && gid > 0, "USER {} is root", users[0]);
    let (values, _) = chart_files();
    assert_eq!(values["podSecurityContext"]["runAsUser"], uid);
    assert_eq!(values["podSecurityContext"]["runAsGroup"], gid);
    assert_eq!(values["podSecurityContext"]["runAsNonRoot"], true);
    let entrypoint = runtime
        .iter()
        .find(|i| i.keyword == "ENTRYPOINT")
        .unwrap_or_else(|| panic!("no ENTRYPOINT in the runtime stage"));
    let entrypoint: Value = serde_json::from_str(&entrypoint.args)
        .unwrap_or_else(|e| panic!("ENTRYPOINT is not in exec form: {e}"));
    assert!(
        entrypoint[0]
            .as_str()
            .is_some_and(|p| p.ends_with("/mailtarget-operator")),
        "ENTRYPOINT runs the operator: {entrypoint}"
    );
}

/// The builder runs on `$BUILDPLATFORM` and cross-compiles the operator for `$TARGETARCH`,
/// with a case for each platform release.yml builds; the binary stage the workflow exports
/// exists.
#[test]
fn builder_cross_compiles_every_published_platform() {
    let stages = stages();
    let builder = stages
        .iter()
        .find(|s| s[0].args.contains("--platform=$BUILDPLATFORM"))
        .unwrap_or_else(|| panic!("no stage runs on --platform=$BUILDPLATFORM"));
    assert!(
        builder
            .iter()
            .any(|i| i.keyword == "ARG" && i.args == "TARGETARCH"),
        "the builder declares ARG TARGETARCH"
    );
    let build = builder
        .iter()
        .find(|i| i.keyword == "RUN" && i.args.contains("--bin mailtarget-operator"))
        .unwrap_or_else(|| panic!("the builder builds no --bin mailtarget-operator"));
    assert!(
        build.args.contains("--release") && build.args.contains("--locked"),
        "a --release --locked build"
    );

    let wf = workflow("release.yml");
    let builds = uses(&wf, "image", "docker/build-push-action");
    assert_eq!(builds.len(), 2, "the image and the binaries");
    for step in &builds {
        let platforms = string(&step["with"]["platforms"], "platforms");
        let arches: Vec<&str> = platforms
            .split(',')
            .map(|p| {
                p.trim()
                    .strip_prefix("linux/")
                    .unwrap_or_else(|| panic!("{p} is not a linux platform"))
            })
            .collect();
        assert_eq!(arches, ["amd64", "arm64"], "release.yml builds {platforms}");
        for arch in arches {
            assert!(
                build.args.contains(&format!("{arch})")),
                "the builder has no case for TARGETARCH {arch}"
            );
        }
    }
    let target = builds
        .iter()
        .find_map(|s| s["with"]["target"].as_str())
        .unwrap_or_else(|| panic!("release.yml exports no binary target"));
    assert!(
        stages
            .iter()
            .any(|s| s[0].args.ends_with(&format!(" AS {target}"))),
        "the Dockerfile has no stage {target} for release.yml to export"
    );
}
