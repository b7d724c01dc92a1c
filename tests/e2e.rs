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
    let operator = start_operator(&cluster, &url, &[&ns]);

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
    assert_eq!(
        key_names,
        ["ci-sender", "mailtarget-operator", "team-a-sender"],
        "the company key, and inside team-a the operator's credential and the key created there"
    );
    assert_eq!(domains.len(), 2);
    assert!(domains.iter().all(|d| d.status == "verified"));
    assert!(
        domains
            .iter()
            .any(|d| d.domain == "news.example.com" && d.assignment == "shared")
    );

    // `kubectl get` tables: the printer columns, each header once.
    let header = |table: &str| -> Vec<String> {
        table
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    let subs_table = ok(cluster.kubectl(["get", "subaccounts"]), "get subaccounts");
    assert_eq!(
        header(&subs_table),
        ["NAME", "SERVICE-NAME", "ID", "STATUS", "READY", "AGE"],
        "{subs_table}"
    );
    assert!(subs_table.contains("team-a"), "{subs_table}");
    let keys_table = ok(cluster.kubectl(["get", "apikeys"]), "get apikeys");
    assert_eq!(
        header(&keys_table),
        [
            "NAME",
            "SERVICE-NAME",
            "ID",
            "PERMISSION",
            "SUBACCOUNT",
            "SECRET",
            "READY",
            "AGE"
        ],
        "{keys_table}"
    );
    assert!(keys_table.contains("ci-sender"), "{keys_table}");
    let table = ok(
        cluster.kubectl(["get", "sendingdomains"]),
        "get sendingdomains",
    );
    assert_eq!(
        header(&table),
        ["NAME", "DOMAIN", "SPF", "DKIM", "CNAME", "READY", "AGE"],
        "{table}"
    );
    assert!(
        table.contains("mail.example.com") && table.contains("true"),
        "{table}"
    );
    // The example Account has no Secret here: the operator says which one is missing, and
    // `kubectl get accounts` shows the account columns.
    ok(
        cluster.kubectl([
            "wait",
            "--for=jsonpath={.status.conditions[?(@.type==\"Ready\")].reason}=CredentialsNotFound",
            "--timeout=50s",
            "account/second-company",
        ]),
        "wait for the Account's condition",
    );
    let accounts_table = ok(cluster.kubectl(["get", "accounts"]), "get accounts");
    assert_eq!(
        header(&accounts_table),
        ["NAME", "SCOPE", "SUBACCOUNT", "READY", "REASON", "AGE"],
        "{accounts_table}"
    );
    assert!(
        accounts_table.contains("second-company") && accounts_table.contains("CredentialsNotFound"),
        "{accounts_table}"
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
        ["mailtarget-operator", "team-a-sender"],
        "ci-sender deleted, team-a-sender orphaned, the sub account's credential kept"
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

/// `kubectl apply -f examples/tenants/` (Namespaces, the platform's SubAccounts, each team's
/// domain and keys inside its sub account), `kubectl wait --for=condition=Ready` on every
/// object, the service's state checked (each team's objects inside its own sub account), then
/// `kubectl delete` of the SubAccounts before the objects inside them, then of the namespaces:
/// nothing is left stuck.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_with_kubectl() {
    if !TestCluster::require_kubectl("tenants_with_kubectl") {
        return;
    }
    let cluster = TestCluster::start().await.expect("cluster");
    let (_sim, url) = start_simulator();
    let api = client(&url);
    ok(
        cluster.kubectl(["apply", "-f", &format!("{ROOT}/crds/")]),
        "apply crds",
    );
    let operator = start_operator(&cluster, &url, &["platform", "team-a", "team-b"]);
    // The helper passes the test's namespace with -n, so each file goes with its own.
    let files = [
        ("platform", "00-namespaces.yaml"),
        ("platform", "10-platform.yaml"),
        ("team-a", "20-team-a.yaml"),
        ("team-b", "20-team-b.yaml"),
    ];
    let tenants = |verb: &str, order: &mut dyn Iterator<Item = &(&str, &str)>| {
        for (ns, file) in order {
            let path = format!("{ROOT}/examples/tenants/{file}");
            let mut args = vec![verb, "-n", ns, "-f", &path];
            if verb == "delete" {
                args.push("--timeout=90s");
            }
            ok(cluster.kubectl(args), &format!("{verb} {file}"));
        }
    };
    tenants("apply", &mut files.iter());
    let wait = |ns: &str, objects: &[&str]| {
        let mut args = vec!["wait", "--for=condition=Ready", "--timeout=50s", "-n", ns];
        args.extend(objects);
        ok(cluster.kubectl(args), &format!("wait Ready in {ns}"));
    };
    wait("platform", &["subaccount/tenant-a", "subaccount/tenant-b"]);
    for team in ["team-a", "team-b"] {
        wait(
            team,
            &["sendingdomain/mail", "apikey/sender", "apikey/analytics"],
        );
    }
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
    for team in ["a", "b"] {
        let sub = subs
            .iter()
            .find(|s| s.name == format!("tenant-{team}"))
            .expect("sub account");
        let mut inside: Vec<&str> = keys
            .iter()
            .filter(|k| k.sub_account_id == sub.id)
            .map(|k| k.name.as_str())
            .collect();
        inside.sort_unstable();
        let (analytics, sender) = (
            format!("team-{team}-analytics"),
            format!("team-{team}-sender"),
        );
        assert_eq!(
            inside,
            ["mailtarget-operator", analytics.as_str(), sender.as_str()]
        );
        let domain = domains
            .iter()
            .find(|d| d.domain == format!("mail.team-{team}.example.com"))
            .expect("domain");
        assert_eq!(domain.sub_account_id, sub.id);
    }
    assert_eq!(keys.len(), 6, "nothing outside the sub accounts");

    // The SubAccounts first, then the teams' objects (whose cleanup then goes through the
    // company key), then the namespaces: nothing is left stuck.
    let order = [files[1], files[2], files[3], files[0]];
    tenants("delete", &mut order.iter());
    let domains = api
        .list_all_sending_domains(&ListSendingDomainsQuery::default())
        .await
        .unwrap();
    assert!(domains.is_empty(), "the domains deleted: {domains:?}");
    let keys = api
        .list_all_api_keys(&ListApiKeysQuery::default())
        .await
        .unwrap();
    let left: Vec<&str> = keys.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(
        left,
        ["mailtarget-operator", "mailtarget-operator"],
        "the teams' keys deleted; the sub accounts (deactivated) keep the operator's credentials"
    );
    drop(operator);
    cluster.cleanup().await;
}

/// The CRD upgrade path of README "Accounts": an install with only the three managed kinds'
/// CRDs (`tests/upgrade/three-kinds/`, `crds/` as it was before the account kinds) and objects
/// made under them runs the new operator: it reconciles the managed kinds with the flags'
/// `default` account while `/readyz` names the account kinds as missing; then
/// `kubectl apply -f crds/` (the step README asks for before `helm upgrade`, as Helm installs no
/// CRD on upgrade) replaces the three CRDs and adds the account kinds, and without a restart the
/// operator is ready, an `Account` is checked and used, a key is created inside the release-0.1
/// SubAccount, and the objects made before the upgrade stay Ready with nothing re-created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_upgrade_from_the_three_kinds() {
    if !TestCluster::require_kubectl("crd_upgrade_from_the_three_kinds") {
        return;
    }
    let cluster = TestCluster::start().await.expect("cluster");
    if cluster.emulator().is_none() {
        // On a real cluster the test would put old CRDs over the cluster's: not done there.
        println!("crd_upgrade_from_the_three_kinds: skipped on a real cluster (E2E_KUBECONFIG)");
        cluster.cleanup().await;
        return;
    }
    let ns = cluster.namespace().to_string();
    let (_sim, url) = start_simulator();
    let api = client(&url);
    ok(
        cluster.kubectl(["apply", "-f", &format!("{ROOT}/tests/upgrade/three-kinds/")]),
        "apply the three-kinds CRDs",
    );
    let before = "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: legacy}\nspec:\n  apiKey: {name: legacy-first, secretName: legacy-first-key}\n---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: ci}\nspec: {name: ci, secretName: ci-key}\n";
    ok(
        cluster.kubectl_with_input(["apply", "-n", &ns, "-f", "-"], before.as_bytes()),
        "apply objects under the old CRDs",
    );
    let port = free_port();
    let _operator = start_operator_on(&cluster, &url, &[&ns], port);
    let wait = |objects: &[&str]| {
        let mut args = vec!["wait", "--for=condition=Ready", "--timeout=50s", "-n", &ns];
        args.extend(objects);
        ok(cluster.kubectl(args), &format!("wait Ready {objects:?}"));
    };
    wait(&["subaccount/legacy", "apikey/ci"]);
    let (code, body) = http_get(port, "/readyz").await.expect("/readyz answers");
    assert_ne!(code, 200, "not ready without the account kinds: {body}");
    assert!(body.contains("clusteraccounts.mailtarget.co"), "{body}");

    ok(
        cluster.kubectl(["apply", "-f", &format!("{ROOT}/crds/")]),
        "kubectl apply -f crds/ over the three-kinds CRDs",
    );
    wait_http_ok(port, "/readyz").await;
    let after = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: billing-key}}\nstringData: {{apiKey: {KEY}}}\n---\napiVersion: mailtarget.co/v1alpha1\nkind: Account\nmetadata: {{name: billing}}\nspec:\n  credentials: {{secretRef: {{name: billing-key}}}}\n  apiUrl: {url}\n  transmissionUrl: {url}/v1\n  scope: Company\n---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {{name: billed}}\nspec:\n  secretName: billed-key\n  accountRef: {{kind: Account, name: billing}}\n---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {{name: inside}}\nspec:\n  secretName: inside-key\n  subAccountRef: {{name: legacy}}\n"
    );
    ok(
        cluster.kubectl_with_input(["apply", "-n", &ns, "-f", "-"], after.as_bytes()),
        "apply objects of the new kinds and fields",
    );
    wait(&["account/billing", "apikey/billed", "apikey/inside"]);
    wait(&["subaccount/legacy", "apikey/ci"]);
    let subs = api
        .list_all_sub_accounts(&ListSubAccountsQuery::default())
        .await
        .unwrap();
    assert_eq!(
        subs.len(),
        1,
        "the sub account made before the upgrade, once"
    );
    let keys = api
        .list_all_api_keys(&ListApiKeysQuery::default())
        .await
        .unwrap();
    let mut names: Vec<(&str, bool)> = keys
        .iter()
        .map(|k| (k.name.as_str(), k.sub_account_id == subs[0].id))
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            ("billed", false),
            ("ci", false),
            ("inside", true),
            ("legacy-first", true)
        ],
        "each key once; the new one inside the release-0.1 sub account (its first key is the credential)"
    );
    cluster.cleanup().await;
}

/// Starts `mailtarget-operator run` watching `namespaces`, on the simulator at `url`, with a
/// quick `verify-txt` schedule.
fn start_operator(cluster: &TestCluster, url: &str, namespaces: &[&str]) -> Process {
    start_operator_on(cluster, url, namespaces, 0)
}

/// [`start_operator`] serving `/metrics` and `/readyz` on `port` (0: any free port).
fn start_operator_on(cluster: &TestCluster, url: &str, namespaces: &[&str], port: u16) -> Process {
    let mut command = Command::new(BIN);
    let addr = format!("127.0.0.1:{port}");
    command.args(["run", "--metrics-addr", &addr]);
    for ns in namespaces {
        command.args(["--namespace", ns]);
    }
    command
        .args([
            "--verify-first-interval",
            "200ms",
            "--verify-max-interval",
            "1s",
        ])
        .env("KUBECONFIG", cluster.kubeconfig_path())
        .env("MAILTARGET_API_KEY", KEY)
        .env("MAILTARGET_API_URL", url)
        .env("MAILTARGET_TRANSMISSION_URL", format!("{url}/v1"))
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    Process(command.spawn().expect("operator starts"))
}

/// A free local port (bound, then released for the operator to take).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `mailtarget-operator run --leader-elect` as replica `identity`.
fn start_replica(cluster: &TestCluster, url: &str, identity: &str, port: u16) -> Process {
    Process(
        Command::new(BIN)
            .args([
                "run",
                "--namespace",
                cluster.namespace(),
                "--metrics-addr",
                &format!("127.0.0.1:{port}"),
            ])
            .args([
                "--leader-elect",
                "--leader-election-namespace",
                cluster.namespace(),
                "--leader-election-lease-duration",
                "3s",
            ])
            .env("KUBECONFIG", cluster.kubeconfig_path())
            .env("POD_NAME", identity)
            .env("MAILTARGET_API_KEY", KEY)
            .env("MAILTARGET_API_URL", url)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("replica starts"),
    )
}

/// GETs `path` on a local port; `None` while nothing answers.
async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let resp = reqwest::get(format!("http://127.0.0.1:{port}{path}"))
        .await
        .ok()?;
    let status = resp.status().as_u16();
    Some((status, resp.text().await.unwrap_or_default()))
}

/// Waits (bounded) until `path` on `port` answers 200.
async fn wait_http_ok(port: u16, path: &str) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some((200, body)) = http_get(port, path).await {
            return body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{path} on port {port} never answered 200"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn reconciles(metrics: &str) -> u64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("mailtarget_reconciles_total{"))
        .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
        .sum::<f64>() as u64
}

fn key_manifest(name: &str) -> String {
    format!(
        "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {{name: {name}}}\nspec: {{secretName: {name}-key}}\n"
    )
}

/// Two replicas with leader election: only the leader reconciles, serves metrics and health,
/// the standby takes over when the leader dies, and SIGTERM stops a replica cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_election_metrics_and_graceful_shutdown() {
    if !TestCluster::require_kubectl("leader_election_metrics_and_graceful_shutdown") {
        return;
    }
    let cluster = TestCluster::start().await.expect("cluster");
    let (_sim, url) = start_simulator();
    ok(
        cluster.kubectl(["apply", "-f", &format!("{ROOT}/crds/")]),
        "apply crds",
    );
    let (port_a, port_b) = (free_port(), free_port());
    let leader = start_replica(&cluster, &url, "replica-a", port_a);
    wait_http_ok(port_a, "/healthz").await;
    wait_http_ok(port_a, "/readyz").await;
    ok(
        cluster.kubectl_with_input(["apply", "-f", "-"], key_manifest("first").as_bytes()),
        "apply first",
    );
    ok(
        cluster.kubectl([
            "wait",
            "--for=condition=Ready",
            "apikey/first",
            "--timeout=30s",
        ]),
        "first Ready",
    );

    let mut standby = start_replica(&cluster, &url, "replica-b", port_b);
    wait_http_ok(port_b, "/readyz").await;
    ok(
        cluster.kubectl_with_input(["apply", "-f", "-"], key_manifest("second").as_bytes()),
        "apply second",
    );
    ok(
        cluster.kubectl([
            "wait",
            "--for=condition=Ready",
            "apikey/second",
            "--timeout=30s",
        ]),
        "second Ready",
    );
    let metrics_a = wait_http_ok(port_a, "/metrics").await;
    assert!(
        reconciles(&metrics_a) > 0,
        "the leader reconciles:\n{metrics_a}"
    );
    assert!(
        metrics_a
            .contains("mailtarget_api_requests_total{endpoint=\"POST /api-key\",code=\"201\",account=\"ClusterAccount/default\"}"),
        "{metrics_a}"
    );
    assert_eq!(
        reconciles(&wait_http_ok(port_b, "/metrics").await),
        0,
        "the standby does not reconcile"
    );

    drop(leader); // SIGKILL: the Lease is not released, the standby waits for it to expire.
    ok(
        cluster.kubectl_with_input(["apply", "-f", "-"], key_manifest("third").as_bytes()),
        "apply third",
    );
    ok(
        cluster.kubectl([
            "wait",
            "--for=condition=Ready",
            "apikey/third",
            "--timeout=40s",
        ]),
        "third Ready after failover",
    );
    assert!(
        reconciles(&wait_http_ok(port_b, "/metrics").await) > 0,
        "the standby took over"
    );

    let pid = standby.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = standby.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no exit within 20 s of SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(status.success(), "clean exit on SIGTERM: {status:?}");
    let keys = client(&url)
        .list_all_api_keys(&ListApiKeysQuery::default())
        .await
        .unwrap();
    assert_eq!(
        keys.len(),
        3,
        "each key created exactly once across replicas"
    );
    cluster.cleanup().await;
}
