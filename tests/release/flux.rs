//! docs/gitops.md's Flux example installs what the release workflow publishes, in an order Flux
//! can express, and every object in it is valid for Flux: the test API server, holding Flux's own
//! CRDs (`tests/release/flux-crds.yaml`), accepts them with strict field validation.
//!
//! Flux's rules, from its API documentation: a Kustomization's `dependsOn` names Kustomizations
//! and a HelmRelease's names HelmReleases (never one kind after the other); a Kustomization
//! waits for its dependencies' health only when they have `wait: true` or `healthChecks`.

use std::collections::BTreeSet;

use mailtarget_test_apiserver::TestCluster;
use regex::Regex;
use serde::Deserialize;
use serde_json::Value;

use super::{read, root, string, workflow};

/// The YAML documents of the code blocks of docs/gitops.md's `## Flux` section, in order.
fn flux_documents() -> Vec<Value> {
    let doc = read("docs/gitops.md");
    let start = doc
        .find("\n## Flux\n")
        .unwrap_or_else(|| panic!("docs/gitops.md has no ## Flux section"));
    let section = &doc[start + 1..];
    let section = section[3..]
        .find("\n## ")
        .map_or(section, |end| &section[..end + 3]);
    let mut out = Vec::new();
    let mut block: Option<String> = None;
    for line in section.lines() {
        match (&mut block, line.trim_end()) {
            (None, "```yaml") => block = Some(String::new()),
            (Some(text), "```") => {
                for doc in serde_yaml::Deserializer::from_str(text) {
                    let value = Value::deserialize(doc)
                        .unwrap_or_else(|e| panic!("docs/gitops.md Flux YAML: {e}\n{text}"));
                    if !value.is_null() {
                        out.push(value);
                    }
                }
                block = None;
            }
            (Some(text), _) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(
        !out.is_empty(),
        "docs/gitops.md's Flux section shows no YAML"
    );
    out
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

/// `namespace/name` of an object, or of a reference resolved in `from`'s namespace.
fn key(reference: &Value, from: &Value) -> String {
    let namespace = reference["namespace"]
        .as_str()
        .or_else(|| from["metadata"]["namespace"].as_str())
        .unwrap_or("default");
    format!(
        "{namespace}/{}",
        reference["name"].as_str().unwrap_or_default()
    )
}

/// Each `dependsOn` names an object of the same kind shown in the example, and a Kustomization
/// that another depends on waits for the health of what it applies; the operator's HelmRelease
/// is applied by such a Kustomization, before the one of the resources.
#[test]
fn flux_dependencies_are_ones_flux_allows() {
    let docs = flux_documents();
    let mut depended_on = BTreeSet::new();
    for kind in ["Kustomization", "HelmRelease"] {
        let known: BTreeSet<String> = of_kind(&docs, kind)
            .iter()
            .map(|d| key(&d["metadata"], d))
            .collect();
        for object in of_kind(&docs, kind) {
            for dependency in object["spec"]["dependsOn"].as_array().into_iter().flatten() {
                let target = key(dependency, object);
                assert!(
                    known.contains(&target),
                    "{kind} {} depends on {target}, which is no {kind} of the example: Flux \
                     resolves a {kind}'s dependsOn among {kind}s only",
                    key(&object["metadata"], object)
                );
                if kind == "Kustomization" {
                    depended_on.insert(target);
                }
            }
        }
    }
    assert!(
        !depended_on.is_empty(),
        "the resources' Kustomization depends on the operator's"
    );
    for k in of_kind(&docs, "Kustomization") {
        if depended_on.contains(&key(&k["metadata"], k)) {
            assert!(
                k["spec"]["wait"] == true
                    || k["spec"]["healthChecks"]
                        .as_array()
                        .is_some_and(|h| !h.is_empty()),
                "Kustomization {} is depended on but neither waits nor checks health: its \
                 dependants would start before the operator is installed",
                key(&k["metadata"], k)
            );
        }
    }
    let releases = of_kind(&docs, "HelmRelease");
    assert_eq!(releases.len(), 1, "one HelmRelease, the operator's");
}

/// The OCIRepository pulls the chart release.yml pushes, and accepts exactly the signatures that
/// workflow makes for a tag: cosign keyless, GitHub's OIDC issuer, the release workflow of this
/// repository at a tag (not another workflow or branch). Flux matches these as Go regular
/// expressions (RE2), which the `regex` crate reads the same way for these patterns.
#[test]
fn flux_pulls_and_verifies_the_published_chart() {
    let docs = flux_documents();
    let wf = workflow("release.yml");
    let chart = format!(
        "{}/{}",
        string(&wf["env"]["CHART_REGISTRY"], "CHART_REGISTRY"),
        string(&wf["env"]["CHART_NAME"], "CHART_NAME")
    );
    let sources = of_kind(&docs, "OCIRepository");
    assert_eq!(sources.len(), 1, "one OCIRepository");
    let source = sources[0];
    assert_eq!(source["spec"]["url"], chart, "the chart release.yml pushes");
    assert_eq!(
        source["spec"]["layerSelector"]["mediaType"],
        "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
        "Helm's chart layer"
    );
    let verify = &source["spec"]["verify"];
    assert_eq!(verify["provider"], "cosign");
    let matchers = verify["matchOIDCIdentity"]
        .as_array()
        .unwrap_or_else(|| panic!("no matchOIDCIdentity: any signer would do"));
    let version = env!("CARGO_PKG_VERSION");
    let signer = format!(
        "https://github.com/mailtarget/mailtarget-operator/.github/workflows/release.yml@refs/tags/v{version}"
    );
    let issuer = "https://token.actions.githubusercontent.com";
    let accepts = |subject: &str, issuer: &str| {
        matchers.iter().any(|m| {
            let matches = |field: &str, text: &str| {
                Regex::new(string(&m[field], field))
                    .unwrap_or_else(|e| panic!("matchOIDCIdentity {field}: {e}"))
                    .is_match(text)
            };
            matches("issuer", issuer) && matches("subject", subject)
        })
    };
    assert!(
        accepts(&signer, issuer),
        "the release signature of v{version}"
    );
    let ci_main = "https://github.com/mailtarget/mailtarget-operator/.github/workflows/ci.yml@refs/heads/main";
    let release_branch = signer.replace("refs/tags/v", "refs/heads/v");
    let fork = signer.replace("/mailtarget/", "/someone/");
    for other in [ci_main, release_branch.as_str(), fork.as_str()] {
        assert!(!accepts(other, issuer), "a signature by {other} is refused");
    }
    assert!(
        !accepts(&signer, "https://accounts.google.com"),
        "another issuer is refused"
    );
    assert!(
        read("docs/release.md").contains(&signer.replace(version, "${VERSION}")),
        "docs/release.md verifies against the same identity"
    );

    let release = of_kind(&docs, "HelmRelease")[0];
    assert_eq!(release["spec"]["chartRef"]["kind"], "OCIRepository");
    assert_eq!(
        release["spec"]["chartRef"]["name"],
        source["metadata"]["name"]
    );
    assert_eq!(release["spec"]["upgrade"]["crds"], "CreateReplace");
}

fn kubectl_ok(cluster: &TestCluster, args: &[&str], input: &[u8]) -> String {
    let out = cluster.kubectl_with_input(args, input);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "kubectl {args:?} failed:\n{text}");
    text
}

/// With Flux's CRDs installed, the test API server accepts every Flux object of the example
/// under strict field validation (as `kubectl apply --server-side`, which is how Flux applies),
/// and refuses a misspelt field, so the check is live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flux_objects_are_valid_for_flux() {
    let test = "flux_objects_are_valid_for_flux";
    if !TestCluster::require_kubectl(test) {
        return;
    }
    let cluster = TestCluster::start().await.expect("test cluster");
    if cluster.emulator().is_none() {
        println!(
            "SKIPPED {test}: it installs Flux CRDs, which it does only on the test API server"
        );
        cluster.cleanup().await;
        return;
    }
    let crds = root().join("tests/release/flux-crds.yaml");
    let crds = crds.to_string_lossy().into_owned();
    kubectl_ok(&cluster, &["apply", "--server-side", "-f", &crds], b"");
    for crd in [
        "kustomizations.kustomize.toolkit.fluxcd.io",
        "helmreleases.helm.toolkit.fluxcd.io",
        "ocirepositories.source.toolkit.fluxcd.io",
    ] {
        kubectl_ok(
            &cluster,
            &[
                "wait",
                "--for=condition=Established",
                "--timeout=30s",
                &format!("crd/{crd}"),
            ],
            b"",
        );
    }

    // Every object into the test's namespace (the example's namespaces do not exist here).
    let mut objects: Vec<Value> = flux_documents()
        .into_iter()
        .filter(|d| {
            d["apiVersion"]
                .as_str()
                .is_some_and(|a| a.contains(".fluxcd.io/"))
        })
        .collect();
    for object in &mut objects {
        if let Some(meta) = object["metadata"].as_object_mut() {
            meta.remove("namespace");
        }
    }
    let kinds: BTreeSet<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        BTreeSet::from(["HelmRelease", "Kustomization", "OCIRepository"]),
        "the Flux kinds of the example, each with its CRD in flux-crds.yaml"
    );
    let stream: String = objects
        .iter()
        .map(|o| format!("---\n{}", serde_yaml::to_string(o).unwrap_or_default()))
        .collect();
    let applied = kubectl_ok(
        &cluster,
        &["apply", "--server-side", "--validate=strict", "-f", "-"],
        stream.as_bytes(),
    );
    assert_eq!(
        applied
            .lines()
            .filter(|l| l.ends_with(" serverside-applied"))
            .count(),
        objects.len(),
        "every Flux object applied:\n{applied}"
    );

    let mut misspelt = objects
        .iter()
        .find(|o| o["kind"] == "Kustomization")
        .cloned()
        .unwrap_or_else(|| panic!("no Kustomization"));
    misspelt["metadata"]["name"] = "misspelt".into();
    misspelt["spec"]["waitt"] = true.into();
    let refused = cluster.kubectl_with_input(
        ["apply", "--server-side", "--validate=strict", "-f", "-"],
        serde_yaml::to_string(&misspelt)
            .unwrap_or_default()
            .as_bytes(),
    );
    assert!(
        !refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("waitt"),
        "the server refuses an unknown field: {}",
        String::from_utf8_lossy(&refused.stderr)
    );
    cluster.cleanup().await;
}
