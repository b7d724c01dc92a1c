//! `plan` and `apply` of manifest files against the simulator: idempotency, adoption, the
//! binary's output, and bad manifests rejected before any API call.

use std::path::{Path, PathBuf};
use std::process::Output;

use std::time::Duration;
use tokio::process::Command;

use mailtarget_operator::api::{Client, ClientConfig, CreateApiKey};
use mailtarget_operator::manifest;
use mailtarget_operator::offline::{apply, plan};
use mailtarget_operator::simulator::{Simulator, SimulatorConfig};

const KEY: &str = "test-company-key";

async fn simulator() -> Simulator {
    Simulator::start(SimulatorConfig::new(KEY))
        .await
        .expect("simulator starts")
}

/// The value of a second company key of `sim` (a new key, `second-company`): an account holding
/// it reaches the same company as [`KEY`] through another key, which the CLI cannot tell apart
/// from another company.
async fn second_company_key(sim: &Simulator) -> String {
    use secrecy::ExposeSecret;
    let request = CreateApiKey {
        name: Some("second-company".into()),
        ..Default::default()
    };
    let created = client(sim).create_api_key(&request).await.unwrap();
    created.key.expose_secret().to_string()
}

fn client(sim: &Simulator) -> Client {
    let config = ClientConfig::new(
        sim.base_url().parse().unwrap(),
        sim.transmission_url().parse().unwrap(),
        KEY.to_string().into(),
    );
    Client::new(config).unwrap()
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

/// The single-account examples (the files at the top of `examples/`, not `examples/tenants/`),
/// copied into a directory of their own.
fn single_account_examples() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(examples()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    dir
}

/// True when the simulator's request log (since it was last cleared) holds no write.
fn wrote_nothing(sim: &Simulator) -> bool {
    sim.request_log().iter().all(|r| !r.is_write())
}

/// Runs the real binary with a bounded wait (asynchronously, so that an in-process simulator
/// keeps serving meanwhile).
async fn run_binary(args: &[&str], sim: Option<&Simulator>) -> Output {
    output(command(
        env!("CARGO_BIN_EXE_mailtarget-operator"),
        args,
        sim,
    ))
    .await
}

/// `program` with `args` (the binary, or a shell that runs it), taking no key, address or
/// default from the caller's environment: `sim`'s key and addresses when given.
fn command(program: &str, args: &[&str], sim: Option<&Simulator>) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_remove("MAILTARGET_API_KEY")
        .env_remove("MAILTARGET_API_KEY_FILE")
        .env_remove("MAILTARGET_CA_BUNDLE")
        .env_remove("MAILTARGET_DEFAULT_ADOPTION_POLICY")
        .env_remove("RUST_LOG")
        // tracing-subscriber leaves colours out under NO_COLOR whatever the terminal: a test of
        // when colours are written must not depend on the caller's setting.
        .env_remove("NO_COLOR");
    if let Some(sim) = sim {
        cmd.env("MAILTARGET_API_KEY", KEY)
            .env("MAILTARGET_API_URL", sim.base_url())
            .env("MAILTARGET_TRANSMISSION_URL", sim.transmission_url());
    }
    cmd.kill_on_drop(true);
    cmd
}

/// What `cmd` printed and its exit status, once it ended (bounded wait).
async fn output(mut cmd: Command) -> Output {
    tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("binary finished within 60 s")
        .unwrap()
}

/// Applying the examples creates exactly the declared objects; a second plan and apply change
/// nothing.
#[tokio::test]
async fn apply_examples_then_nothing_changes() {
    let sim = simulator().await;
    let client = client(&sim);
    let set = manifest::load(&[single_account_examples().path().to_path_buf()]).unwrap();
    let first = plan::build(&client, &set.resources, &set.namespace_selectors)
        .await
        .unwrap();
    let s = first.summary();
    assert_eq!(
        (s.create, s.update, s.unchanged, s.error),
        (5, 0, 0, 0),
        "{:#?}",
        first.entries
    );
    let report = apply::run(&client, &first, None).await;
    assert_eq!(report.summary().error, 0, "{:#?}", report.outcomes);

    let state = sim.snapshot();
    assert_eq!(state.sub_accounts.len(), 1);
    let sub = state.sub_accounts[0].id;
    let inside: Vec<&str> = (state.api_keys.iter())
        .filter(|k| k.sub_account_id == sub)
        .map(|k| k.name.as_str())
        .collect();
    assert_eq!(
        inside,
        ["mailtarget-operator", "team-a-sender"],
        "the operator's credential, created with the sub account, and the key created inside it"
    );
    assert_eq!(state.api_keys.len(), 3, "plus one company key");
    assert_eq!(state.sending_domains.len(), 2);

    sim.clear_request_log();
    let second = plan::build(&client, &set.resources, &set.namespace_selectors)
        .await
        .unwrap();
    let s = second.summary();
    assert_eq!(
        (s.create, s.update, s.unchanged),
        (0, 0, 5),
        "{:#?}",
        second.entries
    );
    let report = apply::run(&client, &second, None).await;
    assert_eq!(report.summary().unchanged, 5);
    let writes: Vec<_> = sim
        .request_log()
        .into_iter()
        .filter(|r| r.is_write())
        .collect();
    assert!(writes.is_empty(), "second apply wrote: {writes:?}");
    // The reads of a re-apply are the minimum: one page of each list, the detail of each of
    // the two keys (their specs set permissions, which the list lacks) and of each domain (its
    // DNS records).
    let mut reads: Vec<String> = sim.request_log().iter().map(|r| r.endpoint()).collect();
    reads.sort();
    assert_eq!(
        reads,
        [
            "GET /api-key",
            "GET /api-key/{id}",
            "GET /api-key/{id}",
            "GET /domain/sending",
            "GET /domain/sending/{id}",
            "GET /domain/sending/{id}",
            "GET /sub-account",
        ],
        "re-apply reads"
    );
    assert_eq!(sim.snapshot().api_keys.len(), 3, "no duplicate keys");
}

/// A spec change becomes exactly one PUT carrying the changed field, shown in the plan diff
/// with the values' JSON shapes.
#[tokio::test]
async fn spec_change_is_one_update_with_diff() {
    let sim = simulator().await;
    let client = client(&sim);
    let set = manifest::load(&[single_account_examples().path().to_path_buf()]).unwrap();
    apply::run(
        &client,
        &plan::build(&client, &set.resources, &set.namespace_selectors)
            .await
            .unwrap(),
        None,
    )
    .await;

    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(examples().join("apikey-ci.yaml"))
        .unwrap()
        .replacen("permissionIds: [1, 2]", "permissionIds: [1, 3]", 1);
    std::fs::write(dir.path().join("keys.yaml"), text).unwrap();
    let set = manifest::load(&[dir.path().to_path_buf()]).unwrap();
    let p = plan::build(&client, &set.resources, &set.namespace_selectors)
        .await
        .unwrap();
    let ci = p.entries.iter().find(|e| e.name == "ci-sender").unwrap();
    assert_eq!(ci.action, "update");
    assert_eq!(ci.changes.len(), 1);
    assert_eq!(ci.changes[0].field, "spec.permissionIds");
    // Values keep the spec's shape in JSON: a list of ids is a list, not its text.
    let shown = serde_json::to_value(ci).unwrap();
    assert_eq!(shown["changes"][0]["from"], serde_json::json!([1, 2]));
    assert_eq!(shown["changes"][0]["to"], serde_json::json!([1, 3]));
    let sent = &shown["steps"][0]["sends"][0];
    assert_eq!(sent["field"], "spec.permissionIds");
    assert_eq!(sent["value"], serde_json::json!([1, 3]));

    sim.clear_request_log();
    apply::run(&client, &p, None).await;
    let writes: Vec<_> = sim
        .request_log()
        .into_iter()
        .filter(|r| r.is_write())
        .collect();
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_eq!(
        (writes[0].method.as_str(), writes[0].path.as_str()),
        ("PUT", format!("/api-key/{}", ci.id.unwrap()).as_str())
    );
}

/// Two API objects with the same natural key: nothing is adopted and nothing is written.
#[tokio::test]
async fn ambiguous_natural_key_writes_nothing() {
    let sim = simulator().await;
    let client = client(&sim);
    for _ in 0..2 {
        client
            .create_api_key(&CreateApiKey {
                name: Some("ci-sender".into()),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    sim.clear_request_log();
    let out = run_binary(
        &[
            "apply",
            "-f",
            examples().join("apikey-ci.yaml").to_str().unwrap(),
        ],
        Some(&sim),
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("2 API keys match"), "{stderr}");
    assert!(
        stderr.contains("Nothing was applied: fix the errors in the plan first."),
        "{stderr}"
    );
    // Under -o json the plan with its errors is the JSON document on standard output.
    let path = examples().join("apikey-ci.yaml");
    let out = run_binary(
        &["apply", "-o", "json", "-f", path.to_str().unwrap()],
        Some(&sim),
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(doc["summary"]["error"], 1, "{doc}");
    assert!(
        doc["resources"][0]["error"]
            .as_str()
            .unwrap()
            .contains("2 API keys match")
    );
    assert!(wrote_nothing(&sim));
}

/// The binary's apply prints IDs and DNS records, never secret values, and `--secrets-dir`
/// writes them to private files.
#[tokio::test]
async fn binary_apply_output_and_secrets_dir() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let out = run_binary(
        &[
            "apply",
            "-f",
            single_account_examples().path().to_str().unwrap(),
            "--secrets-dir",
            dir.path().to_str().unwrap(),
        ],
        Some(&sim),
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("Apply: 5 created, 0 updated, 0 unchanged."),
        "{stdout}"
    );
    assert!(stdout.contains("_domainkey.mail.example.com"), "{stdout}");
    let state = sim.snapshot();
    for key in &state.api_keys {
        assert!(!stdout.contains(&key.key), "a key value was printed");
    }
    let key_file = dir.path().join("default/ci-mailtarget-key/apiKey");
    let value = std::fs::read_to_string(&key_file).unwrap();
    assert!(
        state.api_keys.iter().any(|k| k.key == value),
        "file holds a real key value"
    );
    let dkim = std::fs::read_to_string(
        dir.path()
            .join("default/mail-example-com-dkim/dkimPrivateKey"),
    )
    .unwrap();
    assert!(dkim.starts_with("-----BEGIN PRIVATE KEY-----"));
    assert!(!stdout.contains("BEGIN PRIVATE KEY"));

    let out = run_binary(
        &[
            "plan",
            "-f",
            single_account_examples().path().to_str().unwrap(),
            "-o",
            "json",
        ],
        Some(&sim),
    )
    .await;
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["summary"],
        serde_json::json!({"create": 0, "update": 0, "unchanged": 5, "paused": 0, "observe": 0, "error": 0})
    );
    assert!(doc.get("error").is_none(), "no error: {doc}");

    // Applying again changes nothing, files included: each holds its value already, and stays
    // the same file (a watcher of the directory sees no change), and none is reported written.
    use std::os::unix::fs::MetadataExt;
    let files = [key_file.clone(), key_file.with_file_name("..owner")];
    let before: Vec<u64> = files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().ino())
        .collect();
    let examples = single_account_examples();
    let again = ["apply", "-f", examples.path().to_str().unwrap()];
    let out = run_binary(
        &[&again[..], &["--secrets-dir", dir.path().to_str().unwrap()]].concat(),
        Some(&sim),
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(!stdout.contains("secret written"), "{stdout}");
    let after: Vec<u64> = files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().ino())
        .collect();
    assert_eq!(before, after, "the files were not written again");
    assert_eq!(std::fs::read_to_string(&key_file).unwrap(), value);

    // `-o json` says the same: no `secretFiles` while every file holds its value; a removed
    // file is written again and listed.
    let secret_files = |out: &Output| -> Vec<serde_json::Value> {
        assert_eq!(out.status.code(), Some(0), "{}", output_text(out));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let resources = doc["resources"].as_array().unwrap().clone();
        resources
            .iter()
            .flat_map(|r| r["secretFiles"].as_array().cloned().unwrap_or_default())
            .collect()
    };
    let json = [
        &again[..],
        &["--secrets-dir", dir.path().to_str().unwrap(), "-o", "json"],
    ]
    .concat();
    let out = run_binary(&json, Some(&sim)).await;
    assert_eq!(secret_files(&out), Vec::<serde_json::Value>::new());
    std::fs::remove_file(&key_file).unwrap();
    let out = run_binary(&json, Some(&sim)).await;
    let listed = secret_files(&out);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(
        listed[0]
            .as_str()
            .unwrap()
            .ends_with("default/ci-mailtarget-key/apiKey"),
        "{listed:?}"
    );
    assert_eq!(std::fs::read_to_string(&key_file).unwrap(), value);
}

/// `--simulate` needs no key; without it and without a key the error says what to set.
#[tokio::test]
async fn simulate_flag_and_missing_key() {
    let out = run_binary(
        &[
            "plan",
            "-f",
            single_account_examples().path().to_str().unwrap(),
            "--simulate",
        ],
        None,
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.ends_with("Plan: 5 to create, 0 to update, 0 unchanged.\n"),
        "{stdout}"
    );
    let out = run_binary(
        &[
            "plan",
            "-f",
            single_account_examples().path().to_str().unwrap(),
        ],
        None,
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(2),
        "a missing setting is a usage error"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("MAILTARGET_API_KEY"));
    // A key file that cannot be read is a usage error also under --simulate, which uses no
    // key, as an --account key file is: the mistake shows before the run that needs it.
    let examples = single_account_examples();
    let path = examples.path().to_str().unwrap();
    let args = [
        "plan",
        "-f",
        path,
        "--simulate",
        "--api-key-file",
        "/nonexistent/key",
    ];
    let out = run_binary(&args, None).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(2), "{shown}");
    assert!(shown.contains("/nonexistent/key"), "{shown}");
    // --simulate ignores the service's addresses: given as flags they are a usage error, not
    // silently dropped; from the environment (here the simulator's) they are left unused.
    let examples = single_account_examples();
    let path = examples.path().to_str().unwrap();
    let sim = simulator().await;
    for flag in ["--api-url", "--transmission-url"] {
        let args = ["plan", "-f", path, "--simulate", flag, "http://127.0.0.1:9"];
        let out = run_binary(&args, Some(&sim)).await;
        let shown = output_text(&out);
        assert_eq!(out.status.code(), Some(2), "{flag}: {shown}");
        assert!(
            shown.contains(&format!("{flag} cannot be used with --simulate")),
            "{shown}"
        );
    }
    let out = run_binary(&["apply", "-f", path, "--simulate"], Some(&sim)).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert!(sim.request_log().is_empty(), "{:?}", sim.request_log());
    // So is an unusable one: a key with a control character (never printed).
    let examples_dir = single_account_examples();
    let path = examples_dir.path().to_str().unwrap();
    let loopback = "http://127.0.0.1:9";
    let args = [
        "plan",
        "-f",
        path,
        "--api-key",
        "secret\nvalue",
        "--api-url",
        loopback,
    ];
    let out = run_binary(&args, None).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(2), "{shown}");
    assert!(shown.contains("invalid client configuration"), "{shown}");
    assert!(!shown.contains("secret"), "{shown}");

    // A flag overrides the environment: --api-key-file wins over MAILTARGET_API_KEY (the
    // simulator's key is wrong here), and --api-key over MAILTARGET_API_KEY_FILE.
    let sim = simulator().await;
    let key_file = examples_dir.path().join("company.key");
    std::fs::write(&key_file, KEY).unwrap();
    let wrong = examples_dir.path().join("wrong.key");
    std::fs::write(&wrong, "wrong-key").unwrap();
    let (key_file, wrong) = (key_file.to_str().unwrap(), wrong.to_str().unwrap());
    for (env, value, flag, given) in [
        (
            "MAILTARGET_API_KEY",
            "wrong-key",
            "--api-key-file",
            key_file,
        ),
        ("MAILTARGET_API_KEY_FILE", wrong, "--api-key", KEY),
    ] {
        let base_url = sim.base_url();
        let args = ["plan", "-f", path, flag, given, "--api-url", &base_url];
        let run = Command::new(env!("CARGO_BIN_EXE_mailtarget-operator"))
            .args(args)
            .env_remove("MAILTARGET_API_KEY")
            .env_remove("MAILTARGET_API_KEY_FILE")
            .env(env, value)
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(Duration::from_secs(60), run)
            .await
            .expect("finished within 60 s")
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{flag} over {env}: {}",
            output_text(&out)
        );
    }
}

const HEADER_KEY: &str = "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: k\n";
const HEADER_DOMAIN: &str =
    "apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata:\n  name: d\n";
const HEADER_CLUSTER_ACCOUNT: &str = "apiVersion: mailtarget.co/v1alpha1\nkind: ClusterAccount\nmetadata:\n  name: shared\nspec:\n  credentials: {secretRef: {name: mt}}\n";
const HEADER_SUB: &str =
    "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata:\n  name: s\n";

/// Every bad manifest is refused with a message naming the field, and the API sees no request.
#[tokio::test]
async fn bad_manifests_are_rejected_without_api_calls() {
    let cases: Vec<(String, &str, &str)> = vec![
        (format!("{HEADER_DOMAIN}spec:\n  domain: Example.com\n"), "spec.domain", "not a valid domain name"),
        (format!("{HEADER_DOMAIN}spec:\n  domain: bücher.example\n"), "spec.domain", "xn--"),
        (format!("{HEADER_DOMAIN}spec:\n  domain: 10.0.0.1\n"), "spec.domain", "not a valid domain name"),
        (format!("{HEADER_DOMAIN}spec:\n  note: x\n"), "spec", "domain"),
        (format!("{HEADER_KEY}spec:\n  secretName: s\n  allowedIps: [\"10.0.0.300\"]\n"), "spec.allowedIps[0]", "not an IP address"),
        (format!("{HEADER_KEY}spec:\n  secretName: s\n  allowedIps: [\"10.0.0.0/24\"]\n"), "spec.allowedIps[0]", "CIDR"),
        (format!("{HEADER_KEY}spec:\n  secretName: s\n  permissionIds: [-1]\n"), "spec.permissionIds[0]", "-1 is less than the minimum of 0\n"),
        (format!("{HEADER_KEY}spec:\n  secretName: s\n  permisionIds: [1]\n"), "spec.permisionIds", "unknown field"),
        (format!("{HEADER_KEY}spec:\n  name: k\n"), "spec", "secretName"),
        (format!("{HEADER_KEY}spec:\n  secretName: Bad_Name\n"), "spec.secretName", "not a valid Secret name"),
        (format!("{HEADER_KEY}spec:\n  secretName: s\n  deletionPolicy: Destroy\n"), "spec.deletionPolicy", "Destroy"),
        (format!("{HEADER_SUB}spec:\n  ipPoolId: abc\n"), "spec.ipPoolId", "abc"),
        (format!("{HEADER_SUB}spec:\n  ipPoolId: -3\n"), "spec.ipPoolId", "-3 is less than the minimum of 0\n"),
        (format!("{HEADER_SUB}spec:\n  name: {}\n", "n".repeat(101)), "spec.name", "longer than 100"),
        (format!("{HEADER_SUB}spec:\n  deletionPolicy: Delete\n"), "spec.deletionPolicy", "Delete"),
        ("apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata:\n  name: s\n  annotations:\n    mailtarget.co/external-id: abc\nspec: {}\n".into(), "metadata.annotations[mailtarget.co/external-id]", "not an id"),
        ("apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata:\n  name: s\n  annotations:\n    mailtarget.co/paused: \"yes\"\nspec: {}\n".into(), "metadata.annotations[mailtarget.co/paused]", "\"yes\" is not"),
        ("apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {}\nspec: {}\n".into(), "metadata.name", "required"),
        ("apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata:\n  name: Bad_Name\nspec: {}\n".into(), "metadata.name", "not a valid name"),
        ("apiVersion: mailtarget.co/v1\nkind: SubAccount\nmetadata:\n  name: s\nspec: {}\n".into(), "apiVersion", "v1alpha1"),
        ("apiVersion: mailtarget.co/v1alpha1\nkind: Webhook\nmetadata:\n  name: s\nspec: {}\n".into(), "kind", "SubAccount, ApiKey, SendingDomain, ClusterAccount or Account"),
        (format!("{HEADER_KEY}spec:\n  secretName: s\n  subAccountRef:\n    name: missing\n"), "spec.subAccountRef.name", "no valid SubAccount \"missing\""),
        (format!("{HEADER_KEY}spec:\n  secretName: s\n---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: other\nspec:\n  name: k\n  secretName: s2\n"), "spec.name", "also claimed by ApiKey \"k\""),
        (format!("{HEADER_KEY}spec:\n  secretName: s\n---\n{HEADER_KEY}spec:\n  secretName: s\n"), "metadata.name", "also defined at"),
        ("kind: [unclosed\n".into(), "", "not valid YAML"),
        (format!("{HEADER_KEY}spec:\n  secretName: a\nspec:\n  secretName: b\n"), "", "gives key \"spec\" twice"),
        (format!("{HEADER_CLUSTER_ACCOUNT}  namespaceSelector: {{matchExpressions: [{{key: team, operator: Near, values: [a]}}]}}\n"), "spec.namespaceSelector.matchExpressions[0].operator", "\"Near\""),
        (format!("{HEADER_CLUSTER_ACCOUNT}  adoptionNamespaceSelector: {{matchExpressions: [{{key: team, operator: In}}]}}\n"), "spec.adoptionNamespaceSelector.matchExpressions[0].values", "In"),
        // A selector's label keys and values as kube-apiserver checks them: a key that no label
        // can have would match nothing, silently.
        (format!("{HEADER_SUB}spec:\n  allowedNamespaces: {{matchLabels: {{\"bad key!\": x}}}}\n"), "spec.allowedNamespaces.matchLabels", "\"bad key!\" is not a valid label key"),
        (format!("{HEADER_CLUSTER_ACCOUNT}  adoptionNamespaceSelector: {{matchLabels: {{team: \"v a l\"}}}}\n"), "spec.adoptionNamespaceSelector.matchLabels[team]", "not a valid label value"),
        (format!("{HEADER_CLUSTER_ACCOUNT}  namespaceSelector: {{matchExpressions: [{{key: a/b/c, operator: Exists}}]}}\n"), "spec.namespaceSelector.matchExpressions[0].key", "\"a/b/c\" is not a valid label key"),
        (format!("{HEADER_SUB}spec:\n  allowedNamespaces: {{matchExpressions: [{{key: team, operator: In, values: [ok, \"a b\"]}}]}}\n"), "spec.allowedNamespaces.matchExpressions[0].values[1]", "not a valid label value"),
        // Values the service trims would never match their object again: every apply an update.
        (format!("{HEADER_SUB}spec:\n  status: \" active \"\n"), "spec.status", "leading or trailing whitespace"),
        (format!("{HEADER_SUB}spec:\n  deactivatedStatus: \"inactive \"\n"), "spec.deactivatedStatus", "leading or trailing whitespace"),
        (format!("{HEADER_KEY}spec:\n  secretName: s\n  permissionType: \" full\"\n"), "spec.permissionType", "leading or trailing whitespace"),
        // JSON has no NaN or infinity: such a value is no value to drop silently.
        (format!("{HEADER_DOMAIN}spec:\n  domain: ni.example.com\n  note: .inf\n"), "", "JSON cannot hold"),
        (format!("{HEADER_DOMAIN}spec:\n  domain: ni.example.com\n  dkimPrivateKeySecretName: .nan\n"), "", "JSON cannot hold"),
        // A field indented under metadata by mistake is not dropped silently.
        ("apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata:\n  name: d\n  dkimPrivateKeySecretName: d-dkim\nspec:\n  domain: d.example.com\n".into(), "metadata.dkimPrivateKeySecretName", "unknown field \"dkimPrivateKeySecretName\""),
        ("apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata:\n  name: d\n  labels: {\"bad key!\": v}\nspec:\n  domain: d.example.com\n".into(), "metadata.labels", "\"bad key!\" is not a valid label key"),
        ("apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata:\n  name: d\n  labels: {a: \"v a l\"}\nspec:\n  domain: d.example.com\n".into(), "metadata.labels[a]", "not a valid label value"),
        ("apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata:\n  name: d\n  annotations: {\"a/b/c\": v}\nspec:\n  domain: d.example.com\n".into(), "metadata.annotations", "\"a/b/c\" is not a valid annotation key"),
        // An apiVersion that is no group/version is a mistake, not another API group to skip.
        ("apiVersion: \" mailtarget.co/v1alpha1\"\nkind: ApiKey\nmetadata:\n  name: k\nspec:\n  secretName: s\n".into(), "apiVersion", "not a valid apiVersion"),
        ("apiVersion: /v1alpha1\nkind: ApiKey\nmetadata:\n  name: k\nspec:\n  secretName: s\n".into(), "apiVersion", "not a valid apiVersion"),
    ];
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    for (i, (text, field, fragment)) in cases.iter().enumerate() {
        let file = dir.path().join(format!("case{i}.yaml"));
        std::fs::write(&file, text).unwrap();
        let out = run_binary(&["apply", "-f", file.to_str().unwrap()], Some(&sim)).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "case {i} should fail as invalid input:\n{text}\n{stderr}"
        );
        assert!(
            stderr.contains(&format!("case{i}.yaml")),
            "case {i}: names the file: {stderr}"
        );
        assert!(
            stderr.contains(&format!("{field}:")) || field.is_empty(),
            "case {i}: names {field}: {stderr}"
        );
        assert!(
            stderr.contains(fragment),
            "case {i}: says {fragment:?}: {stderr}"
        );
    }
    assert!(
        sim.request_log().is_empty(),
        "bad manifests caused API calls: {:?}",
        sim.request_log()
    );
}

/// Every problem of a document is reported at once, metadata's with the spec's (a type error in
/// `metadata.labels` used to hide the others until it was fixed); a document that cannot be
/// read as JSON (a NaN) does not hide the problems of the documents after it; a file that
/// starts with a UTF-8 byte-order mark (as some Windows editors write) is read as the same
/// file without it, as kubectl reads it.
#[tokio::test]
async fn every_problem_is_reported_at_once() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let text = "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: k\n  labels: {a: 1}\n  annotations: {b: 2}\nspec: {secretName: s, bogus: 1}\n---\napiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata: {name: d}\nspec: {domain: d.example.com, note: .nan}\n---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: k2}\nspec: {secretName: s2, later: 1}\n";
    let out = run_manifest("plan", dir.path(), "many.yaml", text, &sim).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(2), "{shown}");
    for fragment in [
        "metadata.labels[a]:",
        "metadata.annotations[b]:",
        "\"bogus\"",
        "(document 2)",
        "\"later\"",
    ] {
        assert!(shown.contains(fragment), "{fragment}: {shown}");
    }

    let key = b"apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: k}\nspec: {secretName: s}\n";
    let with_mark = [&b"\xef\xbb\xbf"[..], &key[..]].concat();
    let file = dir.path().join("marked.yaml");
    std::fs::write(&file, with_mark).unwrap();
    let out = run_binary(&["plan", "-f", file.to_str().unwrap()], Some(&sim)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(shown.contains("Plan: 1 to create"), "{shown}");
    assert!(wrote_nothing(&sim));
}

/// Settings out of their range are usage errors (exit 2, naming the option), as the account's
/// request budget is refused by its schema: no request budget of 0 that would be raised to 1
/// without a word, no 0 s timeout. An output directory whose parent is missing is a usage error
/// for `crds --out-dir` as for `apply --secrets-dir`.
#[tokio::test]
async fn settings_out_of_range_are_usage_errors() {
    let sim = simulator().await;
    let examples = single_account_examples();
    let path = examples.path().to_str().unwrap();
    for (option, value) in [
        ("--api-concurrency", "0"),
        ("--api-concurrency", "1001"),
        ("--api-timeout", "0"),
        ("--api-rps", "0"),
    ] {
        let out = run_binary(&["plan", "-f", path, option, value], Some(&sim)).await;
        let shown = output_text(&out);
        assert_eq!(out.status.code(), Some(2), "{option} {value}: {shown}");
        assert!(shown.contains(option), "{option} {value}: {shown}");
    }
    assert!(sim.request_log().is_empty());
    let base = tempfile::tempdir().unwrap();
    let missing = base.path().join("gone/crds");
    let out = run_binary(&["crds", "--out-dir", missing.to_str().unwrap()], None).await;
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(!base.path().join("gone").exists(), "no parent created");
}

/// Writes `text` to a file in `dir` and runs `mailtarget-operator <command> -f FILE` on it.
async fn run_manifest(
    command: &str,
    dir: &Path,
    name: &str,
    text: &str,
    sim: &Simulator,
) -> Output {
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    run_binary(&[command, "-f", file.to_str().unwrap()], Some(sim)).await
}

fn output_text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A flood of invalid manifests is reported in bounded text: the first problems, then how many
/// more there are (JSON lists every one).
#[tokio::test]
async fn the_problems_printed_are_capped() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let bad: String = (0..150)
        .map(|i| format!("apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: k{i}\nspec: {{}}\n---\n"))
        .collect();
    let file = dir.path().join("bad.yaml");
    std::fs::write(&file, bad).unwrap();
    let file = file.to_str().unwrap();
    let out = run_binary(&["plan", "-f", file], Some(&sim)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(2), "{shown}");
    assert!(shown.contains("150 problems in the manifests"), "{shown}");
    assert!(shown.contains("and 50 more"), "{shown}");
    assert!(shown.lines().count() < 110, "{shown}");
    let out = run_binary(&["plan", "-o", "json", "-f", file], Some(&sim)).await;
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let problems = doc["error"]["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 150, "{}", output_text(&out));
}

/// `managementPolicy: ObserveOnly` and the `mailtarget.co/paused` annotation hold in the
/// cluster-less front end too: `plan` says so and `apply` writes nothing for either; both count
/// them as paused and observed, not as unchanged.
#[tokio::test]
async fn apply_honours_observe_only_and_paused() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let text = "apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata:\n  name: observed\nspec:\n  domain: observed.example.com\n  managementPolicy: ObserveOnly\n---\napiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata:\n  name: paused\n  annotations:\n    mailtarget.co/paused: \"true\"\nspec:\n  domain: paused.example.com\n";
    let out = run_manifest("plan", dir.path(), "domains.yaml", text, &sim).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(shown.contains("observe"), "{shown}");
    assert!(shown.contains("paused"), "{shown}");
    // Counted as what they are, not as unchanged.
    let summary = "0 to create, 0 to update, 0 unchanged, 1 paused, 1 observed.";
    assert!(shown.contains(&format!("Plan: {summary}")), "{shown}");
    let path = dir.path().join("domains.yaml");
    let args = ["plan", "-o", "json", "-f", path.to_str().unwrap()];
    let out = run_binary(&args, Some(&sim)).await;
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let counts = serde_json::json!({"create": 0, "update": 0, "unchanged": 0, "paused": 1, "observe": 1, "error": 0});
    assert_eq!(doc["summary"], counts, "{}", output_text(&out));

    let out = run_manifest("apply", dir.path(), "domains.yaml", text, &sim).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    let summary = "0 created, 0 updated, 0 unchanged, 1 paused, 1 observed.";
    assert!(shown.contains(&format!("Apply: {summary}")), "{shown}");
    assert!(wrote_nothing(&sim), "writes: {:?}", sim.request_log());
    assert!(sim.snapshot().sending_domains.is_empty());

    // An existing object is observed, not adopted: the plan says "matched".
    let request = mailtarget_operator::api::CreateSendingDomain {
        domain: "observed.example.com".into(),
        ..Default::default()
    };
    client(&sim).create_sending_domain(&request).await.unwrap();
    let out = run_manifest("plan", dir.path(), "domains.yaml", text, &sim).await;
    let shown = output_text(&out);
    assert!(shown.contains("observe (id 1, matched by name)"), "{shown}");
    assert!(!shown.contains("adopted"), "{shown}");

    // apply reports what it observed: the domain's DNS records and verification, as the
    // operator puts them in status; it exports the DKIM private key only under the adoption
    // annotation, and writes nothing to the service either way.
    let secrets = tempfile::tempdir().unwrap();
    let s = secrets.path().to_str().unwrap();
    let dkim = secrets.path().join("default/observed-dkim/dkimPrivateKey");
    let observed = |annotations: &str| {
        format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata:\n  name: observed\n{annotations}spec:\n  domain: observed.example.com\n  managementPolicy: ObserveOnly\n  dkimPrivateKeySecretName: observed-dkim\n"
        )
    };
    let path = dir.path().join("observed.yaml");
    let f = path.to_str().unwrap();
    std::fs::write(&path, observed("")).unwrap();
    sim.clear_request_log();
    let out = run_binary(&["apply", "-f", f, "--secrets-dir", s], Some(&sim)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("DNS records to publish (all verified: no)"),
        "{shown}"
    );
    assert!(
        shown.contains("Apply: 0 created, 0 updated, 0 unchanged, 1 observed."),
        "{shown}"
    );
    assert!(!dkim.exists(), "no policy, no key exported: {shown}");
    let args = ["apply", "-o", "json", "-f", f];
    let out = run_binary(&args, Some(&sim)).await;
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let entry = &doc["resources"][0];
    assert_eq!(entry["result"], "observe", "{doc}");
    assert_eq!(entry["verified"], false, "{doc}");
    assert_eq!(
        entry["dnsRecords"].as_array().map(Vec::len),
        Some(3),
        "{doc}"
    );
    let annotated = "  annotations:\n    mailtarget.co/adoption-policy: Adopt\n";
    std::fs::write(&path, observed(annotated)).unwrap();
    let out = run_binary(&["apply", "-f", f, "--secrets-dir", s], Some(&sim)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(dkim.exists(), "exported under the policy: {shown}");
    assert!(wrote_nothing(&sim), "writes: {:?}", sim.request_log());
}

/// Two resources claiming one API object (by external id written two ways, by name in
/// another case, or one by id and one by name) fail the run before any write, naming both.
#[tokio::test]
async fn two_claims_on_one_object_write_nothing() {
    let sim = simulator().await;
    let client = client(&sim);
    let shared = client
        .create_api_key(&CreateApiKey {
            name: Some("shared".into()),
            ..Default::default()
        })
        .await
        .unwrap()
        .id;
    let key = |name: &str, service_name: &str, external_id: Option<&str>| {
        let annotations = external_id
            .map(|id| format!("  annotations:\n    mailtarget.co/external-id: \"{id}\"\n"))
            .unwrap_or_default();
        format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: {name}\n{annotations}spec:\n  name: {service_name}\n  secretName: {name}\n"
        )
    };
    let sub = |name: &str, service_name: &str| {
        format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata:\n  name: {name}\nspec:\n  name: {service_name}\n"
        )
    };
    let cases = [
        (
            "external ids 3 and +3",
            1,
            format!(
                "{}---\n{}",
                key("a", "a", Some(&shared.to_string())),
                key("b", "b", Some(&format!("+{shared}")))
            ),
        ),
        (
            "one by id, one by name",
            1,
            format!(
                "{}---\n{}",
                key("a", "a", Some(&shared.to_string())),
                key("b", "shared", None)
            ),
        ),
        // Both claims are in the manifests: refused as invalid input, before any call.
        (
            "sub account names differing in case",
            2,
            format!("{}---\n{}", sub("upper", "Team"), sub("lower", "team")),
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (what, code, text) in &cases {
        sim.clear_request_log();
        let out = run_manifest("apply", dir.path(), "claims.yaml", text, &sim).await;
        let shown = output_text(&out);
        assert_eq!(out.status.code(), Some(*code), "{what}: {shown}");
        assert!(
            shown.contains("claimed by"),
            "{what}: names the other claimant: {shown}"
        );
        if *code == 1 {
            assert!(
                shown.contains("2 with errors."),
                "{what}: both claimants counted as errors: {shown}"
            );
        }
        let writes: Vec<_> = sim
            .request_log()
            .into_iter()
            .filter(|r| r.is_write())
            .collect();
        assert!(writes.is_empty(), "{what}: wrote {writes:?}");
    }
    assert_eq!(sim.snapshot().api_keys[0].name, "shared", "never renamed");
}

/// Names are compared as the service compares them: a sub account differing only in case is
/// the same sub account (adopted, not created twice), and a name with surrounding spaces, which
/// the service would trim, is refused before any call instead of creating a key per apply.
#[tokio::test]
async fn names_compare_as_the_service_compares_them() {
    let sim = simulator().await;
    let client = client(&sim);
    client
        .create_sub_account(&mailtarget_operator::api::CreateSubAccount {
            name: Some("team-b".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sub = "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata:\n  name: team-b\nspec:\n  name: Team-B\n";
    let out = run_manifest("apply", dir.path(), "sub.yaml", sub, &sim).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert_eq!(
        sim.snapshot().sub_accounts.len(),
        1,
        "adopted, not created again"
    );

    sim.clear_request_log();
    let spaced = "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: ci\nspec:\n  name: \"ci \"\n  secretName: ci\n";
    for _ in 0..2 {
        let out = run_manifest("apply", dir.path(), "key.yaml", spaced, &sim).await;
        let shown = output_text(&out);
        assert_ne!(out.status.code(), Some(0), "{shown}");
        assert!(shown.contains("spec.name"), "names the field: {shown}");
    }
    assert!(sim.snapshot().api_keys.is_empty(), "no key created");
    assert!(sim.request_log().is_empty(), "refused before any call");
}

/// Renaming a sub account into a name another sub account holds (unique at the service,
/// compared without case) is an error of the plan, before any write, naming the holder.
#[tokio::test]
async fn a_rename_into_a_taken_name_is_refused_at_plan_time() {
    let sim = simulator().await;
    let client = client(&sim);
    let create = |name: &str| mailtarget_operator::api::CreateSubAccount {
        name: Some(name.into()),
        ..Default::default()
    };
    let alpha = client.create_sub_account(&create("alpha")).await.unwrap();
    let beta = client.create_sub_account(&create("beta")).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata:\n  name: team-a\n  annotations: {{mailtarget.co/external-id: \"{}\"}}\nspec: {{name: Beta}}\n",
        alpha.id
    );
    sim.clear_request_log();
    for command in ["plan", "apply"] {
        let out = run_manifest(command, dir.path(), "sub.yaml", &text, &sim).await;
        let shown = output_text(&out);
        assert_eq!(out.status.code(), Some(1), "{command}: {shown}");
        assert!(
            shown.contains("taken") && shown.contains(&beta.id.to_string()),
            "{command}: {shown}"
        );
    }
    assert!(wrote_nothing(&sim), "{:?}", sim.request_log());
    // Paused or ObserveOnly, the resource writes nothing, so it is left alone (paused) or
    // observed, as in a cluster.
    for (annotation, policy, action) in [
        (", mailtarget.co/paused: \"true\"", "", ": paused"),
        ("", ", managementPolicy: ObserveOnly", ": observe"),
    ] {
        let text = text
            .replace("\"}\nspec", &format!("\"{annotation}}}\nspec"))
            .replace("spec: {name: Beta", &format!("spec: {{name: Beta{policy}"));
        let out = run_manifest("plan", dir.path(), "sub.yaml", &text, &sim).await;
        let shown = output_text(&out);
        assert_eq!(out.status.code(), Some(0), "{text}: {shown}");
        assert!(shown.contains(action), "{shown}");
    }
    // A domain is set at create only: an external id naming another domain's object is an
    // error (point it at the right id), never a rename, nor a name taken.
    let domain = |name: &str| mailtarget_operator::api::CreateSendingDomain {
        domain: name.into(),
        ..Default::default()
    };
    let x = client
        .create_sending_domain(&domain("x.example.com"))
        .await
        .unwrap();
    client
        .create_sending_domain(&domain("y.example.com"))
        .await
        .unwrap();
    let text = format!(
        "apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata:\n  name: d\n  annotations: {{mailtarget.co/external-id: \"{}\"}}\nspec: {{domain: y.example.com}}\n",
        x.id
    );
    let out = run_manifest("plan", dir.path(), "domain.yaml", &text, &sim).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("cannot be renamed"), "{shown}");
    assert!(!shown.contains("taken"), "{shown}");
}

/// `mailtarget.co/adoption-policy: Adopt` never creates in the cluster-less front end either:
/// with nothing to adopt the run fails before any write.
#[tokio::test]
async fn adopt_policy_never_creates() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let text = "apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata:\n  name: d\n  annotations:\n    mailtarget.co/adoption-policy: Adopt\nspec:\n  domain: adopt.example.com\n";
    let out = run_manifest("apply", dir.path(), "d.yaml", text, &sim).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("adoption-policy is Adopt"), "{shown}");
    assert!(!shown.contains("POST"), "no create is listed: {shown}");
    assert!(wrote_nothing(&sim));
}

/// The plan lists every API call `apply` may make, with its condition and the attributes it
/// sends (fields the interface takes at create only marked so); `apply -o json` reports what
/// became of each call, and a second apply has nothing left to call.
#[tokio::test]
async fn plan_lists_every_step_and_apply_reports_each() {
    let sim = simulator().await;
    let file = examples().join("sendingdomains.yaml");
    let out = run_binary(&["plan", "-f", file.to_str().unwrap()], Some(&sim)).await;
    let text = String::from_utf8_lossy(&out.stdout);
    for line in [
        "    + POST /domain/sending\n",
        "        spec.note = \"transactional mail\"   (set at create only",
        "    + PUT /domain/sending/{id}/share (when the domain is not shared yet)\n",
        "    + PUT /domain/sending/{id}/verify-txt (when its SPF, DKIM and tracking records are not all verified yet)\n",
    ] {
        assert!(text.contains(line), "plan shows {line:?}:\n{text}");
    }

    let out = run_binary(
        &["apply", "-f", file.to_str().unwrap(), "-o", "json"],
        Some(&sim),
    )
    .await;
    assert_eq!(out.status.code(), Some(0));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let news = doc["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "news-example-com")
        .unwrap();
    let steps: Vec<(String, String)> = news["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["action"].as_str().unwrap().to_string(),
                s["result"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let writes: Vec<String> = sim
        .request_log()
        .iter()
        .filter(|r| r.is_write() && r.path.starts_with("/domain/sending"))
        .map(|r| r.endpoint())
        .collect();
    // Each step reported done is one call the service saw.
    let done = |action: &str| steps.iter().any(|(a, r)| a == action && r == "done");
    assert!(done("create") && done("share"), "{steps:?}");
    assert_eq!(
        writes.iter().filter(|w| w.ends_with("/share")).count(),
        1,
        "{writes:?}"
    );

    let out = run_binary(
        &["apply", "-f", file.to_str().unwrap(), "-o", "json"],
        Some(&sim),
    )
    .await;
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for r in doc["resources"].as_array().unwrap() {
        assert!(r.get("steps").is_none(), "nothing left to call: {r}");
    }
}

/// Each entry of `plan`, `apply` and `destroy` in `-o json` names the object at the service, as
/// the service names it: a SubAccount's or ApiKey's `spec.name` (else `metadata.name`), a
/// SendingDomain's `spec.domain`, so a script need not read the manifests again.
#[tokio::test]
async fn json_entries_name_the_object_at_the_service() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("all.yaml");
    std::fs::write(
        &file,
        "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: team}\nspec: {name: Team One}\n---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: mail-key}\nspec: {secretName: mail-key}\n---\napiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata: {name: news}\nspec: {domain: news.example.com}\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let expected = [
        ("team", "Team One"),
        ("mail-key", "mail-key"),
        ("news", "news.example.com"),
    ];
    for args in [
        &["plan", "-f", file, "-o", "json"][..],
        &["apply", "-f", file, "-o", "json"],
        &["destroy", "-f", file, "-o", "json", "--auto-approve"],
    ] {
        let out = run_binary(args, Some(&sim)).await;
        assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let resources = doc["resources"].as_array().unwrap();
        for (name, at_service) in expected {
            let entry = resources.iter().find(|r| r["name"] == name).unwrap();
            assert_eq!(entry["serviceName"], at_service, "{}: {entry}", args[0]);
        }
    }
}

/// Lost answers while applying: a create whose answer is lost is looked up by its natural key
/// and adopted, never sent twice; a few runs converge to exactly the declared objects.
#[tokio::test]
async fn lost_answers_never_duplicate_in_the_cli() {
    let sim = simulator().await;
    let client = client(&sim);
    sim.faults()
        .set(mailtarget_operator::simulator::FaultConfig {
            drop_response_rate: 0.4,
            // A seed under which POST answers are lost (asserted at the end): which requests
            // lose their answer follows the order of the calls.
            seed: 12,
            ..Default::default()
        });
    let set = manifest::load(&[single_account_examples().path().to_path_buf()]).unwrap();
    let mut converged = false;
    for _ in 0..20 {
        let Ok(planned) = plan::build(&client, &set.resources, &set.namespace_selectors).await
        else {
            continue;
        };
        if apply::run(&client, &planned, None).await.summary().error == 0 {
            converged = true;
            break;
        }
    }
    sim.faults().clear();
    assert!(converged, "apply converged within 20 runs");
    let state = sim.snapshot();
    assert_eq!(
        (
            state.sub_accounts.len(),
            state.api_keys.len(),
            state.sending_domains.len()
        ),
        (1, 3, 2),
        "exactly the declared objects (and the sub account's credential)"
    );
    let lost: usize = sim
        .request_log()
        .iter()
        .filter(|r| r.method == "POST" && r.status >= 500)
        .count();
    assert!(lost > 0, "some answers were lost");
}

/// Runs the binary with `stdin` as its standard input (bounded wait).
async fn run_binary_with_stdin(args: &[&str], sim: &Simulator, stdin: &str) -> Output {
    use tokio::io::AsyncWriteExt;
    let mut cmd = command(env!("CARGO_BIN_EXE_mailtarget-operator"), args, Some(sim));
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).await.unwrap();
    drop(input);
    tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("binary finished within 60 s")
        .unwrap()
}

/// A domain whose records are not verified yet keeps its conditional `verify-txt` call in the
/// plan, but `plan --detailed-exitcode` does not count it as a change: it asks the service to
/// check the DNS and changes nothing of the object (exit 0), so drift detection stays quiet
/// while the records wait to be published.
#[tokio::test]
async fn a_pending_verification_is_no_change() {
    let mut config = SimulatorConfig::new(KEY);
    config.verify_after_calls = 100;
    let sim = Simulator::start(config).await.expect("simulator starts");
    let text = "apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata: {name: mail}\nspec: {domain: mail.example.com}\n";
    let out = run_binary_with_stdin(&["apply", "-f", "-"], &sim, text).await;
    let shown = output_text(&out);
    assert!(shown.contains("all verified: no"), "{shown}");
    let args = ["plan", "-f", "-", "--detailed-exitcode"];
    let out = run_binary_with_stdin(&args, &sim, text).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("unchanged") && shown.contains("verify-txt"),
        "{shown}"
    );
}

/// `-f -` reads manifests from standard input; `plan --detailed-exitcode` exits 2 while changes
/// are pending and 0 once applied; invalid input exits 2.
#[tokio::test]
async fn stdin_and_exit_codes() {
    let sim = simulator().await;
    let text = std::fs::read_to_string(examples().join("sendingdomains.yaml")).unwrap();
    let out = run_binary_with_stdin(&["plan", "-f", "-", "--detailed-exitcode"], &sim, &text).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(2), "changes pending: {shown}");
    assert!(shown.contains("[<stdin> (document 1)]"), "{shown}");
    let out = run_binary_with_stdin(&["apply", "-f", "-"], &sim, &text).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let out = run_binary_with_stdin(&["plan", "-f", "-", "--detailed-exitcode"], &sim, &text).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "no changes: {}",
        output_text(&out)
    );
    let out = run_binary_with_stdin(&["plan", "-f", "-"], &sim, "kind: [unclosed\n").await;
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    // With --detailed-exitcode, 2 means changes pending: invalid input exits 1.
    let out = run_binary_with_stdin(
        &["plan", "-f", "-", "--detailed-exitcode"],
        &sim,
        "kind: [unclosed\n",
    )
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    // So does a usage error, which clap alone answers with 2.
    let args = ["plan", "-f", "-", "--detailed-exitcode", "--outptu", "json"];
    let out = run_binary_with_stdin(&args, &sim, &text).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(
        shown.contains("--outptu"),
        "the usage error is shown: {shown}"
    );
    let out = run_binary_with_stdin(&["plan", "-f", "-", "--outptu"], &sim, &text).await;
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    // No document at all is a wrong path, not a success (kubectl: "no objects passed").
    let out = run_binary_with_stdin(&["plan", "-f", "-"], &sim, "# nothing\n").await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(2), "{shown}");
    assert!(
        shown.contains("no manifest documents found in standard input"),
        "names where it looked: {shown}"
    );
    assert!(
        !shown.contains("directory"),
        "only a directory's hint speaks of directories: {shown}"
    );
    // Standard input holding the manifests cannot also answer the confirmation: said so, and
    // nothing is deleted.
    sim.clear_request_log();
    let out = run_binary_with_stdin(&["destroy", "-f", "-"], &sim, &text).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(
        shown.contains("standard input holds the manifests") && shown.contains("--auto-approve"),
        "{shown}"
    );
    assert!(wrote_nothing(&sim));
    // A file named twice (itself, and inside its directory) is read once: no duplicate.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("domains.yaml");
    std::fs::write(&file, &text).unwrap();
    let (file, dir) = (file.to_str().unwrap(), dir.path().to_str().unwrap());
    let out = run_binary(&["plan", "-f", file, "-f", file, "-f", dir], Some(&sim)).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
}

/// A reference to a SubAccount of another namespace is planned as a cluster would decide it with
/// the SubAccount's `spec.allowedNamespaces`: refused when unset or when its requirements on the
/// `kubernetes.io/metadata.name` label exclude the namespace (nothing planned or destroyed, exit
/// 1), clean when it selects the namespace by that label, and with a note when it has
/// requirements on labels the CLI cannot know (negative ones included).
#[tokio::test]
async fn references_across_namespaces_follow_allowed_namespaces() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let manifests = |allowed: &str| {
        format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata:\n  name: sa\n  namespace: platform\nspec:\n{allowed}---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: tenant-key\n  namespace: team-z\nspec:\n  secretName: s\n  subAccountRef:\n    name: sa\n    namespace: platform\n"
        )
    };
    let note = "only if the labels of namespace \"team-z\" match";
    let out = run_manifest(
        "apply",
        dir.path(),
        "unset.yaml",
        &manifests("  name: sa\n"),
        &sim,
    )
    .await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("ReferenceNotAllowed"), "{shown}");
    assert!(shown.contains("Nothing was applied"), "{shown}");
    assert!(wrote_nothing(&sim), "{shown}");
    let excluded = "  allowedNamespaces: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [team-z]}]}\n";
    for (command, allowed) in [("destroy", "  name: sa\n"), ("plan", excluded)] {
        let text = manifests(allowed);
        let out = run_manifest(command, dir.path(), "refused.yaml", &text, &sim).await;
        let shown = output_text(&out);
        assert_eq!(out.status.code(), Some(1), "{command}: {shown}");
        assert!(shown.contains("ReferenceNotAllowed"), "{command}: {shown}");
    }

    let by_name = "  allowedNamespaces: {matchLabels: {kubernetes.io/metadata.name: team-z}}\n";
    let out = run_manifest("plan", dir.path(), "name.yaml", &manifests(by_name), &sim).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(!shown.contains(note), "{shown}");

    let unknown = [
        "  allowedNamespaces: {matchLabels: {tenant: \"yes\"}}\n",
        "  allowedNamespaces: {matchExpressions: [{key: restricted, operator: DoesNotExist}]}\n",
    ];
    for by_label in unknown {
        let out = run_manifest("plan", dir.path(), "label.yaml", &manifests(by_label), &sim).await;
        let shown = output_text(&out);
        assert_eq!(out.status.code(), Some(0), "{by_label}: {shown}");
        assert!(shown.contains(note), "{by_label}: {shown}");
    }
    assert!(wrote_nothing(&sim));

    // A resource refused so claims nothing: a key of the SubAccount's own namespace with the
    // same name is planned, and the refusal is reported on the refused resource, not as a
    // conflict blamed on the legitimate one.
    let own = "---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: own-key\n  namespace: platform\nspec:\n  name: tenant-key\n  secretName: own\n  subAccountRef:\n    name: sa\n";
    let text = manifests("  name: sa\n") + own;
    let out = run_manifest("plan", dir.path(), "claims.yaml", &text, &sim).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("ReferenceNotAllowed"), "{shown}");
    assert!(!shown.contains("also claimed by"), "{shown}");
    assert!(shown.contains("ApiKey platform/own-key: create"), "{shown}");
}

/// A ClusterAccount among the manifests decides, with its `spec.namespaceSelector`, which
/// namespaces' resources may use it, as in a cluster: one whose requirements on the name label
/// exclude the namespace refuses the resource (`AccountNotAllowed`) in `plan`, `apply` and
/// `destroy`, with no call to the account at all (not even its lists: an account without
/// `apiUrl` is the public service) and no call listed; requirements on other labels give a
/// note.
#[tokio::test]
async fn accounts_follow_their_namespace_selector() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("billing.key");
    std::fs::write(&key_file, KEY).unwrap();
    let account = format!("billing=@{}", key_file.display());
    let manifests = |selector: &str| {
        format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: ClusterAccount\nmetadata: {{name: billing}}\nspec:\n  credentials: {{secretRef: {{name: billing-credentials}}}}\n  apiUrl: {}\n  transmissionUrl: {}\n{selector}---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {{name: invoices, namespace: team-z}}\nspec:\n  secretName: invoices-key\n  accountRef: {{name: billing}}\n",
            sim.base_url(),
            sim.transmission_url()
        )
    };
    let run = |command: &'static str, text: String| {
        let file = dir.path().join("accounts.yaml");
        std::fs::write(&file, text).unwrap();
        let account = account.clone();
        let sim = &sim;
        async move {
            let file = file.to_str().unwrap().to_string();
            run_binary(&[command, "-f", &file, "--account", &account], Some(sim)).await
        }
    };
    let excluded = "  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: team-a}}\n";
    for command in ["plan", "apply", "destroy"] {
        let out = run(command, manifests(excluded)).await;
        let shown = output_text(&out);
        assert_eq!(out.status.code(), Some(1), "{command}: {shown}");
        assert!(shown.contains("AccountNotAllowed"), "{command}: {shown}");
        assert!(!shown.contains("POST"), "{command}: {shown}");
    }
    assert_eq!(sim.request_log(), vec![], "nothing called");
    // A paused resource is left alone before any account is used, as in a cluster.
    let paused = manifests(excluded).replace(
        "namespace: team-z}",
        "namespace: team-z, annotations: {mailtarget.co/paused: \"true\"}}",
    );
    let out = run("plan", paused).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("ApiKey team-z/invoices (account billing): paused"),
        "{shown}"
    );

    let note = "only if the labels of namespace \"team-z\" match its spec.namespaceSelector";
    let by_label = "  namespaceSelector: {matchLabels: {tenant: \"yes\"}}\n";
    for (selector, noted) in [("", false), (by_label, true)] {
        let out = run("plan", manifests(selector)).await;
        let shown = output_text(&out);
        assert_eq!(out.status.code(), Some(0), "{selector}: {shown}");
        assert_eq!(shown.contains(note), noted, "{selector}: {shown}");
    }
}

/// A ClusterAccount that only the platform namespace may use still serves a team's keys placed
/// inside a sub account by a SubAccount of that namespace (the platform's use of the account,
/// with the sub account's credential), as a cluster decides it; the team's own key outside any
/// sub account, and another team's key through a SubAccount that does not let it in, are
/// `AccountNotAllowed` for their own namespace, and nothing is called.
#[tokio::test]
async fn a_platform_only_account_serves_the_tenants_inside() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("billing.key");
    std::fs::write(&key_file, KEY).unwrap();
    let account = format!("billing=@{}", key_file.display());
    let inside = format!(
        "apiVersion: mailtarget.co/v1alpha1\nkind: ClusterAccount\nmetadata: {{name: billing}}\nspec:\n  credentials: {{secretRef: {{name: billing-credentials}}}}\n  apiUrl: {url}\n  transmissionUrl: {url}\n  namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: platform}}}}\n---\napiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {{name: tenant-a, namespace: platform}}\nspec:\n  accountRef: {{name: billing}}\n  allowedNamespaces: {{matchLabels: {{kubernetes.io/metadata.name: team-a}}}}\n---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {{name: sender, namespace: team-a}}\nspec:\n  accountRef: {{name: billing}}\n  subAccountRef: {{name: tenant-a, namespace: platform}}\n  secretName: sender-key\n",
        url = sim.base_url()
    );
    let file = dir.path().join("tenants.yaml");
    let f = file.to_str().unwrap();
    std::fs::write(&file, &inside).unwrap();
    let out = run_binary(&["apply", "-f", f, "--account", &account], Some(&sim)).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let state = sim.snapshot();
    let tenant = (state.sub_accounts.iter()).find(|s| s.name == "tenant-a");
    let sender = (state.api_keys.iter()).find(|k| k.name == "sender");
    assert_eq!(sender.unwrap().sub_account_id, tenant.unwrap().id);

    let own = "---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: own, namespace: team-a}\nspec:\n  accountRef: {name: billing}\n  secretName: own-key\n";
    // Through a SubAccount that does not let it in, team b's key is its own namespace's use of
    // the account: refused alike, naming its namespace only.
    let squat = "---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: squat, namespace: team-b}\nspec:\n  accountRef: {name: billing}\n  subAccountRef: {name: tenant-a, namespace: platform}\n  secretName: squat-key\n";
    std::fs::write(&file, inside + own + squat).unwrap();
    sim.clear_request_log();
    let out = run_binary(
        &["apply", "-f", f, "--account", &account, "-o", "json"],
        Some(&sim),
    )
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let entry = |name: &str| {
        (doc["resources"].as_array().unwrap().iter())
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap()
    };
    assert!(
        entry("own")["error"]
            .to_string()
            .contains("AccountNotAllowed"),
        "{doc}"
    );
    let squatted = entry("squat")["error"].to_string();
    assert!(squatted.contains("AccountNotAllowed"), "{doc}");
    assert!(
        squatted.contains("namespace \\\"team-b\\\"") && !squatted.contains("platform"),
        "{doc}"
    );
    assert!(entry("sender")["error"].is_null(), "{doc}");
    assert!(
        sim.request_log().iter().all(|r| !r.is_write()),
        "nothing written"
    );
}

/// An account defined twice among the manifests (in another team's folder, say) is invalid
/// input, as a managed object defined twice is: the second definition points to the first and
/// nothing is called. Before, the first one read won, so a copy with another `apiUrl` received
/// the account's key, and a copy without the platform's `namespaceSelector` lifted it.
#[tokio::test]
async fn an_account_defined_twice_is_refused() {
    let sim = simulator().await;
    // A ClusterAccount, and an Account (namespaced: defined twice in one namespace).
    for (kind, at, reference, name) in [
        (
            "ClusterAccount",
            "{name: billing}",
            "accountRef: {name: billing}",
            "billing",
        ),
        (
            "Account",
            "{name: billing, namespace: team-z}",
            "accountRef: {kind: Account, name: billing}",
            "team-z/billing",
        ),
    ] {
        sim.clear_request_log();
        let dir = tempfile::tempdir().unwrap();
        let key_file = dir.path().join("billing.key");
        std::fs::write(&key_file, KEY).unwrap();
        let account = |url: &str| {
            format!(
                "apiVersion: mailtarget.co/v1alpha1\nkind: {kind}\nmetadata: {at}\nspec:\n  credentials: {{secretRef: {{name: billing-credentials}}}}\n  apiUrl: {url}\n  transmissionUrl: {url}\n"
            )
        };
        let teams = dir.path().join("team-a");
        std::fs::create_dir(&teams).unwrap();
        std::fs::write(teams.join("a.yaml"), account("http://127.0.0.1:9")).unwrap();
        let platform = dir.path().join("platform");
        std::fs::create_dir(&platform).unwrap();
        let key = format!(
            "---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {{name: invoices, namespace: team-z}}\nspec:\n  secretName: invoices-key\n  {reference}\n"
        );
        std::fs::write(platform.join("b.yaml"), account(&sim.base_url()) + &key).unwrap();
        let account_arg = format!("{name}=@{}", key_file.display());
        let out = run_binary(
            &[
                "plan",
                "-f",
                teams.to_str().unwrap(),
                "-f",
                platform.to_str().unwrap(),
                "--account",
                &account_arg,
            ],
            Some(&sim),
        )
        .await;
        let shown = output_text(&out);
        assert_eq!(out.status.code(), Some(2), "{kind}: {shown}");
        assert!(shown.contains("also defined at"), "{kind}: {shown}");
        assert!(
            shown.contains("a.yaml"),
            "{kind}: names the first definition: {shown}"
        );
        assert!(sim.request_log().is_empty(), "{kind}: nothing called");
    }
}

/// Two accounts reaching one service with one key are one company: resources through each
/// could claim one object (a key of one name, a sub account) without either seeing the other's
/// claim. `plan` and `apply` refuse such a run before any call (exit 2), naming both accounts.
#[tokio::test]
async fn two_accounts_with_one_key_are_refused() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("dup.key");
    std::fs::write(&key_file, format!("{KEY}\n")).unwrap();
    let url = sim.base_url();
    let text = format!(
        "apiVersion: mailtarget.co/v1alpha1\nkind: Account\nmetadata: {{name: dup, namespace: team-b}}\nspec:\n  credentials: {{secretRef: {{name: dup-key}}}}\n  apiUrl: {url}\n  transmissionUrl: {url}\n---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {{name: one, namespace: team-a}}\nspec: {{name: shared, secretName: one}}\n---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {{name: two, namespace: team-b}}\nspec: {{name: shared, secretName: two, accountRef: {{kind: Account, name: dup}}}}\n"
    );
    let file = dir.path().join("dup.yaml");
    std::fs::write(&file, text).unwrap();
    let account = format!("team-b/dup=@{}", key_file.display());
    for command in ["plan", "apply", "destroy"] {
        sim.clear_request_log();
        let args = [command, "-f", file.to_str().unwrap(), "--account", &account];
        let args = [
            &args[..],
            &["--auto-approve"][..(command == "destroy") as usize],
        ]
        .concat();
        let out = run_binary(&args, Some(&sim)).await;
        let shown = output_text(&out);
        assert_eq!(out.status.code(), Some(2), "{command}: {shown}");
        assert!(
            shown.contains("\"default\"") && shown.contains("\"team-b/dup\""),
            "{command}: {shown}"
        );
        assert!(shown.contains("with the same key"), "{command}: {shown}");
        assert!(sim.request_log().is_empty(), "{command}: nothing called");
    }
    // Another key of the same service is another account as far as the CLI can tell.
    std::fs::write(&key_file, "another-key").unwrap();
    let args = ["plan", "-f", file.to_str().unwrap(), "--account", &account];
    let out = run_binary(&args, Some(&sim)).await;
    let shown = output_text(&out);
    assert!(!shown.contains("with the same key"), "{shown}");
    assert_ne!(out.status.code(), Some(2), "{shown}");
}

/// A SubAccount that other namespaces place objects inside (`spec.allowedNamespaces`) and that
/// the CLI matches by name only gets a note to pin it by external id: whoever holds a key of a
/// sub account may rename it at the service, and a sub account renamed to this name would be
/// taken for it; the note asks to check the id before pinning it. Once pinned, or without
/// `allowedNamespaces`, there is no note.
#[tokio::test]
async fn a_sub_account_hosting_other_namespaces_is_to_be_pinned() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let sub = |annotations: &str, allowed: &str| {
        format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata:\n  name: tenant\n  namespace: platform\n{annotations}spec:\n  name: tenant\n{allowed}"
        )
    };
    let allowed = "  allowedNamespaces: {matchLabels: {kubernetes.io/metadata.name: team-a}}\n";
    let out = run_manifest("apply", dir.path(), "s.yaml", &sub("", allowed), &sim).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let id = sim.snapshot().sub_accounts[0].id;
    let pin = format!("mailtarget.co/external-id: \"{id}\"");

    let out = run_manifest("plan", dir.path(), "s.yaml", &sub("", allowed), &sim).await;
    let shown = output_text(&out);
    assert!(shown.contains(&pin) && shown.contains("rename"), "{shown}");
    // A name taken before the first apply may be another tenant's: pinning it without a look
    // would keep that one.
    let check = format!("check that sub account {id} is the one you created");
    assert!(shown.contains(&check), "{shown}");
    let pinned = format!("  annotations:\n    {pin}\n");
    let out = run_manifest("plan", dir.path(), "s.yaml", &sub(&pinned, allowed), &sim).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(!shown.contains("rename"), "pinned: {shown}");
    let out = run_manifest("plan", dir.path(), "s.yaml", &sub("", ""), &sim).await;
    let shown = output_text(&out);
    assert!(
        !shown.contains("rename"),
        "hosts no other namespace: {shown}"
    );
}

/// A reader of the output that goes away (`… | head -1`) ends the output quietly, as Unix
/// filters end: no panic, and the exit code is the command's own. The output of each command
/// here is larger than a pipe holds, so a write fails after the reader is gone.
#[tokio::test]
async fn a_reader_gone_away_ends_the_output_quietly() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("many.yaml");
    let text: String = (0..1500)
        .map(|i| format!("---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {{name: key-{i}}}\nspec: {{secretName: key-{i}}}\n"))
        .collect();
    std::fs::write(&file, text).unwrap();
    let path = file.to_str().unwrap();
    for args in [
        vec!["plan", "-f", path],
        vec!["plan", "-f", path, "-o", "json"],
        vec!["crds"],
    ] {
        let mut cmd = command(env!("CARGO_BIN_EXE_mailtarget-operator"), &args, Some(&sim));
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        drop(child.stdout.take());
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("the command ends")
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
    }
    // The reader of standard error gone (`2>&1 | head -1`), with logs to write there: the
    // command goes on to its end and its exit code, all of its output on standard output.
    let args = ["plan", "-f", path, "--log-level", "debug"];
    let mut cmd = command(env!("CARGO_BIN_EXE_mailtarget-operator"), &args, Some(&sim));
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    drop(child.stderr.take());
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the command ends")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", stdout.len());
    // Another write failure is an error: a full disk behind the redirection (`> /dev/full`).
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let mut cmd = command(env!("CARGO_BIN_EXE_mailtarget-operator"), &["crds"], None);
    cmd.stdout(full).stderr(std::process::Stdio::piped());
    // Spawned: `output()` would capture standard output instead.
    let child = cmd.spawn().unwrap();
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the command ends")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stdout.contains("Plan: 1500 to create"),
        "{}",
        &stdout[stdout.len().saturating_sub(300)..]
    );
}

/// Logs written to a file or a pipe (a CI job's log, `kubectl logs` of the operator's pod) are
/// plain text: no terminal colour codes, which would show there as `ESC[2m` noise. Fails if the
/// log writer colours its output whatever the standard error is.
#[tokio::test]
async fn logs_to_a_file_carry_no_colour_codes() {
    let sim = simulator().await;
    let examples = single_account_examples();
    let path = examples.path().to_str().unwrap();
    let out = run_binary(&["--log-level", "debug", "plan", "-f", path], Some(&sim)).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("DEBUG"), "debug logs are written: {stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr}");
}

/// Through a sub account's key, a key's name is looked up where that key's objects are (its sub
/// account), as a company key's among the company's: an existing key of the name is adopted
/// (`unchanged`), never created a second time, and `destroy` deletes that key.
#[tokio::test]
async fn names_through_a_sub_account_key_are_found_in_the_cli() {
    let sim = simulator().await;
    let team = client(&sim)
        .create_sub_account(&mailtarget_operator::api::CreateSubAccount {
            name: Some("team".into()),
            create_api_key: Some(true),
            api_key_name: Some("team-operator".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let key = team.api_keys[0].key.clone();
    let team_client = client(&sim).calling_as(key.clone()).unwrap();
    let app = CreateApiKey {
        name: Some("app".into()),
        ..Default::default()
    };
    team_client.create_api_key(&app).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("app.yaml");
    let text = "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: app}\nspec: {secretName: app-key}\n";
    std::fs::write(&file, text).unwrap();
    sim.clear_request_log();
    let through_team = |run: &'static str| {
        let args = [run, "-f", file.to_str().unwrap(), "--auto-approve"];
        let args = if run == "destroy" {
            &args[..]
        } else {
            &args[..3]
        };
        let mut cmd = command(env!("CARGO_BIN_EXE_mailtarget-operator"), args, Some(&sim));
        use secrecy::ExposeSecret;
        cmd.env("MAILTARGET_API_KEY", key.expose_secret());
        output(cmd)
    };
    for run in ["plan", "apply"] {
        let out = through_team(run).await;
        let shown = output_text(&out);
        assert_eq!(out.status.code(), Some(0), "{run}: {shown}");
        assert!(
            shown.contains("ApiKey default/app: unchanged"),
            "{run}: {shown}"
        );
    }
    assert!(wrote_nothing(&sim), "{:?}", sim.request_log());
    let out = through_team("destroy").await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(shown.contains("ApiKey default/app: deleted"), "{shown}");
    assert!(!sim.snapshot().api_keys.iter().any(|k| k.name == "app"));

    // A SubAccount needs a company key: through a sub account's key it is refused before any
    // write (AccountScopeInsufficient), as the operator refuses it; before, the create was
    // sent and refused by the service.
    let sub =
        "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: other}\nspec: {}\n";
    std::fs::write(&file, sub).unwrap();
    sim.clear_request_log();
    for run in ["plan", "apply", "destroy"] {
        let out = through_team(run).await;
        let shown = output_text(&out);
        assert_eq!(out.status.code(), Some(1), "{run}: {shown}");
        assert!(shown.contains("AccountScopeInsufficient"), "{run}: {shown}");
        assert!(!shown.contains("POST"), "{run}: {shown}");
    }
    assert!(wrote_nothing(&sim), "{:?}", sim.request_log());
}

/// A resource its account refuses (`AccountNotAllowed`) holds no claim, as in a cluster: it
/// never keeps the resource of a namespace the account allows from the object both name, by
/// name (checked when the manifests are read) or by id (checked on the plan).
#[tokio::test]
async fn a_resource_its_account_refuses_claims_nothing() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("billing.key");
    std::fs::write(&key_file, second_company_key(&sim).await).unwrap();
    let account = format!("billing=@{}", key_file.display());
    let file = dir.path().join("accounts.yaml");
    let path = file.to_str().unwrap();
    let key = |namespace: &str, name: &str, annotations: &str| {
        format!(
            "---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {{name: {name}, namespace: {namespace}{annotations}}}\nspec:\n  name: {name}\n  secretName: {name}-key\n  accountRef: {{name: billing}}\n"
        )
    };
    let account_yaml = format!(
        "apiVersion: mailtarget.co/v1alpha1\nkind: ClusterAccount\nmetadata: {{name: billing}}\nspec:\n  credentials: {{secretRef: {{name: billing-credentials}}}}\n  apiUrl: {}\n  transmissionUrl: {}\n  namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: team-a}}}}\n",
        sim.base_url(),
        sim.transmission_url()
    );
    let id = client(&sim)
        .create_api_key(&mailtarget_operator::api::CreateApiKey {
            name: Some("existing".into()),
            ..Default::default()
        })
        .await
        .unwrap()
        .id;
    let by_id = format!(", annotations: {{mailtarget.co/external-id: \"{id}\"}}");
    for (refused, allowed, action) in [
        (key("team-z", "invoices", ""), "invoices", "create"),
        (key("team-z", "grab", &by_id), "existing", "unchanged"),
    ] {
        let manifests = format!("{account_yaml}{refused}{}", key("team-a", allowed, ""));
        std::fs::write(&file, manifests).unwrap();
        let out = run_binary(&["plan", "-f", path, "--account", &account], Some(&sim)).await;
        let shown = output_text(&out);
        assert_eq!(out.status.code(), Some(1), "{shown}");
        assert!(shown.contains("AccountNotAllowed"), "{shown}");
        assert!(!shown.contains("claimed"), "{shown}");
        let planned = format!("ApiKey team-a/{allowed} (account billing): {action}");
        assert!(shown.contains(&planned), "{shown}");
    }
    // Nor its Secret: another resource of its namespace, through an account that allows it, may
    // write the Secret it names (it writes none).
    let through_default = "---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: other, namespace: team-z}\nspec:\n  secretName: invoices-key\n";
    let manifests = format!(
        "{account_yaml}{}{through_default}",
        key("team-z", "invoices", "")
    );
    std::fs::write(&file, manifests).unwrap();
    let out = run_binary(&["plan", "-f", path, "--account", &account], Some(&sim)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("AccountNotAllowed"), "{shown}");
    assert!(shown.contains("ApiKey team-z/other: create"), "{shown}");
}

/// `destroy` carries out each resource's deletion policy: `Delete` deletes the key or domain,
/// `Deactivate` deactivates the sub account, `Orphan` keeps the object; a second run finds the
/// deleted objects absent and the sub account already deactivated, writes nothing and asks
/// nothing. Before anything exists, objects inside a sub account that does not exist are absent.
#[tokio::test]
async fn destroy_carries_out_each_deletion_policy() {
    let sim = simulator().await;
    let examples_dir = single_account_examples();
    let path = examples_dir.path().to_path_buf();
    let path = path.to_str().unwrap();
    let out = run_binary(&["destroy", "-f", path], Some(&sim)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "nothing to destroy: {shown}");
    assert!(
        shown.contains("matches no sub account: nothing is inside it"),
        "{shown}"
    );
    assert!(
        shown.contains("Destroy: 0 deleted or deactivated, 5 kept or absent."),
        "{shown}"
    );
    assert!(wrote_nothing(&sim));
    assert_eq!(
        run_binary(&["apply", "-f", path], Some(&sim))
            .await
            .status
            .code(),
        Some(0)
    );
    sim.clear_request_log();
    let out = run_binary(&["destroy", "-f", path], Some(&sim)).await;
    assert_eq!(out.status.code(), Some(1), "no terminal, no --auto-approve");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("Nothing was destroyed."), "{said}");
    assert!(
        said.contains("Destroy plan: 3 to delete or deactivate, 2 to keep or absent."),
        "{said}"
    );
    assert!(wrote_nothing(&sim), "nothing destroyed");
    let out = run_binary(&["destroy", "-f", path, "--auto-approve"], Some(&sim)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .ends_with("Destroy: 3 deleted or deactivated, 2 kept or absent.\n"),
        "{shown}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("note: skipped mailtarget.co/v1alpha1/Account \"second-company\""),
        "the example Account is skipped with a note: {shown}"
    );
    let state = sim.snapshot();
    let keys: Vec<&str> = state.api_keys.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(
        keys,
        ["mailtarget-operator", "team-a-sender"],
        "ci-sender deleted; the Orphan key and the sub account's credential kept"
    );
    let domains: Vec<&str> = state
        .sending_domains
        .iter()
        .map(|d| d.domain.as_str())
        .collect();
    assert_eq!(domains, ["news.example.com"], "the Orphan domain kept");
    assert_eq!(state.sub_accounts[0].status, "inactive");
    let deletes = sim
        .request_log()
        .iter()
        .filter(|r| r.method == "DELETE")
        .count();
    assert_eq!(deletes, 2);

    sim.clear_request_log();
    let out = run_binary(&["destroy", "-f", path], Some(&sim)).await;
    let shown = output_text(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "nothing left to confirm: {shown}"
    );
    assert!(
        shown.contains("ApiKey default/ci-sender: absent"),
        "{shown}"
    );
    assert!(
        shown.contains("SubAccount default/team-a: unchanged"),
        "{shown}"
    );
    assert!(
        shown.contains("already deactivated (status \"inactive\")"),
        "{shown}"
    );
    let writes: Vec<_> = (sim.request_log().into_iter())
        .filter(|r| r.is_write())
        .collect();
    assert!(writes.is_empty(), "wrote {writes:?}");

    // A deactivated sub account whose spec leaves `status` unmanaged is not reactivated by
    // the next apply, and the plan says why (the examples' SubAccount manages it).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sub.yaml");
    std::fs::write(&file, "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: team-b}\nspec: {deletionPolicy: Deactivate}\n").unwrap();
    let file = file.to_str().unwrap();
    for args in [
        &["apply", "-f", file][..],
        &["destroy", "-f", file, "--auto-approve"],
    ] {
        assert_eq!(run_binary(args, Some(&sim)).await.status.code(), Some(0));
    }
    let out = run_binary(&["plan", "-f", file], Some(&sim)).await;
    let shown = output_text(&out);
    assert!(
        shown.contains("SubAccount default/team-b: unchanged"),
        "{shown}"
    );
    assert!(
        shown.contains(
            "has status \"inactive\", which its deletion policy sets; spec.status is unset"
        ),
        "{shown}"
    );
}

/// An object that the external-id annotation names and that is already gone is `absent` to
/// `destroy`, as one matched by name is, and so is a domain whose name exists only outside the
/// resource's scope (inside a sub account): the resource owns nothing, so nothing is deleted
/// and the other resources are still destroyed. With `-o json` and no `--auto-approve`, the plan
/// it will not carry out is printed as JSON on standard output, with an `error` saying it was
/// not carried out (else it reads as a plan carried out).
#[tokio::test]
async fn destroy_finds_an_object_named_by_external_id_already_gone() {
    let sim = simulator().await;
    let client = client(&sim);
    let key = |name: &str| CreateApiKey {
        name: Some(name.into()),
        ..Default::default()
    };
    let gone = client.create_api_key(&key("gone")).await.unwrap();
    assert!(client.delete_api_key(gone.id).await.unwrap());
    client.create_api_key(&key("other")).await.unwrap();
    let team = client
        .create_sub_account(&mailtarget_operator::api::CreateSubAccount {
            name: Some("team".into()),
            create_api_key: Some(true),
            api_key_name: Some("team-operator".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let inside = mailtarget_operator::api::CreateSendingDomain {
        domain: "leak.example.com".into(),
        ..Default::default()
    };
    let team_client = client.calling_as(team.api_keys[0].key.clone()).unwrap();
    team_client.create_sending_domain(&inside).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.yaml");
    std::fs::write(
        &file,
        format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: gone\n  annotations: {{mailtarget.co/external-id: \"{}\"}}\nspec: {{secretName: gone-key}}\n---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {{name: other}}\nspec: {{secretName: other-key}}\n---\napiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata: {{name: leak}}\nspec: {{domain: leak.example.com}}\n",
            gone.id
        ),
    )
    .unwrap();
    let file = file.to_str().unwrap();

    let out = run_binary(&["destroy", "-f", file, "-o", "json"], Some(&sim)).await;
    assert_eq!(
        out.status.code(),
        Some(1),
        "not approved: {}",
        output_text(&out)
    );
    let refused: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", output_text(&out)));
    let actions: Vec<&str> = (refused["resources"].as_array().unwrap().iter())
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["absent", "delete", "absent"]);
    // The summary has destroy's counts, always all of them.
    let counts = serde_json::json!({"delete": 1, "keep": 2, "error": 0});
    assert_eq!(refused["summary"], counts);
    assert_eq!(refused["error"]["exitCode"], 1, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("Nothing was destroyed"), "{refused}");
    let out = run_binary(&["plan", "-f", file, "-o", "json"], Some(&sim)).await;
    let planned: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let counts = serde_json::json!({"create": 0, "update": 0, "unchanged": 1, "paused": 0, "observe": 0, "error": 2});
    assert_eq!(
        planned["summary"],
        counts,
        "plan's counts: {}",
        output_text(&out)
    );
    // A plan with errors (exit 1) says so as every failure does under -o json.
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(planned["error"]["exitCode"], 1, "{planned}");

    let args = ["destroy", "-f", file, "--auto-approve", "-o", "json"];
    let out = run_binary(&args, Some(&sim)).await;
    let done: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let counts = serde_json::json!({"delete": 1, "keep": 2, "error": 0});
    assert_eq!(done["summary"], counts, "{}", output_text(&out));
    assert!(done.get("error").is_none(), "{done}");
    let out = run_binary(&["destroy", "-f", file, "--auto-approve"], Some(&sim)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(shown.contains("ApiKey default/gone: absent"), "{shown}");
    assert!(
        shown.contains(&format!("API key {}, which does not exist", gone.id)),
        "{shown}"
    );
    let state = sim.snapshot();
    assert!(
        state.api_keys.iter().all(|k| k.sub_account_id != 0)
            && state.api_keys.iter().any(|k| k.name == "team-operator"),
        "other deleted, the sub account's own key kept"
    );
    assert_eq!(
        state.sending_domains.len(),
        1,
        "the sub account's domain kept"
    );
}

/// A `List` document (what `kubectl get -o yaml` writes) is read item by item, as kubectl
/// reads it; each item is named by its place in the list.
#[tokio::test]
async fn a_list_document_is_read_item_by_item() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let list = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: mailtarget.co/v1alpha1\n  kind: ApiKey\n  metadata: {name: ci}\n  spec: {secretName: ci-key}\n- apiVersion: mailtarget.co/v1alpha1\n  kind: ApiKey\n  metadata: {name: bad}\n  spec: {secretName: Bad_Name}\n";
    let out = run_manifest("plan", dir.path(), "list.yaml", list, &sim).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(2), "{shown}");
    assert!(
        shown.contains("list.yaml (document 1, item 2), ApiKey \"bad\""),
        "{shown}"
    );
    let good = list
        .split("- apiVersion")
        .take(2)
        .collect::<Vec<_>>()
        .join("- apiVersion");
    let out = run_manifest("plan", dir.path(), "list.yaml", &good, &sim).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(shown.contains("ApiKey default/ci: create"), "{shown}");
    assert!(shown.contains("list.yaml (document 1, item 1)"), "{shown}");
}

/// The plan hides nothing: a removed value shows as removed with its consequence, and the
/// account's objects that no manifest names are listed (left alone).
#[tokio::test]
async fn plan_shows_removals_and_unmanaged_objects() {
    let sim = simulator().await;
    let examples_dir = single_account_examples();
    let path = examples_dir.path().to_path_buf();
    assert_eq!(
        run_binary(&["apply", "-f", path.to_str().unwrap()], Some(&sim))
            .await
            .status
            .code(),
        Some(0)
    );
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(path.join("apikey-ci.yaml"))
        .unwrap()
        .replace(
            "  allowedIps:\n    - 198.51.100.7\n    - 2001:db8::7\n",
            "  allowedIps: []\n",
        );
    let out = run_manifest("plan", dir.path(), "key.yaml", &text, &sim).await;
    let shown = output_text(&out);
    assert!(
        shown.contains(r#"~ spec.allowedIps: ["198.51.100.7", "2001:db8::7"] -> (removed)"#),
        "{shown}"
    );
    assert!(shown.contains("usable from any address"), "{shown}");
    assert!(
        shown.contains("Not named by these manifests (left alone): 5 object(s)"),
        "the sub account, its two keys (the operator's credential and team-a-sender) and the two domains: {shown}"
    );
    assert!(shown.contains("SubAccount 1 \"team-a\""), "{shown}");
    // An object inside a sub account says which: the operator's credential there is not taken
    // for a company key of that name.
    assert!(
        shown.contains("\"mailtarget-operator\" (in sub account \"team-a\")"),
        "{shown}"
    );
    let file = dir.path().join("key.yaml");
    let args = ["plan", "-f", file.to_str().unwrap(), "-o", "json"];
    let doc: serde_json::Value =
        serde_json::from_slice(&run_binary(&args, Some(&sim)).await.stdout).unwrap();
    let inside: Vec<&serde_json::Value> = (doc["unmanaged"].as_array().unwrap().iter())
        .filter(|o| o["subAccount"] == "team-a")
        .collect();
    assert_eq!(inside.len(), 2, "the two keys inside: {doc}");
    // The same without permissions in the spec (the detail is read all the same), and apply
    // lifts the restriction.
    let text = text.replace("  permissionIds: [1, 2]\n", "");
    let out = run_manifest("apply", dir.path(), "key.yaml", &text, &sim).await;
    let shown = output_text(&out);
    assert!(
        shown.contains(r#"~ spec.allowedIps: ["198.51.100.7", "2001:db8::7"] -> (removed)"#),
        "{shown}"
    );
    let keys = sim.snapshot().api_keys;
    let ci = keys
        .iter()
        .find(|k| k.name == "ci-sender")
        .expect("the key");
    assert_eq!(ci.allowed_ip, "", "{shown}");
}

/// `--secrets-dir` never follows a symbolic link below the directory: a link planted as the
/// file is replaced (its target untouched), a link planted as a directory is refused before
/// any call; an existing file gets mode 0600 whatever it had; a write that fails (the file's
/// place is a directory, the directory is a file) fails the run naming the path.
#[tokio::test]
async fn secrets_dir_is_written_safely() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    let sim = simulator().await;
    let keys = examples().join("apikey-ci.yaml");
    let keys = keys.to_str().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("target");
    std::fs::write(&target, "untouched").unwrap();

    // A link planted as the file (in the directory written for the key): replaced by a private
    // file, its target untouched.
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("default/ci-mailtarget-key");
    let d = dir.path().to_str().unwrap();
    let out = run_binary(&["apply", "-f", keys, "--secrets-dir", d], Some(&sim)).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    std::fs::remove_file(folder.join("apiKey")).unwrap();
    symlink(&target, folder.join("apiKey")).unwrap();
    let out = run_binary(&["apply", "-f", keys, "--secrets-dir", d], Some(&sim)).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched");
    let meta = std::fs::symlink_metadata(folder.join("apiKey")).unwrap();
    assert!(meta.file_type().is_file(), "the link is replaced by a file");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);

    // An existing world-readable file: rewritten with mode 0600.
    std::fs::set_permissions(
        folder.join("apiKey"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let out = run_binary(&["apply", "-f", keys, "--secrets-dir", d], Some(&sim)).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let meta = std::fs::metadata(folder.join("apiKey")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);

    // The file's place is a directory: the run fails naming it.
    std::fs::remove_file(folder.join("apiKey")).unwrap();
    std::fs::create_dir(folder.join("apiKey")).unwrap();
    let out = run_binary(&["apply", "-f", keys, "--secrets-dir", d], Some(&sim)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("ci-mailtarget-key/apiKey"), "{shown}");

    // A link planted as a directory: refused before any call, nothing written outside.
    let dir = tempfile::tempdir().unwrap();
    symlink(outside.path(), dir.path().join("default")).unwrap();
    let d = dir.path().to_str().unwrap();
    sim.clear_request_log();
    let out = run_binary(&["apply", "-f", keys, "--secrets-dir", d], Some(&sim)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("default"), "names the path: {shown}");
    assert!(!outside.path().join("ci-mailtarget-key").exists());
    assert!(wrote_nothing(&sim), "{shown}");

    // The directory is a file: nothing is created at the service.
    let file = outside.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    sim.clear_request_log();
    let other = "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: fresh\nspec:\n  secretName: fresh\n";
    let manifests = tempfile::tempdir().unwrap();
    std::fs::write(manifests.path().join("k.yaml"), other).unwrap();
    let out = run_binary(
        &[
            "apply",
            "-f",
            manifests.path().to_str().unwrap(),
            "--secrets-dir",
            file.to_str().unwrap(),
        ],
        Some(&sim),
    )
    .await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(2), "an unusable flag: {shown}");
    assert!(shown.contains("--secrets-dir"), "{shown}");
    assert!(
        wrote_nothing(&sim),
        "no key created whose value could not be stored"
    );
}

/// The files under `--secrets-dir` are owned as the controller owns a Secret: `apply` does not
/// write into a directory it did not write for the resource (the user's own files, or another
/// resource's), and stops before any call to the service; the annotation
/// `mailtarget.co/adoption-policy` takes the user's files over. `destroy --secrets-dir` removes
/// the files `apply` wrote for the resources it destroys, and no other.
#[tokio::test]
async fn secrets_dir_files_are_owned_like_secrets() {
    let sim = simulator().await;
    let manifests = tempfile::tempdir().unwrap();
    let key = |name: &str, annotations: &str| {
        format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: {name}\n{annotations}spec:\n  secretName: shared\n  deletionPolicy: Delete\n"
        )
    };
    let write = |file: &str, text: String| {
        let path = manifests.path().join(file);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let a = write("a.yaml", key("a", ""));
    let b = write("b.yaml", key("b", ""));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let file = dir.path().join("default/shared/apiKey");

    // The user's own file in the place: refused before any call, the file untouched.
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "the user's").unwrap();
    sim.clear_request_log();
    let out = run_binary(&["apply", "-f", &a, "--secrets-dir", d], Some(&sim)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(
        shown.contains("default/shared"),
        "names the directory: {shown}"
    );
    assert!(shown.contains("not written"), "says why: {shown}");
    assert!(wrote_nothing(&sim), "{shown}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "the user's");

    // The adoption annotation takes it over; from then on it is the resource's.
    let annotated = "  annotations:\n    mailtarget.co/adoption-policy: AdoptOrCreate\n";
    write("a.yaml", key("a", annotated));
    let out = run_binary(&["apply", "-f", &a, "--secrets-dir", d], Some(&sim)).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let value = std::fs::read_to_string(&file).unwrap();
    assert_ne!(value, "the user's");
    write("a.yaml", key("a", ""));
    let out = run_binary(&["apply", "-f", &a, "--secrets-dir", d], Some(&sim)).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));

    // A resource with an error already keeps that error, not a SecretConflict.
    let id = sim
        .snapshot()
        .api_keys
        .iter()
        .find(|k| k.name == "a")
        .unwrap()
        .id;
    let twin = format!(
        "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: d\n  annotations:\n    mailtarget.co/external-id: \"{id}\"\nspec:\n  secretName: theirs\n"
    );
    let d_file = write("d.yaml", twin);
    let theirs = dir.path().join("default/theirs/notes");
    std::fs::create_dir_all(theirs.parent().unwrap()).unwrap();
    std::fs::write(&theirs, "the user's").unwrap();
    let out = run_binary(
        &["apply", "-f", &a, "-f", &d_file, "--secrets-dir", d],
        Some(&sim),
    )
    .await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("ConflictingOwner"), "{shown}");
    assert!(!shown.contains("SecretConflict"), "{shown}");
    std::fs::remove_file(&d_file).unwrap();

    // Another resource's directory: refused before any call, naming its owner.
    sim.clear_request_log();
    let out = run_binary(&["apply", "-f", &b, "--secrets-dir", d], Some(&sim)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(
        shown.contains("ApiKey default/a"),
        "names the owner: {shown}"
    );
    assert!(wrote_nothing(&sim), "{shown}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), value);

    // destroy removes only what apply wrote for the resources it destroys: not a file the user
    // put beside it, nor another directory.
    let mine = dir.path().join("default/mine/notes");
    std::fs::create_dir_all(mine.parent().unwrap()).unwrap();
    std::fs::write(&mine, "kept").unwrap();
    let beside = dir.path().join("default/shared/notes");
    std::fs::write(&beside, "kept").unwrap();
    let sim = &sim;
    let destroy = |f: String| async move {
        let args = ["destroy", "-f", &f, "--secrets-dir", d, "--auto-approve"];
        run_binary(&args, Some(sim)).await
    };
    let out = destroy(b.clone()).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        value,
        "a's file stays"
    );
    let out = destroy(a.clone()).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(shown.contains("removed"), "{shown}");
    assert!(!file.exists(), "{shown}");
    assert!(
        !dir.path().join("default/shared/..owner").exists(),
        "{shown}"
    );
    assert_eq!(std::fs::read_to_string(&beside).unwrap(), "kept");
    assert_eq!(std::fs::read_to_string(&mine).unwrap(), "kept");
    std::fs::remove_file(&beside).unwrap();

    // Removing files needs the same approval as deleting objects, also for a key destroy keeps
    // (Orphan); an ObserveOnly key is left alone, its files too.
    let kept = |policy: &str| {
        format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: c\nspec:\n  secretName: kept\n  deletionPolicy: Orphan\n  managementPolicy: {policy}\n"
        )
    };
    let c = write("c.yaml", kept("Full"));
    let out = run_binary(&["apply", "-f", &c, "--secrets-dir", d], Some(sim)).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let kept_file = dir.path().join("default/kept/apiKey");
    let args = ["destroy", "-f", &c, "--secrets-dir", d];
    let out = run_binary(&args, Some(sim)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "not approved: {shown}");
    assert!(shown.contains("removes"), "the plan shows it: {shown}");
    assert!(kept_file.exists(), "{shown}");
    write("c.yaml", kept("ObserveOnly"));
    let out = destroy(c.clone()).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(kept_file.exists(), "{shown}");
}

/// `apply` without `--secrets-dir` says, for each resource it creates whose spec names a
/// Secret, that the value is not written (and that a later `apply --secrets-dir` writes it);
/// with `--secrets-dir`, or once the object exists, it says nothing of it.
#[tokio::test]
async fn apply_says_which_values_it_does_not_write() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let text = "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: ci}\nspec: {secretName: ci-key}\n---\napiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata: {name: mail}\nspec: {domain: mail.example.com, dkimPrivateKeySecretName: mail-dkim}\n---\napiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata: {name: plain}\nspec: {domain: plain.example.com}\n";
    let out = run_manifest("apply", dir.path(), "m.yaml", text, &sim).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    for secret in [
        "spec.secretName \"ci-key\"",
        "spec.dkimPrivateKeySecretName \"mail-dkim\"",
    ] {
        assert!(
            shown.contains(&format!("{secret}: not written, no --secrets-dir")),
            "{shown}"
        );
    }
    assert_eq!(shown.matches("no --secrets-dir").count(), 2, "{shown}");
    let out = run_manifest("apply", dir.path(), "m.yaml", text, &sim).await;
    let shown = output_text(&out);
    assert!(
        !shown.contains("--secrets-dir"),
        "existing objects: {shown}"
    );

    let sim = simulator().await;
    let secrets = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.yaml");
    let args = ["apply", "-f", path.to_str().unwrap(), "--secrets-dir"];
    let out = run_binary(
        &[&args[..], &[secrets.path().to_str().unwrap()]].concat(),
        Some(&sim),
    )
    .await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(!shown.contains("no --secrets-dir"), "{shown}");
}

/// `destroy --secrets-dir` removes the files `apply` wrote for a resource under each secret
/// name it had, not only its present one: a SendingDomain whose `dkimPrivateKeySecretName`
/// changed, then was removed, loses both directories; a directory written for another resource
/// stays. The plan names each removal.
#[tokio::test]
async fn destroy_removes_the_files_of_earlier_secret_names() {
    let sim = simulator().await;
    let manifests = tempfile::tempdir().unwrap();
    let file = manifests.path().join("domain.yaml");
    let f = file.to_str().unwrap();
    let domain = |secret: &str| {
        format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata:\n  name: mail\nspec:\n  domain: mail.example.com\n  deletionPolicy: Delete\n{secret}"
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let first = dir.path().join("default/first");
    // The second apply finds the marker as builds before it named the Secret wrote it
    // (`Kind namespace/name`): its directory still counts as the resource's, and is marked anew.
    for (i, secret) in ["first", "first", "second"].into_iter().enumerate() {
        if i == 1 {
            std::fs::write(first.join("..owner"), "SendingDomain default/mail\n").unwrap();
        }
        std::fs::write(
            &file,
            domain(&format!("  dkimPrivateKeySecretName: {secret}\n")),
        )
        .unwrap();
        let out = run_binary(&["apply", "-f", f, "--secrets-dir", d], Some(&sim)).await;
        assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    }
    let second = dir.path().join("default/second");
    assert!(first.join("..owner").exists() && second.join("..owner").exists());
    // Beside them: another resource's directory (of another kind, same name), a copy of the
    // first directory under another name (a user's backup, its marker copied too), a file the
    // user put beside a key, and a directory whose marker is a directory (it cannot be read).
    let other = dir.path().join("default/other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("..owner"), "ApiKey default/mail\n").unwrap();
    std::fs::write(other.join("dkimPrivateKey"), "theirs").unwrap();
    let backup = dir.path().join("default/first-backup");
    std::fs::create_dir_all(&backup).unwrap();
    for name in ["..owner", "dkimPrivateKey"] {
        std::fs::copy(first.join(name), backup.join(name)).unwrap();
    }
    std::fs::write(second.join("notes"), "the user's").unwrap();
    let odd = dir.path().join("default/odd");
    std::fs::create_dir_all(odd.join("..owner")).unwrap();
    std::fs::write(odd.join("f"), "x").unwrap();
    // The copy is not the resource's under its own name either: apply refuses to write there.
    let backup_spec = domain("  dkimPrivateKeySecretName: first-backup\n");
    std::fs::write(&file, backup_spec).unwrap();
    let out = run_binary(&["apply", "-f", f, "--secrets-dir", d], Some(&sim)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    let conflict = "holds the secret files written for SendingDomain default/mail as first";
    assert!(shown.contains(conflict), "{shown}");
    std::fs::write(&file, domain("")).unwrap();

    let out = run_binary(&["destroy", "-f", f, "--secrets-dir", d], Some(&sim)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "not approved: {shown}");
    for name in ["default/first", "default/second"] {
        let removal = format!("removes the files apply --secrets-dir wrote for it in {d}/{name}");
        assert!(shown.contains(&removal), "{shown}");
    }
    for name in ["default/other", "default/first-backup", "default/odd"] {
        assert!(!shown.contains(&format!("{d}/{name}")), "{shown}");
    }

    let args = ["destroy", "-f", f, "--secrets-dir", d, "--auto-approve"];
    let out = run_binary(&args, Some(&sim)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(sim.snapshot().sending_domains.is_empty(), "{shown}");
    assert!(!first.exists(), "{shown}");
    let left: Vec<_> = std::fs::read_dir(&second)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left, ["notes"], "only the user's file stays: {shown}");
    for kept in [other.join("dkimPrivateKey"), backup.join("dkimPrivateKey")] {
        assert!(kept.exists(), "{}: {shown}", kept.display());
    }
    assert_eq!(
        std::fs::read_to_string(other.join("dkimPrivateKey")).unwrap(),
        "theirs"
    );
}

/// A `--secrets-dir` the user may not write into (mode 0555) stops `apply` before any call to
/// the service, exit 2: no key is created whose value could not be stored. A directory below
/// it that the user may not write into fails the resources that would write there, before any
/// call too (exit 1). Run as an
/// unprivileged user (through `setpriv` when the tests run as root, whom modes do not stop).
#[tokio::test]
async fn an_unwritable_secrets_dir_stops_apply_before_any_write() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let sim = simulator().await;
    // Under /tmp, which any user may enter (TMPDIR may be below a private home).
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let open = |path: &std::path::Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    open(dir.path(), 0o755);
    // The binary is copied where any user may run it.
    let binary = dir.path().join("mailtarget-operator");
    std::fs::copy(env!("CARGO_BIN_EXE_mailtarget-operator"), &binary).unwrap();
    open(&binary, 0o755);
    let manifest = dir.path().join("key.yaml");
    std::fs::write(&manifest, "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: fresh\nspec:\n  secretName: fresh\n").unwrap();
    open(&manifest, 0o644);
    let secrets = dir.path().join("secrets");
    std::fs::create_dir(&secrets).unwrap();
    let apply = async || {
        let args = [
            "apply",
            "-f",
            manifest.to_str().unwrap(),
            "--secrets-dir",
            secrets.to_str().unwrap(),
        ];
        let root = std::fs::metadata("/proc/self").unwrap().uid() == 0;
        let mut cmd = if root {
            let mut cmd = Command::new("setpriv");
            cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(&binary);
            cmd
        } else {
            Command::new(&binary)
        };
        cmd.args(args)
            .env("MAILTARGET_API_KEY", KEY)
            .env("MAILTARGET_API_URL", sim.base_url())
            .env("MAILTARGET_TRANSMISSION_URL", sim.transmission_url())
            .kill_on_drop(true);
        let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
            .await
            .expect("finished within 60 s")
            .expect(
                "setpriv (util-linux) runs the binary as another user when the tests run as root",
            );
        (out.status.code(), output_text(&out))
    };

    open(&secrets, 0o555);
    let (code, shown) = apply().await;
    assert_eq!(code, Some(2), "{shown}");
    assert!(
        shown.contains("--secrets-dir") && shown.contains("not writable"),
        "{shown}"
    );
    assert!(
        wrote_nothing(&sim),
        "no key created whose value could not be stored"
    );

    // The directory is writable, the namespace's below it is not: the resource fails before
    // any call, naming that directory.
    open(&secrets, 0o777);
    let namespace = secrets.join("default");
    std::fs::create_dir(&namespace).unwrap();
    open(&namespace, 0o555);
    let (code, shown) = apply().await;
    assert_eq!(code, Some(1), "{shown}");
    assert!(
        shown.contains(&format!("{}: not writable", namespace.display())),
        "{shown}"
    );
    assert!(
        wrote_nothing(&sim),
        "no key created whose value could not be stored: {shown}"
    );
}

/// `crds --out-dir` writes through no symbolic link and creates no missing parent.
#[tokio::test]
async fn crds_out_dir_is_written_safely() {
    use std::os::unix::fs::symlink;
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("target");
    std::fs::write(&target, "untouched").unwrap();
    let dir = tempfile::tempdir().unwrap();
    symlink(&target, dir.path().join("apikeys.mailtarget.co.yaml")).unwrap();
    let out = run_binary(&["crds", "--out-dir", dir.path().to_str().unwrap()], None).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched");

    // Written again with the same content: left as it is, and said so.
    let out = run_binary(&["crds", "--out-dir", dir.path().to_str().unwrap()], None).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let shown = output_text(&out);
    assert!(
        shown.contains("unchanged") && !shown.contains("wrote"),
        "{shown}"
    );

    let missing = dir.path().join("a/b/crds");
    let out = run_binary(&["crds", "--out-dir", missing.to_str().unwrap()], None).await;
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(!dir.path().join("a").exists(), "no parent created");
}

/// Two resources writing one Secret (the same namespace and name) are refused before any API
/// call, as the controller reports `SecretConflict`: neither value overwrites the other.
#[tokio::test]
async fn two_resources_writing_one_secret_are_refused() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let text = "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: a\nspec:\n  secretName: shared\n---\napiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata:\n  name: d\nspec:\n  domain: shared.example.com\n  dkimPrivateKeySecretName: shared\n";
    let out = run_manifest("apply", dir.path(), "two.yaml", text, &sim).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(2), "{shown}");
    assert!(shown.contains("Secret \"shared\""), "{shown}");
    assert!(
        shown.contains("ApiKey \"a\""),
        "names the other writer: {shown}"
    );
    assert!(sim.request_log().is_empty(), "refused before any call");
}

/// Hostile manifest trees: a FIFO named `*.yaml` is reported, never opened (it would block); a
/// directory loop through a symbolic link is read once; a deeply nested document is refused by
/// a check made before parsing, which reads it once (parsing it would take time growing with
/// the square of its depth).
#[tokio::test]
async fn hostile_manifest_trees_are_refused_quickly() {
    use std::os::unix::fs::symlink;
    let sim = simulator().await;

    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        examples().join("apikey-ci.yaml"),
        dir.path().join("key.yaml"),
    )
    .unwrap();
    let fifo = dir.path().join("blocked.yaml");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let out = run_binary(&["plan", "-f", dir.path().to_str().unwrap()], Some(&sim)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(2), "{shown}");
    assert!(shown.contains("blocked.yaml"), "{shown}");
    assert!(shown.contains("not a regular file"), "{shown}");
    std::fs::remove_file(&fifo).unwrap();

    symlink(dir.path(), dir.path().join("loop")).unwrap();
    let out = run_binary(&["plan", "-f", dir.path().to_str().unwrap()], Some(&sim)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "read once: {shown}");
    assert!(shown.contains("Plan: 1 to create"), "{shown}");

    let depth = 100_000;
    let nested = format!(
        "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {{name: x}}\nspec: {{secretName: s, x: {}{}}}\n",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    sim.clear_request_log();
    let out = run_manifest("plan", dir.path(), "nested.yaml", &nested, &sim).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(2), "{shown}");
    assert!(shown.contains("nested deeper than"), "{shown}");
    assert!(sim.request_log().is_empty(), "refused before any call");
}

/// Serves `app` on loopback and answers its address.
async fn serve(app: axum::Router) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

/// Runs the real binary against the service at `addr` (bounded wait).
async fn run_binary_at(addr: std::net::SocketAddr, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mailtarget-operator"));
    cmd.args(args)
        .env_remove("MAILTARGET_API_KEY_FILE")
        .env_remove("MAILTARGET_CA_BUNDLE")
        .env_remove("MAILTARGET_DEFAULT_ADOPTION_POLICY")
        .env_remove("RUST_LOG")
        .env("MAILTARGET_API_KEY", KEY)
        .env("MAILTARGET_API_URL", format!("http://{addr}"))
        .env("MAILTARGET_TRANSMISSION_URL", format!("http://{addr}/v1"))
        .kill_on_drop(true);
    tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("finished within 60 s")
        .unwrap()
}

/// Serves `app` on loopback and runs `plan -f examples/apikey-ci.yaml` against it (bounded
/// wait).
async fn plan_against(app: axum::Router) -> Output {
    let addr = serve(app).await;
    let file = examples().join("apikey-ci.yaml");
    run_binary_at(addr, &["plan", "-f", file.to_str().unwrap()]).await
}

/// A server that answers every page of a list with the same items and a huge `count` makes the
/// walk stop at the first page that adds no new id, with a clear error, after a handful of
/// requests (not thousands).
#[tokio::test]
async fn a_list_repeating_one_page_stops_the_walk() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let served = Arc::new(AtomicUsize::new(0));
    let counter = served.clone();
    let app = axum::Router::new().fallback(move || {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            axum::Json(serde_json::json!({
                "apiKeys": [{"id": 1, "key": "k", "name": "one", "permissionType": "full",
                             "subAccountId": 0, "subAccountName": "", "createdAt": 1}],
                "subAccounts": [{"id": 1, "name": "one", "status": "active", "createdAt": 1}],
                "sendingDomain": [],
                "count": 1_000_000_000
            }))
        }
    });
    let out = plan_against(app).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("no new"), "says why: {shown}");
    let requests = served.load(Ordering::SeqCst);
    assert!(requests <= 10, "{requests} requests");
}

/// A server that echoes the request's Authorization header and writes control characters into
/// its error message: the CLI prints neither its own key nor the control characters (which
/// could forge output lines), and caps the message's length.
#[tokio::test]
async fn server_messages_are_scrubbed_before_printing() {
    let app = axum::Router::new().fallback(|headers: axum::http::HeaderMap| async move {
        let auth = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        (
            axum::http::StatusCode::BAD_REQUEST,
            axum::Json(serde_json::json!({
                "error": "BAD",
                "message": format!("you sent {auth}\u{1b}[2K\rApply: 5 created, 0 updated, 0 unchanged.\n{}", "x".repeat(5000)),
            })),
        )
    });
    let out = plan_against(app).await;
    let shown = output_text(&out);
    assert!(!shown.contains(KEY), "the CLI printed its own key");
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("you sent"), "the message is shown: {shown}");
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\r'),
        "control characters reached the terminal"
    );
    assert!(
        !shown.lines().any(|l| l.starts_with("Apply:")),
        "a forged line: {shown}"
    );
    assert!(
        shown.len() < 3000,
        "the message is capped: {} bytes",
        shown.len()
    );
}

/// A proxy to the simulator that plays a second `apply` running at the same moment: the first
/// `POST /api-key` it forwards is sent twice, so the twin exists before the CLI sees its answer.
#[derive(Clone)]
struct ConcurrentApply {
    upstream: String,
    http: reqwest::Client,
    twin_sent: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

async fn forward_with_twin(
    axum::extract::State(p): axum::extract::State<ConcurrentApply>,
    request: axum::extract::Request,
) -> axum::response::Response {
    use std::sync::atomic::Ordering;
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    let send = || {
        let mut upstream = p
            .http
            .request(parts.method.clone(), format!("{}{}", p.upstream, parts.uri))
            .body(body.clone());
        for (name, value) in &parts.headers {
            if name != "host" {
                upstream = upstream.header(name, value);
            }
        }
        upstream.send()
    };
    let answer = send().await.unwrap();
    let is_key_create = parts.method == "POST" && parts.uri.path() == "/api-key";
    if is_key_create && answer.status().is_success() && !p.twin_sent.swap(true, Ordering::SeqCst) {
        assert!(
            send().await.unwrap().status().is_success(),
            "the twin is created"
        );
    }
    let status = answer.status();
    let bytes = answer.bytes().await.unwrap();
    axum::response::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(axum::body::Body::from(bytes))
        .unwrap()
}

/// Two `apply` runs at the same moment both create a company key with one name (key names are
/// not unique at the service). The run that sees the twin when it lists the name again after its
/// create fails (exit 1) naming both ids and what to do; a later run stops on the ambiguous
/// name with the same advice and writes nothing. Fails if the twin goes unnoticed (exit 0) or a
/// later run stalls silently.
#[tokio::test]
async fn a_twin_created_by_a_concurrent_apply_fails_the_run() {
    let sim = simulator().await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let proxy = ConcurrentApply {
        upstream: sim.base_url(),
        http: reqwest::Client::new(),
        twin_sent: Default::default(),
    };
    let addr = serve(
        axum::Router::new()
            .fallback(forward_with_twin)
            .with_state(proxy),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let file = examples().join("apikey-ci.yaml");
    let args = [
        "apply",
        "-f",
        file.to_str().unwrap(),
        "--secrets-dir",
        dir.path().to_str().unwrap(),
    ];
    let out = run_binary_at(addr, &args).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    let ids: Vec<i64> = sim
        .snapshot()
        .api_keys
        .iter()
        .filter(|k| k.name == "ci-sender")
        .map(|k| k.id)
        .collect();
    assert_eq!(ids.len(), 2, "the proxy made a twin");
    for id in &ids {
        assert!(shown.contains(&id.to_string()), "names id {id}: {shown}");
    }
    assert!(
        shown.contains("at the same time"),
        "says what happened: {shown}"
    );
    assert!(shown.contains("delete one"), "says what to do: {shown}");
    assert!(
        shown.contains("one at a time"),
        "says how to avoid it: {shown}"
    );
    let stored =
        std::fs::read_to_string(dir.path().join("default/ci-mailtarget-key/apiKey")).unwrap();
    assert!(
        sim.snapshot().api_keys.iter().any(|k| k.key == stored),
        "the value of the key this run created is not lost"
    );

    sim.clear_request_log();
    let out = run_binary(&["apply", "-f", file.to_str().unwrap()], Some(&sim)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("2 API keys match"), "{shown}");
    for id in &ids {
        assert!(shown.contains(&id.to_string()), "names id {id}: {shown}");
    }
    assert!(shown.contains("delete"), "says what to do: {shown}");
    assert!(wrote_nothing(&sim), "a later run writes nothing");
}

/// Two accounts of one run (`--account`) that reach one company through two of its keys (one
/// key for both is refused up front) make twins too: each plans its key alone. The message says so, and claims no stored value when no `--secrets-dir` was given.
#[tokio::test]
async fn a_twin_made_through_two_accounts_of_one_company_is_named_so() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("twins.yaml");
    std::fs::write(&file, two_keys_named_app(&sim)).unwrap();
    let key_file = dir.path().join("billing.key");
    std::fs::write(&key_file, second_company_key(&sim).await).unwrap();
    let account = format!("billing=@{}", key_file.display());
    let args = ["apply", "-f", file.to_str().unwrap(), "--account", &account];
    let out = run_binary(&args, Some(&sim)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(
        shown.contains("through another account"),
        "names the likely cause: {shown}"
    );
    assert!(!shown.contains("stored the value"), "{shown}");
}

/// The characters of `text` that could move the cursor, forge a line or hide text on a
/// terminal: every control character but the line ends the CLI writes itself.
fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|c| *c != '\n' && (c.is_control() || ('\u{202A}'..='\u{202E}').contains(c)))
        .collect()
}

/// Control characters in manifest values (names, a sending domain's note, a sub account's name)
/// and in file names reach the output of `plan`, `apply` and `destroy`, and their errors,
/// escaped: no raw escape sequence, carriage return or newline that could forge a line (`Apply:
/// 9 created`) or clear the screen, and each object is still named recognisably; `-o json` keeps
/// the values exact. A huge name in an error is cut. Fails if any of these texts is printed as
/// it came.
#[tokio::test]
async fn control_characters_from_manifests_and_file_names_are_escaped() {
    let sim = simulator().await;
    let check = |out: &Output, summaries: usize| {
        let shown = output_text(out);
        let raw = raw_controls(&shown);
        let start: String = shown.chars().take(2000).collect();
        assert!(
            raw.is_empty(),
            "{} raw control characters in: {start:?}",
            raw.len()
        );
        let forged = shown
            .lines()
            .filter(|l| l.starts_with("Apply:") || l.starts_with("Plan:"))
            .count();
        assert_eq!(forged, summaries, "a forged summary line: {start:?}");
        shown
    };

    // An invalid name and a file name with control characters: the error names both, escaped.
    let bad = tempfile::tempdir().unwrap();
    let file = bad
        .path()
        .join("evil\r\u{1b}[2Jkeys\nApply: 9 created.yaml");
    std::fs::write(
        &file,
        format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: \"ci\\r\\e[2J\"\nspec:\n  secretName: s1\n---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: \"{}\"\nspec:\n  secretName: s2\n",
            "\\e[2J".repeat(20_000)
        ),
    )
    .unwrap();
    let out = run_binary(&["plan", "-f", bad.path().to_str().unwrap()], Some(&sim)).await;
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    let shown = check(&out, 0);
    assert!(shown.contains("keys"), "names the file: {shown}");
    assert!(
        shown.contains("ApiKey \"ci\\r"),
        "names the object: {shown}"
    );
    assert!(
        shown.len() < 10_000,
        "a huge name is cut: {} bytes",
        shown.len()
    );

    // Values with control characters, in a file whose name has some.
    let good = tempfile::tempdir().unwrap();
    let file = good.path().join("evil\u{1b}[31mred.yaml");
    let manifests = |suffix: &str| {
        format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: ci-key\nspec:\n  name: \"Team\\r\\e[2JApply: 9 created\"\n  secretName: s2\n---\napiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata:\n  name: mail\nspec:\n  domain: mail.example.com\n  note: \"line1\\nApply: 5 created\\e[2J\"\n  deletionPolicy: Delete\n---\napiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata:\n  name: team\nspec:\n  name: \"Team\\e]0;owned\\a\\u009b2J\"\n  status: \"on\\r\\e[2J\\u009b{suffix}\"\n"
        )
    };
    std::fs::write(&file, manifests("")).unwrap();
    let dir = good.path().to_str().unwrap();
    let out = run_binary(&["apply", "-f", dir], Some(&sim)).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let shown = check(&out, 1);
    assert!(shown.contains("ApiKey default/ci-key: created"), "{shown}");
    assert!(
        shown.contains(r"Team\r\u001b[2J"),
        "the name is shown, escaped: {shown}"
    );

    // A change shows the old and the new value, both escaped.
    std::fs::write(&file, manifests(" v2")).unwrap();
    let out = run_binary(&["plan", "-f", dir], Some(&sim)).await;
    let shown = check(&out, 1);
    assert!(shown.contains("~ spec.status: \"on\\r"), "{shown}");
    assert!(shown.contains("red.yaml"), "names the file: {shown}");

    // JSON keeps the values exact, every such character written as a JSON escape.
    let out = run_binary(&["plan", "-f", dir, "-o", "json"], Some(&sim)).await;
    let shown = check(&out, 0);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(shown.contains("\\u009b"), "written as an escape: {shown}");
    assert!(
        doc.to_string().contains('\u{9b}'),
        "the value is exact: {shown}"
    );

    let out = run_binary(&["destroy", "--auto-approve", "-f", dir], Some(&sim)).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    check(&out, 0);
}

/// A secret write that fails half-way (here every write of file content fails: the process's
/// file size limit is 0, as on a full disk) fails the run, names the file, and leaves the value
/// written before intact: the new value goes to a temporary file that is renamed only once
/// complete.
#[tokio::test]
async fn a_failed_secret_write_keeps_the_previous_value() {
    let sim = simulator().await;
    let keys = examples().join("apikey-ci.yaml");
    let keys = keys.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let out = run_binary(&["apply", "-f", keys, "--secrets-dir", d], Some(&sim)).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let file = dir.path().join("default/ci-mailtarget-key/apiKey");
    std::fs::write(&file, "previous-value").unwrap();

    // SIGXFSZ ignored (inherited through exec) turns the limit into EFBIG errors.
    let script = "trap '' XFSZ; ulimit -f 0; exec \"$0\" \"$@\"";
    let binary = env!("CARGO_BIN_EXE_mailtarget-operator");
    let args = [
        "-c",
        script,
        binary,
        "apply",
        "-f",
        keys,
        "--secrets-dir",
        d,
    ];
    let out = output(command("sh", &args, Some(&sim))).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(
        shown.contains("apiKey"),
        "the failed file is named: {shown}"
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "previous-value",
        "the value written before is intact"
    );
    let leftovers: Vec<_> = std::fs::read_dir(file.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "apiKey" && n != "..owner")
        .collect();
    assert!(
        leftovers.is_empty(),
        "no temporary file is left: {leftovers:?}"
    );
}

/// `examples/tenants/` applies in one run: two SubAccounts, each created with the operator's
/// credential, and each team's domain and two keys created inside its own sub account (with
/// that credential: `subAccountId` at the service), the Namespaces skipped; a second run
/// writes nothing. A manifest placing a key inside one tenant's sub account with the
/// external-id of the other tenant's key reaches nothing: the plan fails, nothing is written.
#[tokio::test]
async fn tenants_apply_inside_their_sub_accounts() {
    let sim = simulator().await;
    let client = client(&sim);
    let tenants = examples().join("tenants");
    let set = manifest::load(std::slice::from_ref(&tenants)).unwrap();
    let first = plan::build(&client, &set.resources, &set.namespace_selectors)
        .await
        .unwrap();
    assert_eq!(first.summary().create, 8, "{:#?}", first.entries);
    let report = apply::run(&client, &first, None).await;
    assert_eq!(report.summary().error, 0, "{:#?}", report.outcomes);

    let state = sim.snapshot();
    for team in ["a", "b"] {
        let sub = (state.sub_accounts.iter())
            .find(|s| s.name == format!("tenant-{team}"))
            .expect("sub account created");
        let mut keys: Vec<&str> = (state.api_keys.iter())
            .filter(|k| k.sub_account_id == sub.id)
            .map(|k| k.name.as_str())
            .collect();
        keys.sort_unstable();
        let sender = format!("team-{team}-sender");
        let analytics = format!("team-{team}-analytics");
        assert_eq!(
            keys,
            ["mailtarget-operator", analytics.as_str(), sender.as_str()],
            "tenant {team}'s keys, inside its sub account"
        );
        let domain = (state.sending_domains.iter())
            .find(|d| d.domain == format!("mail.team-{team}.example.com"))
            .expect("domain created");
        assert_eq!(
            domain.sub_account_id, sub.id,
            "tenant {team}'s domain inside"
        );
    }
    assert_eq!(state.api_keys.len(), 6, "no key outside the sub accounts");

    sim.clear_request_log();
    let second = plan::build(&client, &set.resources, &set.namespace_selectors)
        .await
        .unwrap();
    assert_eq!(second.summary().unchanged, 8, "{:#?}", second.entries);
    apply::run(&client, &second, None).await;
    let writes = sim
        .request_log()
        .into_iter()
        .filter(|r| r.is_write())
        .count();
    assert_eq!(writes, 0, "a second apply writes nothing");

    // Team a names team b's sender key by external-id, inside its own sub account.
    let theirs = (state.api_keys.iter())
        .find(|k| k.name == "team-b-sender")
        .unwrap()
        .id;
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        tenants.join("10-platform.yaml"),
        dir.path().join("platform.yaml"),
    )
    .unwrap();
    let intruder = format!(
        "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: stolen\n  namespace: team-a\n  annotations: {{mailtarget.co/external-id: \"{theirs}\"}}\nspec:\n  subAccountRef: {{name: tenant-a, namespace: platform}}\n  secretName: stolen\n"
    );
    std::fs::write(dir.path().join("intruder.yaml"), intruder).unwrap();
    sim.clear_request_log();
    let out = run_binary(
        &[
            "apply",
            "-f",
            dir.path().to_str().unwrap(),
            "--secrets-dir",
            dir.path().to_str().unwrap(),
        ],
        Some(&sim),
    )
    .await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(
        shown.contains(&format!("API key {theirs}, which does not exist")),
        "{shown}"
    );
    assert!(
        wrote_nothing(&sim),
        "nothing written: {:?}",
        sim.request_log()
    );
    assert!(!dir.path().join("team-a").exists(), "no secret written");

    // Team b observes tenant a's sub account with a SubAccount of its own and places a key
    // inside: the platform's SubAccount manages it, so nothing is placed through the observer
    // (ConflictingOwner, as in a cluster), nothing is written.
    std::fs::remove_file(dir.path().join("intruder.yaml")).unwrap();
    let tenant_a = (state.sub_accounts.iter())
        .find(|s| s.name == "tenant-a")
        .unwrap()
        .id;
    let spy = format!(
        "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata:\n  name: spy\n  namespace: team-b\n  annotations: {{mailtarget.co/external-id: \"{tenant_a}\"}}\nspec: {{name: x-tenant, managementPolicy: ObserveOnly}}\n---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {{name: grab, namespace: team-b}}\nspec: {{subAccountRef: {{name: spy}}, secretName: grab}}\n"
    );
    std::fs::write(dir.path().join("spy.yaml"), spy).unwrap();
    sim.clear_request_log();
    let args = ["apply", "-f", dir.path().to_str().unwrap()];
    let out = run_binary(&args, Some(&sim)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("ConflictingOwner"), "{shown}");
    assert!(wrote_nothing(&sim), "{:?}", sim.request_log());
    // plan says so too; and destroy does not delete, through the observer, a key of tenant a
    // that the spy's ApiKey names.
    let out = run_binary(&["plan", "-f", dir.path().to_str().unwrap()], Some(&sim)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("ConflictingOwner"), "{shown}");
    let tenant_a_credential = (state.api_keys.iter())
        .find(|k| k.name == "mailtarget-operator" && k.sub_account_id == tenant_a)
        .unwrap();
    let victim = crate::client(&sim)
        .calling_as(tenant_a_credential.key.clone().into())
        .unwrap()
        .create_api_key(&CreateApiKey {
            name: Some("grab".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    sim.clear_request_log();
    let args = [
        "destroy",
        "-f",
        dir.path().to_str().unwrap(),
        "--auto-approve",
    ];
    let out = run_binary(&args, Some(&sim)).await;
    let shown = output_text(&out);
    assert!(shown.contains("ConflictingOwner"), "{shown}");
    assert_ne!(out.status.code(), Some(0), "{shown}");
    assert!(
        (sim.snapshot().api_keys.iter()).any(|k| k.id == victim.id),
        "tenant a's key is not deleted through the observer: {shown}"
    );
    // Nor anything else: a plan with an error is not carried out (the sub accounts' Deactivate).
    assert!(wrote_nothing(&sim), "{:?}", sim.request_log());
    std::fs::remove_file(dir.path().join("spy.yaml")).unwrap();

    // destroy deletes what is inside a sub account with that sub account's credential, as
    // every other call for it is made (the boundary the service enforces), not the company key.
    let credentials: Vec<i64> = (state.api_keys.iter())
        .filter(|k| k.name == "mailtarget-operator")
        .map(|k| k.id)
        .collect();
    sim.clear_request_log();
    let args = ["destroy", "-f", tenants.to_str().unwrap(), "--auto-approve"];
    let out = run_binary(&args, Some(&sim)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    let deletes: Vec<_> = (sim.request_log().into_iter())
        .filter(|r| r.method == "DELETE")
        .collect();
    assert_eq!(
        deletes.len(),
        6,
        "two keys and a domain per team: {deletes:?}"
    );
    for d in &deletes {
        assert!(
            d.key_id.is_some_and(|id| credentials.contains(&id)),
            "{d:?} not made with a sub account's credential ({credentials:?})"
        );
    }
}

/// ClusterAccount `billing` reaching `sim`, as one manifest document.
fn billing_account(sim: &Simulator) -> String {
    format!(
        "apiVersion: mailtarget.co/v1alpha1\nkind: ClusterAccount\nmetadata: {{name: billing}}\nspec:\n  credentials: {{secretRef: {{name: billing-credentials}}}}\n  apiUrl: {}\n  transmissionUrl: {}\n",
        sim.base_url(),
        sim.transmission_url()
    )
}

/// ClusterAccount `billing` reaching `sim`, with ApiKey `ours` of the default account and
/// ApiKey `invoices` of `billing`, both naming the key `app`.
fn two_keys_named_app(sim: &Simulator) -> String {
    format!(
        "{}---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {{name: ours}}\nspec: {{name: app, secretName: ours-key}}\n---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {{name: invoices}}\nspec:\n  name: app\n  secretName: invoices-key\n  accountRef: {{name: billing}}\n",
        billing_account(sim)
    )
}

/// Accounts other than `default` take their key from `--account NAME=@FILE` and their addresses
/// from their manifest: a folder with a key of the default account and, through a ClusterAccount
/// `billing` (another company, another simulator), a key of billing applies in one run, each key
/// created at its own company, the output naming the account. Without `--account` the resource
/// naming billing is invalid input (exit 2, nothing called), and the error says what to pass;
/// so is a key file that cannot be read, under `--simulate` too.
#[tokio::test]
async fn accounts_take_their_keys_from_the_command_line() {
    let sim = simulator().await;
    let billing = Simulator::start(SimulatorConfig::new("billing-company-key"))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let manifests = two_keys_named_app(&billing);
    let file = dir.path().join("accounts.yaml");
    std::fs::write(&file, manifests).unwrap();
    let key_file = dir.path().join("billing.key");
    std::fs::write(&key_file, "billing-company-key\n").unwrap();
    let file = file.to_str().unwrap();

    let refused = run_binary(&["plan", "-f", file], Some(&sim)).await;
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("--account billing=@FILE"), "{stderr}");
    assert!(sim.request_log().is_empty() && billing.request_log().is_empty());

    let account = format!("billing=@{}", key_file.display());
    let out = run_binary(
        &["apply", "-f", file, "--account", &account, "-o", "json"],
        Some(&sim),
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let accounts: Vec<(&str, Option<&str>)> = report["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["account"].as_str()))
        .collect();
    assert_eq!(accounts, [("ours", None), ("invoices", Some("billing"))]);
    let names = |s: &Simulator| -> Vec<String> {
        s.snapshot().api_keys.into_iter().map(|k| k.name).collect()
    };
    // One name, two companies: two objects, no claim conflict.
    assert_eq!(names(&sim), ["app"]);
    assert_eq!(names(&billing), ["app"]);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("billing-company-key"),
        "the key never shows"
    );

    let twice = run_binary(
        &[
            "plan",
            "-f",
            file,
            "--account",
            &account,
            "--account",
            &account,
        ],
        Some(&sim),
    )
    .await;
    assert_eq!(twice.status.code(), Some(2), "an account's key given twice");

    // The key file is read even when no key is needed (a dry run under --simulate), so a wrong
    // path fails there too; an account no resource uses is said.
    let missing = format!("billing=@{}", dir.path().join("nowhere.key").display());
    let out = run_binary(
        &["plan", "-f", file, "--account", &missing, "--simulate"],
        None,
    )
    .await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(2), "{shown}");
    assert!(
        shown.contains("--account billing") && shown.contains("nowhere.key"),
        "{shown}"
    );
    // A key the service refuses, or one that cannot be sent, names the account it is of; a
    // file too large to hold a key is refused before it is sent.
    let odd = dir.path().join("odd.key");
    for (content, says, code) in [
        (
            "not-the-billing-key".to_string(),
            "authentication failed",
            1,
        ),
        ("bad\u{1}key".to_string(), "invalid client configuration", 2),
        ("k".repeat(100_000), "larger than", 2),
    ] {
        std::fs::write(&odd, &content).unwrap();
        let odd_account = format!("billing=@{}", odd.display());
        let out = run_binary(&["plan", "-f", file, "--account", &odd_account], Some(&sim)).await;
        let shown = output_text(&out);
        assert_eq!(out.status.code(), Some(code), "{says}: {shown}");
        assert!(
            shown.contains("account billing") && shown.contains(says),
            "{shown}"
        );
        assert!(
            !shown.contains(&content[..5]),
            "the key never shows: {shown}"
        );
    }
    let unused = format!("payroll=@{}", key_file.display());
    let out = run_binary(
        &[
            "plan",
            "-f",
            file,
            "--account",
            &account,
            "--account",
            &unused,
        ],
        Some(&sim),
    )
    .await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("note: --account payroll: no resource uses this account"),
        "{shown}"
    );

    let again = run_binary(&["plan", "-f", file, "--account", &account], Some(&sim)).await;
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(
        text.contains("ApiKey default/invoices (account billing): unchanged"),
        "{text}"
    );
    assert!(text.contains("0 to create"), "{text}");
}

/// An `--account` key file is read once, so a process substitution (`=@<(vault read ...)`)
/// works; a key given inline by mistake (`NAME=KEY`) is refused without repeating it.
#[tokio::test]
async fn account_keys_are_read_once_and_never_echoed() {
    let billing = Simulator::start(SimulatorConfig::new("billing-company-key"))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("billing.yaml");
    let manifests = format!(
        "{}---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {{name: invoices}}\nspec:\n  secretName: invoices-key\n  accountRef: {{name: billing}}\n",
        billing_account(&billing)
    );
    std::fs::write(&file, manifests).unwrap();
    let file = file.to_str().unwrap();

    let inline = run_binary(
        &["plan", "-f", file, "--account", "billing=inline-secret-key"],
        None,
    )
    .await;
    let shown = output_text(&inline);
    assert_eq!(inline.status.code(), Some(2), "{shown}");
    assert!(shown.contains("NAME=@FILE"), "{shown}");
    assert!(!shown.contains("inline-secret-key"), "{shown}");

    let script = "\"$0\" plan -f \"$1\" --account billing=@<(printf billing-company-key)";
    let binary = env!("CARGO_BIN_EXE_mailtarget-operator");
    let out = output(command("bash", &["-c", script, binary, file], None)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("ApiKey default/invoices (account billing): create"),
        "{shown}"
    );
}

/// An ApiKey that names the key a new SubAccount is created with (its credential key) is that
/// key: `plan` says it comes with the SubAccount, `apply` makes no second key and reports it
/// created with its id; its value can be written; the next plan finds nothing to do.
#[tokio::test]
async fn the_key_a_new_sub_account_is_created_with_is_not_created_twice() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let secrets = tempfile::tempdir().unwrap();
    let file = dir.path().join("tenant.yaml");
    std::fs::write(
        &file,
        "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: tenant}\nspec: {credentialKeyName: tenant-mail}\n---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: tenant-mail}\nspec:\n  subAccountRef: {name: tenant}\n  secretName: tenant-mail-key\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let key_entry = |doc: &serde_json::Value| {
        (doc["resources"].as_array().unwrap().iter())
            .find(|r| r["kind"] == "ApiKey")
            .cloned()
            .unwrap()
    };

    let out = run_binary(&["plan", "-f", file, "-o", "json"], Some(&sim)).await;
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let key = key_entry(&doc);
    assert_eq!(key["action"], "create", "{doc}");
    assert!(
        key["notes"].to_string().contains("created with SubAccount"),
        "{key}"
    );
    assert!(key.get("steps").is_none(), "no call of its own: {key}");

    let out = run_binary(&["apply", "-f", file, "-o", "json"], Some(&sim)).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let key = key_entry(&doc);
    assert_eq!(key["result"], "created", "{key}");
    let state = sim.snapshot();
    let sub = (state.sub_accounts.iter())
        .find(|s| s.name == "tenant")
        .unwrap();
    let keys: Vec<_> = (state.api_keys.iter())
        .filter(|k| k.sub_account_id == sub.id)
        .collect();
    assert_eq!(keys.len(), 1, "one key in the sub account: {keys:?}");
    assert_eq!(keys[0].name, "tenant-mail");
    assert_eq!(key["id"], keys[0].id, "{key}");

    // Its value, written by the next apply (which finds nothing to change).
    let args = ["apply", "-f", file, "--secrets-dir"];
    let secrets_dir = secrets.path().to_str().unwrap();
    let out = run_binary(&[&args[..], &[secrets_dir]].concat(), Some(&sim)).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let written = std::fs::read_to_string(secrets.path().join("default/tenant-mail-key/apiKey"));
    assert_eq!(
        written.unwrap(),
        keys[0].key,
        "the created key's value is written"
    );

    let out = run_binary(&["plan", "-f", file, "-o", "json"], Some(&sim)).await;
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["summary"],
        serde_json::json!({"create": 0, "update": 0, "unchanged": 2, "paused": 0, "observe": 0, "error": 0})
    );

    // destroy deletes it under its deletion policy, and says that the SubAccount, kept
    // (deactivated), loses its credential with it.
    let out = run_binary(&["destroy", "-f", file, "-o", "json"], Some(&sim)).await;
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let key = key_entry(&doc);
    assert_eq!(key["action"], "delete", "{doc}");
    let notes = key["notes"].to_string();
    assert!(
        notes.contains(
            "the operator's credential inside the sub account of SubAccount \\\"default/tenant\\\""
        ),
        "{key}"
    );
    assert!(notes.contains("CredentialMissing"), "{key}");

    // Left alone (ObserveOnly, or paused), the key is not deleted, and no note says it is.
    let text = std::fs::read_to_string(file).unwrap();
    let observed = format!("{text}  managementPolicy: ObserveOnly\n");
    let paused = text.replace(
        "metadata: {name: tenant-mail}\n",
        "metadata:\n  name: tenant-mail\n  annotations: {mailtarget.co/paused: \"true\"}\n",
    );
    for (left_alone, action) in [(observed, "observe"), (paused, "paused")] {
        std::fs::write(file, left_alone).unwrap();
        let out = run_binary(&["destroy", "-f", file, "-o", "json"], Some(&sim)).await;
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let key = key_entry(&doc);
        assert_eq!(key["action"], action, "{doc}");
        assert!(
            !key["notes"].to_string().contains("CredentialMissing"),
            "{key}"
        );
    }
}

/// An `ObserveOnly` key inside a sub account the same `apply` creates stays observed: `apply`
/// creates no key for it (none of that name is there) and changes none (the key the sub
/// account was created with, observed under its name, keeps its allowed IPs).
#[tokio::test]
async fn an_observed_key_inside_a_new_sub_account_is_neither_created_nor_changed() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tenant.yaml");
    std::fs::write(
        &file,
        "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: tenant}\nspec: {credentialKeyName: tenant-mail}\n---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: watch}\nspec:\n  subAccountRef: {name: tenant}\n  secretName: watch-key\n  managementPolicy: ObserveOnly\n---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: tenant-mail}\nspec:\n  subAccountRef: {name: tenant}\n  secretName: tenant-mail-key\n  allowedIps: [10.1.1.1]\n  managementPolicy: ObserveOnly\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();

    let out = run_binary(&["apply", "-f", file, "-o", "json"], Some(&sim)).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for name in ["watch", "tenant-mail"] {
        let entry = (doc["resources"].as_array().unwrap().iter())
            .find(|r| r["name"] == name)
            .unwrap();
        assert_eq!(entry["result"], "observe", "{entry}");
    }
    let state = sim.snapshot();
    let sub = (state.sub_accounts.iter()).find(|s| s.name == "tenant");
    let sub = sub.expect("the SubAccount is created");
    let keys: Vec<_> = (state.api_keys.iter())
        .filter(|k| k.sub_account_id == sub.id)
        .collect();
    assert_eq!(keys.len(), 1, "only the key it was created with: {keys:?}");
    assert_eq!(keys[0].name, "tenant-mail");
    assert!(keys[0].allowed_ip.is_empty(), "unchanged: {keys:?}");
}

/// An external-id on the key a new sub account is created with (its credential, which the
/// SubAccount names, so that a resource of its namespace may manage it) names nothing that can
/// exist (the sub account does not yet): refused at plan time, so `apply` writes nothing, not even the
/// sub account.
#[tokio::test]
async fn an_external_id_on_a_new_sub_accounts_key_is_refused_before_any_write() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let text = "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata:\n  name: sa\nspec: {credentialKeyName: mailtarget-operator}\n---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: cred\n  annotations:\n    mailtarget.co/external-id: \"5\"\nspec:\n  name: mailtarget-operator\n  secretName: s\n  subAccountRef:\n    name: sa\n";
    let out = run_manifest("plan", dir.path(), "cred.yaml", text, &sim).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("names API key 5"), "{shown}");
    let out = run_manifest("apply", dir.path(), "cred.yaml", text, &sim).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(wrote_nothing(&sim), "{shown}");
}

/// With `-o json`, an error that stops the run before any plan (invalid manifests, a service
/// that cannot be reached) is still a JSON document on standard output, `{"error": {...}}`, with
/// each manifest problem's file, document, object and field, so that a pipeline reading the
/// output (`| jq`) sees why; the text stays on standard error.
#[tokio::test]
async fn json_output_reports_errors_that_stop_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    std::fs::write(
        &file,
        format!("{HEADER_DOMAIN}spec:\n  domain: Example.com\n  bogus: 1\n"),
    )
    .unwrap();
    let sim = simulator().await;
    let args = ["plan", "-o", "json", "-f", file.to_str().unwrap()];
    let out = run_binary(&args, Some(&sim)).await;
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", output_text(&out)));
    let error = &json["error"];
    assert_eq!(error["exitCode"], 2, "{json}");
    let problems = error["problems"].as_array().expect("problems");
    let fields: Vec<&str> = problems
        .iter()
        .filter_map(|p| p["field"].as_str())
        .collect();
    assert_eq!(fields, ["spec.domain", "spec.bogus"], "{json}");
    assert_eq!(problems[0]["file"], file.to_str().unwrap(), "{json}");
    assert_eq!(problems[0]["document"], 1, "{json}");
    assert_eq!(problems[0]["object"], "SendingDomain \"d\"", "{json}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("spec.bogus"));

    // A service that cannot be reached: exit 1, the message in JSON, and no key in it.
    let examples = single_account_examples();
    let path = examples.path().to_str().unwrap();
    let unreachable = "http://127.0.0.1:9";
    for command in ["plan", "apply"] {
        let args = [command, "-o", "json", "-f", path, "--api-url", unreachable];
        let out = run_binary(&args, Some(&sim)).await;
        assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", output_text(&out)));
        let message = json["error"]["message"].as_str().expect("message");
        assert!(message.contains("127.0.0.1:9"), "{json}");
        assert!(!message.contains(KEY), "{json}");
        assert_eq!(json["error"]["exitCode"], 1, "{json}");
    }
}

/// The arguments of `command` on `file` as CI runs it: `apply` writing under `secrets_dir`,
/// `destroy` unattended.
fn as_in_ci<'a>(command: &'a str, file: &'a str, secrets_dir: &'a str) -> Vec<&'a str> {
    let mut args = vec![command, "-f", file];
    match command {
        "apply" => args.extend(["--secrets-dir", secrets_dir]),
        "destroy" => args.push("--auto-approve"),
        _ => {}
    }
    args
}

/// The operator's credential inside a sub account is no tenant's, in `plan`, `apply` and
/// `destroy` as in a cluster: an ApiKey placed inside the sub account that names it (by name,
/// or by external-id) is refused as `CredentialReserved` before any write, also before the sub
/// account exists; one outside it (no subAccountRef) reaches the company's keys only, so its
/// external-id names nothing; a resource of the SubAccount's own namespace may manage the
/// credential only when the SubAccount names it (`spec.credentialKeyName`).
#[tokio::test]
async fn the_credential_is_reserved_in_the_cli() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let platform = std::fs::read_to_string(examples().join("tenants/10-platform.yaml")).unwrap();
    let key = |name: &str, annotations: &str| {
        format!(
            "---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: grab\n  namespace: team-a\n{annotations}spec:\n  name: {name}\n  secretName: grabbed\n  subAccountRef: {{name: tenant-a, namespace: platform}}\n"
        )
    };
    // Before the sub account exists: the key it would be created with is not handed out.
    let text = platform.clone() + &key("mailtarget-operator", "");
    let out = run_manifest("plan", dir.path(), "grab.yaml", &text, &sim).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("CredentialReserved"), "{shown}");
    assert!(wrote_nothing(&sim), "{shown}");

    let out = run_manifest("apply", dir.path(), "platform.yaml", &platform, &sim).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let state = sim.snapshot();
    let tenant_a = state
        .sub_accounts
        .iter()
        .find(|s| s.name == "tenant-a")
        .unwrap();
    let credential = (state.api_keys.iter())
        .find(|k| k.sub_account_id == tenant_a.id && k.name == "mailtarget-operator")
        .expect("the credential");
    let by_id = format!(
        "  annotations:\n    mailtarget.co/external-id: \"{}\"\n",
        credential.id
    );
    sim.clear_request_log();
    let secrets = dir.path().join("secrets");
    let secrets_dir = secrets.to_str().unwrap();
    for (case, text) in [
        (
            "by name",
            platform.clone() + &key("mailtarget-operator", ""),
        ),
        ("by external-id", platform.clone() + &key("other", &by_id)),
    ] {
        for command in ["plan", "apply", "destroy"] {
            let file = dir.path().join("grab.yaml");
            std::fs::write(&file, &text).unwrap();
            let args = as_in_ci(command, file.to_str().unwrap(), secrets_dir);
            let out = run_binary(&args, Some(&sim)).await;
            let shown = output_text(&out);
            assert_eq!(out.status.code(), Some(1), "{case}, {command}: {shown}");
            assert!(
                shown.contains("CredentialReserved"),
                "{case}, {command}: {shown}"
            );
            assert!(!shown.contains(credential.key.as_str()), "{shown}");
            assert!(
                !secrets.join("team-a/grabbed").exists(),
                "{case}, {command}"
            );
        }
    }
    // From outside the sub account (no subAccountRef) only the company's own keys are reached:
    // `plan` and `apply` find nothing the external-id names, `destroy` finds the key absent.
    let outside = key("other", &by_id).replace(
        "  subAccountRef: {name: tenant-a, namespace: platform}\n",
        "",
    );
    for (command, code, said) in [
        ("plan", 1, "does not exist where this resource may look"),
        ("apply", 1, "does not exist where this resource may look"),
        ("destroy", 0, "absent"),
    ] {
        let file = dir.path().join("outside.yaml");
        std::fs::write(&file, &outside).unwrap();
        let args = as_in_ci(command, file.to_str().unwrap(), secrets_dir);
        let out = run_binary(&args, Some(&sim)).await;
        let shown = output_text(&out);
        assert_eq!(out.status.code(), Some(code), "{command}: {shown}");
        assert!(shown.contains(said), "{command}: {shown}");
        assert!(!secrets.join("team-a/grabbed").exists(), "{command}");
    }
    assert!(wrote_nothing(&sim), "{:?}", sim.request_log());

    // The SubAccount's own namespace may manage a credential the SubAccount names.
    let named = platform.replacen(
        "spec:\n  name: tenant-a\n",
        "spec:\n  name: tenant-a\n  credentialKeyName: mailtarget-operator\n",
        1,
    ) + "---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: ops\n  namespace: platform\nspec:\n  name: mailtarget-operator\n  secretName: ops\n  subAccountRef: {name: tenant-a}\n";
    let out = run_manifest("plan", dir.path(), "named.yaml", &named, &sim).await;
    let shown = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(shown.contains("ApiKey platform/ops: unchanged"), "{shown}");
}

/// A 401 answered to the credential of a sub account (deleted, or its allowed IPs exclude this
/// machine) is told as that credential's refusal, as the operator's `CredentialRefused` tells
/// it: the API key by name, the SubAccount, and what to do; not as a refusal of the company key
/// the run was given.
#[tokio::test]
async fn a_refused_sub_account_credential_is_named() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tenant.yaml");
    let manifest = |ips: &str| {
        format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {{name: tenant}}\nspec: {{name: tenant}}\n---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {{name: mail}}\nspec:\n  subAccountRef: {{name: tenant}}\n  secretName: mail-key\n  allowedIps: [{ips}]\n"
        )
    };
    std::fs::write(&file, manifest("10.1.1.1")).unwrap();
    let file = file.to_str().unwrap();
    let out = run_binary(&["apply", "-f", file], Some(&sim)).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    // The credential may now be used from another address only.
    let state = sim.snapshot();
    let credential = (state.api_keys.iter())
        .find(|k| k.name == "mailtarget-operator")
        .unwrap();
    let update = mailtarget_operator::api::UpdateApiKey {
        allowed_ip: Some("10.9.9.9".into()),
        ..Default::default()
    };
    client(&sim)
        .update_api_key(credential.id, &update)
        .await
        .unwrap();

    std::fs::write(file, manifest("10.2.2.2")).unwrap();
    for format in ["text", "json"] {
        let out = run_binary(&["apply", "-f", file, "-o", format], Some(&sim)).await;
        assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
        let text = output_text(&out);
        for said in [
            "the service refused API key",
            "\\\"mailtarget-operator\\\"",
            "SubAccount \\\"default/tenant\\\"",
            "spec.credentialKeyName",
        ] {
            let said = if format == "json" {
                said.to_string()
            } else {
                said.replace("\\\"", "\"")
            };
            assert!(text.contains(&said), "{format}: says {said}: {text}");
        }
        assert!(!text.contains(&credential.key), "no key value shown");
    }
}

/// A SubAccount whose sub account has no key of its credential's name (its `spec.apiKey`
/// renamed after the create, which the interface cannot apply) says so in `plan`, as the
/// operator's `CredentialMissing` does, before anything is placed inside it: text and JSON.
#[tokio::test]
async fn a_missing_credential_is_noted_on_its_sub_account() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("team.yaml");
    let manifest = |first: &str| {
        format!(
            "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {{name: team}}\nspec:\n  apiKey: {{name: {first}, secretName: first-key}}\n"
        )
    };
    std::fs::write(&file, manifest("first")).unwrap();
    let file = file.to_str().unwrap();
    let out = run_binary(&["apply", "-f", file], Some(&sim)).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let out = run_binary(&["plan", "-f", file], Some(&sim)).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert!(!output_text(&out).contains("CredentialMissing"));

    std::fs::write(file, manifest("second")).unwrap();
    let out = run_binary(&["plan", "-f", file], Some(&sim)).await;
    let text = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "a note, no error: {text}");
    assert!(text.contains("CredentialMissing"), "{text}");
    assert!(text.contains("no API key named \"second\""), "{text}");
    let out = run_binary(&["plan", "-f", file, "-o", "json"], Some(&sim)).await;
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let notes = doc["resources"][0]["notes"].to_string();
    assert!(notes.contains("CredentialMissing"), "{doc}");
}

/// An external id naming a sending domain of another name is refused before any call that
/// writes, by plan, apply and destroy: a domain cannot be renamed, so the annotation names
/// another object than the resource's. Before, it was a note: apply shared that domain and
/// wrote its DKIM private key under the resource's Secret name, and destroy deleted it.
#[tokio::test]
async fn an_external_id_naming_another_domain_is_refused() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let keep = "apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata: {name: keep}\nspec: {domain: keep.example.com}\n";
    let out = run_manifest("apply", dir.path(), "keep.yaml", keep, &sim).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let id = sim.snapshot().sending_domains[0].id;
    let wrong = format!(
        "apiVersion: mailtarget.co/v1alpha1\nkind: SendingDomain\nmetadata:\n  name: other\n  annotations: {{mailtarget.co/external-id: \"{id}\"}}\nspec: {{domain: other.example.com, shared: true}}\n"
    );
    let file = dir.path().join("wrong.yaml");
    std::fs::write(&file, wrong).unwrap();
    let file = file.to_str().unwrap();
    sim.clear_request_log();
    for args in [
        &["plan", "-f", file][..],
        &["apply", "-f", file],
        &["destroy", "-f", file, "--auto-approve"],
    ] {
        let out = run_binary(args, Some(&sim)).await;
        let text = output_text(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {text}");
        assert!(text.contains("cannot be renamed"), "{args:?}: {text}");
    }
    assert!(wrote_nothing(&sim), "{:?}", sim.request_log());
    assert!(
        (sim.snapshot().sending_domains.iter()).any(|d| d.id == id),
        "the other domain is not deleted"
    );
}
