//! End to end: the real `mailtarget-operator` binary (both `simulator` and `run`) driven by the
//! real kubectl, against the test API server — or against a real cluster when `E2E_KUBECONFIG`
//! names one (each run in its own namespace).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mailtarget_operator::api::{
    Client, ClientConfig, ListApiKeysQuery, ListSendingDomainsQuery, ListSubAccountsQuery,
};
use mailtarget_test_apiserver::TestCluster;

const BIN: &str = env!("CARGO_BIN_EXE_mailtarget-operator");
const KEY: &str = "e2e-company-key";
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A child process killed when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `mailtarget-operator simulator` on a free port and returns it with its URL, read from
/// the one line it prints when ready (bounded wait).
fn start_simulator() -> (Process, String) {
    let mut child = Command::new(BIN)
        .args([
            "simulator",
            "--listen",
            "127.0.0.1:0",
            "--api-key",
            KEY,
            "--verify-after-calls",
            "2",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("simulator starts");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("simulator printed its address");
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .expect("the ready line")
        .to_string();
    (Process(child), url)
}

fn client(url: &str) -> Client {
    Client::new(ClientConfig::new(
        url.parse().unwrap(),
        format!("{url}/v1").parse().unwrap(),
        KEY.to_string().into(),
    ))
    .unwrap()
}

fn ok(out: std::process::Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `kubectl apply -f crds/ -f examples/`, `kubectl wait --for=condition=Ready` on every example,
/// `kubectl get` with printer columns, then `kubectl delete` of every example, with the service's
/// state checked after each step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn examples_with_kubectl_and_the_binary() {
    if !TestCluster::require_kubectl("examples_with_kubectl_and_the_binary") {
        return;
    }
    let cluster = TestCluster::start().await.expect("cluster");
    let ns = cluster.namespace().to_string();
    let (_sim, url) = start_simulator();
    let api = client(&url);

    ok(
        cluster.kubectl(["apply", "-f", &format!("{ROOT}/crds/")]),
        "apply crds",
    );
    let operator = Process(
        Command::new(BIN)
            .args([
                "run",
                "--namespace",
                &ns,
                "--metrics-addr",
                "127.0.0.1:0",
                "--verify-first-interval",
                "200ms",
                "--verify-max-interval",
                "1s",
            ])
            .env("KUBECONFIG", cluster.kubeconfig_path())
            .env("MAILTARGET_API_KEY", KEY)
            .env("MAILTARGET_API_URL", &url)
            .env("MAILTARGET_TRANSMISSION_URL", format!("{url}/v1"))
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("operator starts"),
    );

    ok(
        cluster.kubectl(["apply", "-f", &format!("{ROOT}/examples/")]),
        "apply examples",
    );
    let all = [
        "subaccount/team-a",
        "apikey/ci-sender",
        "apikey/team-a-sender",
        "sendingdomain/mail-example-com",
        "sendingdomain/news-example-com",
    ];
    let mut wait = vec!["wait", "--for=condition=Ready", "--timeout=50s"];
    wait.extend(all);
    ok(cluster.kubectl(wait), "wait Ready");

    let subs = api
        .list_all_sub_accounts(&ListSubAccountsQuery::default())
        .await
        .unwrap();
    let keys = api
        .list_all_api_keys(&ListApiKeysQuery::default())
        .await
        .unwrap();
    let domains = api
        .list_all_sending_domains(&ListSendingDomainsQuery::default())
        .await
        .unwrap();
    assert_eq!(subs.len(), 1);
    let mut key_names: Vec<&str> = keys.iter().map(|k| k.name.as_str()).collect();
    key_names.sort();
    assert_eq!(key_names, ["ci-sender", "team-a-sender"]);
    assert_eq!(domains.len(), 2);
    assert!(domains.iter().all(|d| d.status == "verified"));
    assert!(
        domains
            .iter()
            .any(|d| d.domain == "news.example.com" && d.assignment == "shared")
    );

    let table = ok(
        cluster.kubectl(["get", "sendingdomains"]),
        "get sendingdomains",
    );
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "DOMAIN", "SPF", "DKIM", "CNAME", "READY", "AGE"],
        "{table}"
    );
    assert!(
        table.contains("mail.example.com") && table.contains("true"),
        "{table}"
    );
    let secret = ok(
        cluster.kubectl([
            "get",
            "secret",
            "ci-mailtarget-key",
            "-o",
            "jsonpath={.data.apiKey}",
        ]),
        "get secret",
    );
    assert!(!secret.is_empty());

    ok(
        cluster.kubectl([
            "delete",
            "-f",
            &format!("{ROOT}/examples/"),
            "--timeout=50s",
        ]),
        "delete examples",
    );
    let left = ok(
        cluster.kubectl(["get", "subaccounts,apikeys,sendingdomains", "-o", "name"]),
        "get after delete",
    );
    assert!(left.trim().is_empty(), "left: {left}");
    let subs = api
        .list_all_sub_accounts(&ListSubAccountsQuery::default())
        .await
        .unwrap();
    assert_eq!(subs[0].status, "inactive", "deletionPolicy Deactivate");
    let keys = api
        .list_all_api_keys(&ListApiKeysQuery::default())
        .await
        .unwrap();
    assert_eq!(
        keys.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(),
        ["team-a-sender"],
        "ci-sender deleted, team-a-sender orphaned"
    );
    let domains = api
        .list_all_sending_domains(&ListSendingDomainsQuery::default())
        .await
        .unwrap();
    assert_eq!(
        domains
            .iter()
            .map(|d| d.domain.as_str())
            .collect::<Vec<_>>(),
        ["news.example.com"],
        "mail deleted, news orphaned"
    );
    drop(operator);
    cluster.cleanup().await;
}
