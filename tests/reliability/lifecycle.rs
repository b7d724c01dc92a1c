//! The `mailtarget-operator run` process from start to exit, driven as a Pod's kubelet would:
//! `/readyz` without the CRDs (503 saying which are missing, an error in the log), and an exit
//! within bounds after SIGTERM whatever the Kubernetes API does (the CRDs missing, the API
//! unreachable, the API stalling every request).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use mailtarget_test_apiserver::{RequestFilter, TestApiServer, kubeconfig_yaml};

use crate::common::install_crds;

const BIN: &str = env!("CARGO_BIN_EXE_mailtarget-operator");

/// The bound on the exit after SIGTERM: the shutdown timeout (`--shutdown-timeout 2s`), 2 s to
/// release the Lease, 1 s for the runtime's blocking tasks, and slack for a loaded machine.
const EXIT_BOUND: Duration = Duration::from_secs(12);
/// Bound of every other wait.
const WAIT: Duration = Duration::from_secs(30);

/// A running operator process, killed when dropped; its stderr lines arrive on `log`.
struct Process {
    child: Child,
    port: u16,
    log: Receiver<String>,
    seen: Vec<String>,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Starts `mailtarget-operator run` with `kubeconfig`, at info level, with `extra` arguments;
/// the service address is never reached (no resource exists).
fn start(kubeconfig: &Path, extra: &[&str]) -> Process {
    let port = free_port();
    let mut child = Command::new(BIN)
        .args(["run", "--metrics-addr", &format!("127.0.0.1:{port}")])
        .args(["--shutdown-timeout", "2s"])
        .args(extra)
        .env_clear()
        .env("KUBECONFIG", kubeconfig)
        .env("MAILTARGET_API_KEY", "lifecycle-test-key")
        .env("MAILTARGET_API_URL", "http://127.0.0.1:9")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the operator starts");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, log) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Process {
        child,
        port,
        log,
        seen: Vec::new(),
    }
}

impl Process {
    /// `(status, body)` of GET `path`, `None` while nothing answers.
    async fn get(&self, path: &str) -> Option<(u16, String)> {
        // reqwest is built without a default TLS provider (plain HTTP here, but it asks).
        let _ = rustls::crypto::ring::default_provider().install_default();
        // Each attempt bounded: a server that accepts and never answers is "nothing answers".
        let response = reqwest::Client::new()
            .get(format!("http://127.0.0.1:{}{path}", self.port))
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .ok()?;
        let status = response.status().as_u16();
        Some((status, response.text().await.unwrap_or_default()))
    }

    /// Polls `path` every 100 ms (bounded by [`WAIT`]) until `check` holds for its answer.
    async fn wait_answer(&self, path: &str, check: impl Fn(u16, &str) -> bool) -> (u16, String) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let answer = self.get(path).await;
            if let Some((status, body)) = &answer
                && check(*status, body)
            {
                return (*status, body.clone());
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{path}: no expected answer within {WAIT:?}; last {answer:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits (bounded by [`WAIT`]) for a log line containing every one of `needles`.
    fn wait_log(&mut self, needles: &[&str]) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(line) = self
                .seen
                .iter()
                .find(|l| needles.iter().all(|n| l.contains(n)))
            {
                return line.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.log.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => panic!(
                    "no log line with {needles:?} within {WAIT:?}:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }

    /// Sends SIGTERM and asserts a clean exit within [`EXIT_BOUND`] (polling every 50 ms).
    async fn terminate_in_time(&mut self, case: &str) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "{case}: SIGTERM sent");
        let started = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break status;
            }
            assert!(
                started.elapsed() < EXIT_BOUND,
                "{case}: no exit within {EXIT_BOUND:?} of SIGTERM"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(status.success(), "{case}: clean exit: {status:?}");
    }
}

/// A kubeconfig file for `url` in `dir`.
fn kubeconfig(dir: &Path, url: &str) -> std::path::PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(&path, kubeconfig_yaml(url, "default")).expect("write kubeconfig");
    path
}

/// Without the CRDs the operator is not ready: `/readyz` answers 503 naming each missing CRD,
/// and the log says so at error level. Once the CRDs are installed it becomes ready by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_crds_the_operator_is_not_ready_and_says_why() {
    let server = TestApiServer::start().await.expect("test API server");
    let mut operator = start(server.kubeconfig_path(), &[]);
    let (status, body) = operator
        .wait_answer("/readyz", |_, body| body.contains("not established"))
        .await;
    assert_eq!(status, 503, "{body}");
    for crd in mailtarget_operator::crd::generate::all_crds() {
        let crd = kube::ResourceExt::name_any(&crd);
        assert!(body.contains(&crd), "{crd} named: {body}");
    }
    let line = operator.wait_log(&["ERROR", "CustomResourceDefinitions not established"]);
    assert!(line.contains("apikeys.mailtarget.co"), "{line}");

    install_crds(&server.client()).await;
    let (_, body) = operator
        .wait_answer("/readyz", |status, _| status == 200)
        .await;
    assert_eq!(body, "ok");
    operator.terminate_in_time("ready").await;
}

/// SIGTERM ends the process within the bound when the CRDs are missing, and when the
/// Kubernetes API cannot be reached at all (nothing listens at its address): in both cases the
/// watches retry forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_in_time_without_crds_or_api() {
    let server = TestApiServer::start().await.expect("test API server");
    let mut operator = start(server.kubeconfig_path(), &[]);
    operator
        .wait_answer("/readyz", |_, body| body.contains("not established"))
        .await;
    operator.terminate_in_time("CRDs missing").await;

    let dir = tempfile::tempdir().expect("temp dir");
    let closed = format!("http://127.0.0.1:{}", free_port());
    let mut operator = start(&kubeconfig(dir.path(), &closed), &[]);
    let (status, body) = operator
        .wait_answer("/readyz", |_, body| {
            body.contains("cannot reach the Kubernetes API")
        })
        .await;
    assert_eq!(status, 503, "{body}");
    operator.wait_log(&["ERROR", "cannot reach the Kubernetes API"]);
    operator.terminate_in_time("API unreachable").await;
}

/// Waits (bounded by [`WAIT`], polling every 50 ms) until the server has stalled more than
/// `before` requests.
async fn wait_stalled(server: &TestApiServer, before: u64, case: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while server.faults().stalled_requests() <= before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{case}: no request stalled within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// SIGTERM ends the process within the bound when the Kubernetes API accepts connections but
/// never answers: as the only replica (its watches hang), and as a candidate for the leader
/// Lease (its Lease requests hang). The signal is sent once a request of the process hangs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_in_time_with_the_api_stalling() {
    let server = TestApiServer::start().await.expect("test API server");
    install_crds(&server.client()).await;
    server.faults().stall(RequestFilter::any());
    for (case, extra) in [
        ("single replica", &[][..]),
        (
            "leader election",
            &[
                "--leader-elect",
                "--leader-election-namespace",
                "default",
                "--leader-election-lease-duration",
                "2s",
            ][..],
        ),
    ] {
        let before = server.faults().stalled_requests();
        let mut operator = start(server.kubeconfig_path(), extra);
        let (status, _) = operator.wait_answer("/healthz", |_, _| true).await;
        assert_eq!(status, 200, "{case}");
        wait_stalled(&server, before, case).await;
        operator.terminate_in_time(case).await;
    }
}
