//! [`TestCluster`]: the one entry point end-to-end tests use. With `E2E_KUBECONFIG` set it targets
//! that real cluster; otherwise it starts a [`TestApiServer`]. Either way each test gets a fresh
//! namespace `e2e-<random>`, a `kube::Client` defaulting to it, and a way to run the machine's
//! `kubectl` against it with a private `HOME` (so kubectl's discovery cache is never shared) and a
//! timeout.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, PostParams};

use crate::server::TestApiServer;

/// Upper bound on one kubectl run started by [`TestCluster::kubectl`].
pub const KUBECTL_TIMEOUT: Duration = Duration::from_secs(60);

enum Target {
    Emulated(Box<TestApiServer>),
    External { kubeconfig: PathBuf },
}

/// A cluster for one test: an emulated API server, or the real cluster named by `E2E_KUBECONFIG`.
pub struct TestCluster {
    target: Target,
    client: kube::Client,
    namespace: String,
    home: tempfile::TempDir,
    kubeconfig: PathBuf,
    cleaned: bool,
}

fn random_suffix() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..8)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

fn io_err(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

async fn create_namespace(client: &kube::Client, name: &str) -> std::io::Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/created-by": "mailtarget-e2e"}}
    }))
    .map_err(io_err)?;
    api.create(&PostParams::default(), &ns)
        .await
        .map_err(io_err)?;
    Ok(())
}

impl TestCluster {
    /// Starts (or connects to) the cluster and creates the test's namespace.
    ///
    /// # Errors
    /// The emulator could not start, `E2E_KUBECONFIG` could not be read, or the namespace could
    /// not be created.
    pub async fn start() -> std::io::Result<TestCluster> {
        let namespace = format!("e2e-{}", random_suffix());
        let home = tempfile::tempdir()?;
        match std::env::var_os("E2E_KUBECONFIG").filter(|v| !v.is_empty()) {
            Some(path) => {
                let kubeconfig = PathBuf::from(path);
                let kc = kube::config::Kubeconfig::read_from(&kubeconfig).map_err(io_err)?;
                let mut config = kube::Config::from_custom_kubeconfig(
                    kc,
                    &kube::config::KubeConfigOptions::default(),
                )
                .await
                .map_err(io_err)?;
                config.default_namespace = namespace.clone();
                let client = kube::Client::try_from(config).map_err(io_err)?;
                create_namespace(&client, &namespace).await?;
                Ok(TestCluster {
                    target: Target::External {
                        kubeconfig: kubeconfig.clone(),
                    },
                    client,
                    namespace,
                    home,
                    kubeconfig,
                    cleaned: false,
                })
            }
            None => {
                let server = TestApiServer::start().await?;
                let kubeconfig = home.path().join("kubeconfig");
                crate::kubeconfig::write_kubeconfig(&kubeconfig, &server.url(), &namespace)?;
                let uri: http::Uri = server.url().parse().map_err(io_err)?;
                let mut config = kube::Config::new(uri);
                config.default_namespace = namespace.clone();
                let client = kube::Client::try_from(config).map_err(io_err)?;
                create_namespace(&client, &namespace).await?;
                Ok(TestCluster {
                    target: Target::Emulated(Box::new(server)),
                    client,
                    namespace,
                    home,
                    kubeconfig,
                    cleaned: false,
                })
            }
        }
    }

    /// A client whose default namespace is [`TestCluster::namespace`].
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The kubeconfig kubectl uses (the emulator's own, or `E2E_KUBECONFIG`).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The test's namespace, `e2e-<random>`.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The emulator, when no real cluster is used (for faults and the request log).
    pub fn emulator(&self) -> Option<&TestApiServer> {
        match &self.target {
            Target::Emulated(s) => Some(s),
            Target::External { .. } => None,
        }
    }

    /// Whether `kubectl` can be run on this machine.
    pub fn kubectl_available() -> bool {
        Command::new("kubectl")
            .arg("version")
            .arg("--client")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// For kubectl tests: `true` when kubectl is present. When it is absent, prints why the test
    /// is skipped and returns `false`, except in CI (`CI=true`), where a missing kubectl fails.
    ///
    /// # Panics
    /// kubectl is missing and `CI` is `true`.
    pub fn require_kubectl(test: &str) -> bool {
        if Self::kubectl_available() {
            return true;
        }
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{test}: kubectl is not on PATH, and CI=true requires it");
        }
        println!("SKIPPED {test}: kubectl is not on PATH (install kubectl to run this test)");
        false
    }

    fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut c = Command::new("kubectl");
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("-n")
            .arg(&self.namespace)
            .args(args)
            .env("HOME", self.home.path())
            .env_remove("KUBECONFIG")
            .env_remove("KUBE_FEATURE_WatchListClient");
        c
    }

    /// Runs `kubectl --kubeconfig <path> -n <namespace> <args>` with a private HOME, killed after
    /// [`KUBECTL_TIMEOUT`] (then stderr ends with a line saying so). Blocks the calling thread; the
    /// emulator runs on its own threads, so this is safe inside async tests.
    pub fn kubectl<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.kubectl_with_input(args, &[])
    }

    /// Like [`TestCluster::kubectl`], writing `input` to kubectl's stdin (for `-f -`).
    pub fn kubectl_with_input<I, S>(&self, args: I, input: &[u8]) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.kubectl_env(args, input, &[])
    }

    /// Like [`TestCluster::kubectl_with_input`] with extra environment variables (e.g.
    /// `KUBE_FEATURE_WatchListClient=true`).
    pub fn kubectl_env<I, S>(&self, args: I, input: &[u8], env: &[(&str, &str)]) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = self.command(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        run_bounded(cmd, input, KUBECTL_TIMEOUT)
    }

    /// Starts kubectl in the background (for `get -w`), reading its stdout line by line.
    ///
    /// # Errors
    /// kubectl could not be spawned.
    pub fn kubectl_spawn<I, S>(&self, args: I) -> std::io::Result<KubectlChild>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut child = self
            .command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let (tx, rx) = mpsc::channel();
        if let Some(out) = child.stdout.take() {
            std::thread::spawn(move || {
                for l in BufReader::new(out).lines() {
                    match l {
                        Ok(l) => {
                            if tx.send(l).is_err() {
                                break;
                            }
                        }
                        Err(_) => break,
                    }
                }
            });
        }
        Ok(KubectlChild {
            child,
            lines: rx,
            seen: Vec::new(),
        })
    }

    /// Deletes the test namespace on a real cluster (nothing to do for the emulator).
    pub async fn cleanup(mut self) {
        self.cleaned = true;
        if matches!(self.target, Target::External { .. }) {
            let api: Api<Namespace> = Api::all(self.client.clone());
            let _ = api
                .delete(&self.namespace, &DeleteParams::background())
                .await;
        }
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if self.cleaned {
            return;
        }
        if let Target::External { kubeconfig } = &self.target {
            let kubeconfig = kubeconfig.clone();
            let ns = self.namespace.clone();
            let handle = std::thread::spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    return;
                };
                rt.block_on(async move {
                    let Ok(kc) = kube::config::Kubeconfig::read_from(&kubeconfig) else {
                        return;
                    };
                    let Ok(config) = kube::Config::from_custom_kubeconfig(
                        kc,
                        &kube::config::KubeConfigOptions::default(),
                    )
                    .await
                    else {
                        return;
                    };
                    let Ok(client) = kube::Client::try_from(config) else {
                        return;
                    };
                    let api: Api<Namespace> = Api::all(client);
                    let _ = tokio::time::timeout(
                        Duration::from_secs(30),
                        api.delete(&ns, &DeleteParams::background()),
                    )
                    .await;
                });
            });
            let _ = handle.join();
        }
    }
}

/// A kubectl running in the background; killed when dropped.
pub struct KubectlChild {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl KubectlChild {
    /// Waits up to `timeout` for a stdout line satisfying `pred`; returns it, or `None` on
    /// timeout or end of output.
    pub fn wait_for_line(
        &mut self,
        timeout: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if pred(&l) {
                        return Some(l);
                    }
                }
                Err(_) => return None,
            }
        }
    }

    /// Every stdout line read so far.
    pub fn lines_seen(&self) -> &[String] {
        &self.seen
    }

    /// Kills kubectl and returns what it wrote to stderr.
    pub fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        err
    }
}

impl Drop for KubectlChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run_bounded(mut cmd: Command, input: &[u8], timeout: Duration) -> Output {
    cmd.stdin(if input.is_empty() {
        Stdio::null()
    } else {
        Stdio::piped()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return Output {
                status: failed_status(),
                stdout: Vec::new(),
                stderr: format!("could not start kubectl: {e}").into_bytes(),
            };
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        let data = input.to_vec();
        std::thread::spawn(move || {
            let _ = stdin.write_all(&data);
        });
    }
    let reader = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out_t = reader(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let err_t = reader(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() >= deadline => {
                timed_out = true;
                let _ = child.kill();
                break child.wait().unwrap_or_else(|_| failed_status());
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => break failed_status(),
        }
    };
    let stdout = out_t.join().unwrap_or_default();
    let mut stderr = err_t.join().unwrap_or_default();
    if timed_out {
        stderr.extend_from_slice(
            format!(
                "\nkubectl killed after the {}s timeout\n",
                timeout.as_secs()
            )
            .as_bytes(),
        );
    }
    Output {
        status,
        stdout,
        stderr,
    }
}

fn failed_status() -> std::process::ExitStatus {
    use std::os::unix::process::ExitStatusExt;
    std::process::ExitStatus::from_raw(1 << 8)
}
