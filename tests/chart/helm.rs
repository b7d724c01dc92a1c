//! The real Helm engine (Helm v4 inside the PyPI package `helm-python-sdk`), driven through
//! `tests/chart/render.py`: lint, render, and the skip rule when the package is missing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::Value;

/// The repository root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The chart directory.
pub fn chart_dir() -> PathBuf {
    root().join("charts/mailtarget-operator")
}

/// The values file that turns every option of the chart on.
pub fn values_all() -> PathBuf {
    root().join("tests/chart/values-all.yaml")
}

fn python(args: &[&str]) -> Output {
    let script = root().join("tests/chart/render.py");
    match Command::new("python3").arg(&script).args(args).output() {
        Ok(o) => o,
        Err(e) => panic!("cannot run python3 {}: {e}", script.display()),
    }
}

fn importable() -> &'static Result<(), String> {
    static CHECK: OnceLock<Result<(), String>> = OnceLock::new();
    CHECK.get_or_init(|| {
        let script = root().join("tests/chart/render.py");
        match Command::new("python3").arg(&script).arg("check").output() {
            Ok(o) if o.status.success() => Ok(()),
            Ok(o) => Err(String::from_utf8_lossy(&o.stderr).trim().to_string()),
            Err(e) => Err(format!("python3 cannot be run: {e}")),
        }
    })
}

/// `true` when the Helm engine can be used. When `helm_python` cannot be imported the test is
/// skipped with a printed message, except in CI (`CI=true`), where that is a failure.
///
/// # Panics
/// `helm_python` is missing and `CI` is `true`.
pub fn require_helm(test: &str) -> bool {
    match importable() {
        Ok(()) => true,
        Err(why) => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!(
                    "{test}: the Helm engine is unavailable ({why}); CI=true requires `pip install helm-python-sdk`"
                );
            }
            println!(
                "SKIPPED {test}: the Helm engine is unavailable ({why}); run `pip install helm-python-sdk` to run it"
            );
            false
        }
    }
}

/// How to render the chart.
#[derive(Clone, Debug)]
pub struct RenderOptions {
    /// Values files, in order.
    pub values: Vec<PathBuf>,
    /// `--set-json` expressions (`key=<json>`), applied after the files.
    pub set_json: Vec<String>,
    /// Release name.
    pub release: String,
    /// Release namespace.
    pub namespace: String,
}

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions {
            values: Vec::new(),
            set_json: Vec::new(),
            release: "mailtarget-operator".into(),
            namespace: "mailtarget-system".into(),
        }
    }
}

impl RenderOptions {
    /// The default values plus `values-all.yaml`.
    pub fn all_options() -> Self {
        RenderOptions {
            values: vec![values_all()],
            ..Default::default()
        }
    }

    /// Adds a `--set-json key=<json>` expression.
    pub fn set(mut self, key: &str, json: Value) -> Self {
        self.set_json.push(format!("{key}={json}"));
        self
    }
}

/// The output of one render.
#[derive(Debug)]
pub struct Rendered {
    /// Every rendered manifest, as a YAML stream (what `helm template` prints).
    pub yaml: String,
    /// The same manifests as JSON values, in order.
    pub objects: Vec<Value>,
    /// The hooks (manifests annotated `helm.sh/hook`, e.g. the `helm test` Pod), which an
    /// install does not apply.
    pub hooks: Vec<Value>,
    /// NOTES.txt as rendered.
    pub notes: String,
    /// The chart's `crds/` as a YAML stream.
    pub crds_yaml: String,
}

impl Rendered {
    /// The objects of `kind`.
    pub fn of_kind(&self, kind: &str) -> Vec<&Value> {
        self.objects.iter().filter(|o| o["kind"] == kind).collect()
    }

    /// The one object of `kind`.
    ///
    /// # Panics
    /// There is not exactly one.
    pub fn one(&self, kind: &str) -> &Value {
        let found = self.of_kind(kind);
        assert_eq!(found.len(), 1, "expected exactly one {kind}: {found:#?}");
        found[0]
    }
}

/// Parses a YAML stream into JSON values, skipping empty documents.
///
/// # Panics
/// A document is not valid YAML.
pub fn parse_stream(yaml: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(yaml) {
        let value = match Value::deserialize(doc) {
            Ok(v) => v,
            Err(e) => panic!("rendered YAML does not parse: {e}\n{yaml}"),
        };
        if !value.is_null() {
            out.push(value);
        }
    }
    out
}

/// Renders the chart as `helm install` would. `Err` carries Helm's message when the values are
/// rejected or a template fails.
pub fn render(opts: &RenderOptions) -> Result<Rendered, String> {
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("tempdir: {e}"),
    };
    let chart = chart_dir();
    let out = dir.path().to_string_lossy().into_owned();
    let mut args: Vec<String> = vec![
        "render".into(),
        chart.to_string_lossy().into_owned(),
        out,
        "--release".into(),
        opts.release.clone(),
        "--namespace".into(),
        opts.namespace.clone(),
    ];
    for v in &opts.values {
        args.push("--values".into());
        args.push(v.to_string_lossy().into_owned());
    }
    for s in &opts.set_json {
        args.push("--set-json".into());
        args.push(s.clone());
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = python(&refs);
    match output.status.code() {
        Some(0) => {}
        Some(2) => return Err(String::from_utf8_lossy(&output.stderr).into_owned()),
        _ => panic!(
            "render.py failed unexpectedly: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    }
    let read = |name: &str| {
        std::fs::read_to_string(dir.path().join(name))
            .unwrap_or_else(|e| panic!("render.py did not write {name}: {e}"))
    };
    let yaml = read("manifests.yaml");
    Ok(Rendered {
        objects: parse_stream(&yaml),
        hooks: parse_stream(&read("hooks.yaml")),
        yaml,
        notes: read("NOTES.txt"),
        crds_yaml: read("crds.yaml"),
    })
}

/// The render with default values (rendered once per test run).
pub fn defaults() -> &'static Rendered {
    static R: OnceLock<Rendered> = OnceLock::new();
    R.get_or_init(|| render_ok(&RenderOptions::default()))
}

/// The render with every option on (rendered once per test run).
pub fn all_options() -> &'static Rendered {
    static R: OnceLock<Rendered> = OnceLock::new();
    R.get_or_init(|| render_ok(&RenderOptions::all_options()))
}

/// Renders, panicking with Helm's message on failure.
pub fn render_ok(opts: &RenderOptions) -> Rendered {
    render(opts).unwrap_or_else(|e| panic!("the chart did not render with {opts:?}: {e}"))
}

/// Runs the strict lint with `values` files; returns (passed, printed report).
pub fn lint(values: &[PathBuf]) -> (bool, String) {
    let chart = chart_dir().to_string_lossy().into_owned();
    let mut args: Vec<String> = vec!["lint".into(), chart];
    for v in values {
        args.push("--values".into());
        args.push(v.to_string_lossy().into_owned());
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = python(&refs);
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), report)
}

/// The strict lint passes with the default values and with every option on.
#[test]
fn chart_lints_strictly() {
    if !require_helm("chart_lints_strictly") {
        return;
    }
    for values in [vec![], vec![values_all()]] {
        let (passed, report) = lint(&values);
        assert!(
            passed,
            "helm lint --strict failed with {values:?}:\n{report}"
        );
        assert!(report.contains("lint: passed"), "{report}");
    }
}

/// values.schema.json turns wrong values away at install time, naming the offending value.
#[test]
fn schema_rejects_wrong_values() {
    if !require_helm("schema_rejects_wrong_values") {
        return;
    }
    let cases: &[(&str, Value, &str)] = &[
        ("replicaCount", serde_json::json!("two"), "replicaCount"),
        ("logging.format", serde_json::json!("xml"), "format"),
        ("replicaCount", serde_json::json!(-1), "replicaCount"),
        ("unknownOption", serde_json::json!(true), "unknownOption"),
        // METRICS_ADDR is an IP address and a port: a host name stops the pod at start.
        (
            "metrics.bindAddress",
            serde_json::json!("localhost"),
            "bindAddress",
        ),
        (
            "api.timeoutSeconds",
            serde_json::json!(7200),
            "timeoutSeconds",
        ),
        ("api.concurrency", serde_json::json!(2000), "concurrency"),
        (
            "watchNamespaces",
            serde_json::json!(["a", "a"]),
            "watchNamespaces",
        ),
        (
            "watchNamespaces",
            serde_json::json!(["Not_A_Namespace"]),
            "watchNamespaces",
        ),
        (
            "api.caBundle",
            serde_json::json!({"configMap": "Corporate_CA"}),
            "configMap",
        ),
        (
            "networkPolicy.kubernetesApi.cidrs",
            serde_json::json!(["10.0.0.1"]),
            "cidrs",
        ),
        (
            "networkPolicy.mailtargetApi.ports",
            serde_json::json!([0]),
            "ports",
        ),
        (
            "extraVolumes",
            serde_json::json!([{"emptyDir": {}}]),
            "extraVolumes",
        ),
        (
            "extraVolumeMounts",
            serde_json::json!([{"name": "scratch"}]),
            "extraVolumeMounts",
        ),
        ("helmTest.timeout", serde_json::json!("soon"), "timeout"),
        (
            "credentials.apiKeyKey",
            serde_json::json!("bad key!"),
            "apiKeyKey",
        ),
        (
            "reconcile.resyncInterval",
            serde_json::json!("five minutes"),
            "resyncInterval",
        ),
        (
            "reconcile.verifyMaxInterval",
            serde_json::json!(600),
            "verifyMaxInterval",
        ),
        ("image.digest", serde_json::json!("sha256:abc"), "digest"),
        (
            "image.pullPolicy",
            serde_json::json!("Sometimes"),
            "pullPolicy",
        ),
        ("metrics.port", serde_json::json!(70000), "port"),
        (
            "api.url",
            serde_json::json!("apiconfig.mailtarget.co"),
            "url",
        ),
        (
            "podDisruptionBudget.minAvailable",
            serde_json::json!("half"),
            "minAvailable",
        ),
        (
            "livenessProbe.httpGet",
            serde_json::json!({"path": "/"}),
            "httpGet",
        ),
        (
            "leaderElection.enabled",
            serde_json::json!("yes"),
            "enabled",
        ),
    ];
    for (key, value, mention) in cases {
        let opts = RenderOptions::default().set(key, value.clone());
        match render(&opts) {
            Ok(r) => panic!("{key}={value} was accepted; rendered:\n{}", r.yaml),
            Err(message) => {
                assert!(
                    message.contains("schema") && message.contains(mention),
                    "{key}={value}: the error should come from the schema and name {mention}: {message}"
                );
            }
        }
    }
}

/// Values that look unusual but are right are accepted (the schema is not stricter than the
/// operator).
#[test]
fn schema_accepts_valid_alternatives() {
    if !require_helm("schema_accepts_valid_alternatives") {
        return;
    }
    let cases: &[(&str, Value)] = &[
        (
            "podDisruptionBudget",
            serde_json::json!({"enabled": true, "minAvailable": "50%"}),
        ),
        (
            "podDisruptionBudget",
            serde_json::json!({"enabled": true, "maxUnavailable": 1}),
        ),
        (
            "credentials",
            serde_json::json!({"existingSecret": "mine", "apiKeyKey": "token"}),
        ),
        ("reconcile.resyncInterval", serde_json::json!("1h30m")),
        ("replicaCount", serde_json::json!(0)),
        ("metrics.bindAddress", serde_json::json!("::")),
        ("metrics.bindAddress", serde_json::json!("10.0.0.5")),
        ("global", serde_json::json!({"imageRegistry": "x"})),
        (
            "watchNamespaces",
            serde_json::json!(["team-a", "team-b", "team-c"]),
        ),
        (
            "api.caBundle",
            serde_json::json!({"secret": "corporate-ca", "key": "ca.pem"}),
        ),
        (
            "networkPolicy",
            serde_json::json!({"enabled": true, "kubernetesApi": {"cidrs": ["fd00::1/128"]}}),
        ),
    ];
    for (key, value) in cases {
        let opts = RenderOptions::default().set(key, value.clone());
        if let Err(e) = render(&opts) {
            panic!("{key}={value} was rejected: {e}");
        }
    }
}

/// Values that are each valid but wrong together fail the install with a sentence saying what
/// to change, not with a JSON-schema keyword (Helm prints a schema failure as the keyword that
/// failed, e.g. `maxLength: got 1, want 0`).
#[test]
fn conflicting_values_fail_with_a_sentence() {
    if !require_helm("conflicting_values_fail_with_a_sentence") {
        return;
    }
    let cases: &[(&str, Value, &str)] = &[
        (
            "credentials",
            serde_json::json!({"existingSecret": "mine", "apiKey": "also-a-key"}),
            "credentials.apiKey and credentials.existingSecret are both set: set only one.",
        ),
        (
            "api.caBundle",
            serde_json::json!({"configMap": "corporate-ca", "secret": "corporate-ca"}),
            "api.caBundle.configMap and api.caBundle.secret are both set",
        ),
        (
            "networkPolicy",
            serde_json::json!({"enabled": true}),
            "networkPolicy.enabled needs networkPolicy.kubernetesApi.cidrs",
        ),
        // The operator's rights (Secrets of every watched namespace) must not go to the
        // namespace's `default` ServiceAccount, which every pod there runs as.
        (
            "serviceAccount",
            serde_json::json!({"create": false}),
            "serviceAccount.create is false and serviceAccount.name is empty",
        ),
    ];
    for (key, value, sentence) in cases {
        let opts = RenderOptions::default().set(key, value.clone());
        match render(&opts) {
            Ok(r) => panic!("{key}={value} was accepted; rendered:\n{}", r.yaml),
            Err(message) => {
                assert!(
                    message.contains(sentence),
                    "{key}={value}: expected {sentence:?} in: {message}"
                );
                assert!(
                    !message.contains("got ") && !message.contains("want "),
                    "{key}={value}: a schema keyword instead of a sentence: {message}"
                );
                assert!(
                    !message.contains("also-a-key"),
                    "the error shows the API key: {message}"
                );
            }
        }
    }
}
