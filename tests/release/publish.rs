//! What release.yml publishes for the tag `v<crate version>` is what the chart installs by
//! default and what the docs tell people to pull and verify; the versions of Cargo.toml,
//! Chart.yaml and CHANGELOG.md agree.

use serde_json::Value;

use super::render::default_images;
use super::{chart_files, read, string, uses, workflow};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The workflow-level `env` value `name` of release.yml.
fn release_env(name: &str) -> String {
    let wf = workflow("release.yml");
    string(&wf["env"][name], &format!("release.yml env.{name}")).to_string()
}

/// The image reference the tag `v<version>` publishes: release.yml's metadata-action turns the
/// tag into the image tag with `type=semver,pattern={{version}}` (the tag without its `v`), and
/// the build step pushes those tags.
fn published_image(version: &str) -> String {
    let wf = workflow("release.yml");
    assert_eq!(
        wf["on"]["push"]["tags"],
        serde_json::json!(["v*"]),
        "release.yml runs on tags v*"
    );
    let meta = uses(&wf, "image", "docker/metadata-action");
    assert_eq!(meta.len(), 1, "one docker/metadata-action step");
    assert_eq!(
        meta[0]["with"]["images"], "${{ env.IMAGE }}",
        "the image name comes from env.IMAGE"
    );
    let tags = string(&meta[0]["with"]["tags"], "metadata-action tags");
    assert!(
        tags.lines()
            .any(|l| l.trim() == "type=semver,pattern={{version}}"),
        "the tag vX.Y.Z publishes the image tag X.Y.Z: {tags}"
    );
    let id = string(&meta[0]["id"], "metadata-action id");
    let pushed: Vec<&Value> = uses(&wf, "image", "docker/build-push-action")
        .into_iter()
        .filter(|s| s["with"]["push"] == true)
        .collect();
    assert_eq!(pushed.len(), 1, "one build step pushes the image");
    assert_eq!(
        pushed[0]["with"]["tags"],
        format!("${{{{ steps.{id}.outputs.tags }}}}"),
        "the pushed tags are the metadata-action's"
    );
    assert_eq!(pushed[0]["with"]["sbom"], true, "the image carries an SBOM");
    format!("{}:{version}", release_env("IMAGE"))
}

/// Chart.yaml's version and appVersion equal the crate version: the tag `vX.Y.Z` releases the
/// operator and the chart together, and the image tag defaults to appVersion. CHANGELOG.md has a
/// section for that version, which becomes the release notes.
#[test]
fn crate_chart_and_changelog_versions_agree() {
    let (_, chart) = chart_files();
    assert_eq!(chart["version"], VERSION, "Chart.yaml version");
    assert_eq!(chart["appVersion"], VERSION, "Chart.yaml appVersion");
    assert_eq!(
        chart["name"],
        release_env("CHART_NAME"),
        "release.yml's CHART_NAME"
    );
    let changelog = read("CHANGELOG.md");
    assert!(
        changelog
            .lines()
            .any(|l| l.starts_with(&format!("## [{VERSION}]"))),
        "CHANGELOG.md has no section ## [{VERSION}]"
    );
    assert!(
        changelog.lines().any(|l| l == "## [Unreleased]"),
        "CHANGELOG.md has an Unreleased section"
    );
}

/// values.yaml names the published image, leaving the tag to appVersion; the chart rendered with
/// default values (by the Helm engine) runs exactly the image the tag `v<crate version>` pushes.
#[test]
fn chart_default_image_is_the_published_image() {
    let (values, _) = chart_files();
    assert_eq!(values["image"]["repository"], release_env("IMAGE"));
    assert_eq!(values["image"]["tag"], "", "the tag defaults to appVersion");
    assert_eq!(
        values["image"]["digest"], "",
        "no digest pins another image"
    );
    let published = published_image(VERSION);

    let Some(images) = default_images("chart_default_image_is_the_published_image") else {
        return;
    };
    assert!(!images.is_empty(), "the default render runs no container");
    for image in images {
        assert_eq!(
            image, published,
            "the chart's Deployment runs another image than release.yml publishes"
        );
    }
}

/// The chart goes to the OCI registry that docs/release.md names, and the docs show the image
/// and chart references the workflow publishes and how to verify them; the README points there.
#[test]
fn docs_name_what_the_workflow_publishes() {
    let registry = release_env("CHART_REGISTRY");
    assert!(
        registry.starts_with("oci://ghcr.io/"),
        "the chart goes to an OCI registry: {registry}"
    );
    let chart = format!("{registry}/{}", release_env("CHART_NAME"));
    let image = release_env("IMAGE");
    let docs = read("docs/release.md");
    for needle in [
        image.as_str(),
        chart.as_str(),
        "cosign verify ",
        "cosign verify-attestation ",
        "cosign verify-blob ",
        "--certificate-oidc-issuer",
        "https://token.actions.githubusercontent.com",
        ".github/workflows/release.yml@refs/tags/v",
        "kubectl apply",
    ] {
        assert!(
            docs.contains(needle),
            "docs/release.md does not show {needle}"
        );
    }
    assert!(
        read("README.md").contains("(docs/release.md)"),
        "the README links docs/release.md"
    );
}

/// LICENSE holds the Apache License 2.0 that Cargo.toml declares, in full.
#[test]
fn license_is_the_declared_one() {
    assert_eq!(env!("CARGO_PKG_LICENSE"), "Apache-2.0");
    let license = read("LICENSE");
    let first: Vec<&str> = license
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(3)
        .collect();
    assert_eq!(
        first,
        [
            "Apache License",
            "Version 2.0, January 2004",
            "http://www.apache.org/licenses/"
        ]
    );
    for section in 1..=9 {
        assert!(
            license.contains(&format!("\n   {section}. ")),
            "LICENSE lacks section {section}"
        );
    }
    assert!(license.contains("END OF TERMS AND CONDITIONS"));
}
