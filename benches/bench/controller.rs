//! Phase 2: the operator binary (`mailtarget-operator run`, a separate process) against the
//! test API server and the simulator, both in this process: create N objects and wait until all
//! are Ready, one resync with nothing changed, then a change of 1% of the specs.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, wait::await_condition, watcher};
use kube::{Resource, ResourceExt};
use mailtarget_operator::crd::conditions::{Condition, READY, TRUE};
use mailtarget_operator::crd::generate::all_crds;
use mailtarget_operator::crd::{ApiKey, SendingDomain, SubAccount};
use mailtarget_operator::simulator::{Simulator, SimulatorConfig};
use mailtarget_test_apiserver::{ServerOptions, TestApiServer};
use serde::de::DeserializeOwned;

use crate::calls::{self, Calls};
use crate::probe::{self, Scrape};
use crate::report::Row;
use crate::workload::{self, Counts, NAMESPACE, RUN_LABEL};

/// The operator binary Cargo built next to this benchmark.
const BIN: &str = env!("CARGO_BIN_EXE_mailtarget-operator");
const KEY: &str = "bench-controller-key";
/// Objects created or patched at once by the benchmark.
const CLIENT_PARALLEL: usize = 32;

/// Settings of the controller phases.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Simulated latency of every service call.
    pub latency: Duration,
    /// `--api-concurrency`.
    pub api_concurrency: usize,
    /// `--api-rps`.
    pub api_rps: Option<u32>,
    /// `--resync-interval`.
    pub resync_interval: Duration,
    /// `--detail-resync-interval`.
    pub detail_resync_interval: Duration,
    /// `--reconcile-concurrency`.
    pub reconcile_concurrency: u16,
}

/// A child process killed when dropped.
struct Operator {
    child: Child,
}

impl Operator {
    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<SocketAddr, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    listener.local_addr().map_err(|e| e.to_string())
}

/// Where the operator's log goes: next to the binary (`target/<profile>/bench-operator-N.log`).
fn log_path(n: usize) -> PathBuf {
    Path::new(BIN)
        .parent()
        .unwrap_or(Path::new("."))
        .join(format!("bench-operator-{n}.log"))
}

fn api_for(kube: &kube::Client, kind: &str) -> Api<DynamicObject> {
    let ar = match kind {
        "SubAccount" => ApiResource::erase::<SubAccount>(&()),
        "ApiKey" => ApiResource::erase::<ApiKey>(&()),
        _ => ApiResource::erase::<SendingDomain>(&()),
    };
    Api::namespaced_with(kube.clone(), NAMESPACE, &ar)
}

async fn install(kube: &kube::Client) -> Result<(), String> {
    let crds: Api<CustomResourceDefinition> = Api::all(kube.clone());
    for crd in all_crds() {
        let name = crd.name_any();
        crds.create(&PostParams::default(), &crd)
            .await
            .map_err(|e| format!("creating CRD {name}: {e}"))?;
        let established = await_condition(
            crds.clone(),
            &name,
            kube::runtime::wait::conditions::is_crd_established(),
        );
        tokio::time::timeout(Duration::from_secs(30), established)
            .await
            .map_err(|_| format!("CRD {name} not established in 30 s"))?
            .map_err(|e| e.to_string())?;
    }
    let namespaces: Api<Namespace> = Api::all(kube.clone());
    let ns: Namespace = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}
    }))
    .map_err(|e| e.to_string())?;
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .map_err(|e| format!("creating namespace: {e}"))?;
    Ok(())
}

fn ready_at(conditions: &[Condition], generation: i64) -> bool {
    conditions.iter().any(|c| {
        c.type_ == READY
            && c.status == TRUE
            && c.observed_generation.is_some_and(|g| g >= generation)
    })
}

/// Waits through a watch until every object of `want` (name → generation) is Ready for that
/// generation.
async fn wait_kind<K>(
    kube: &kube::Client,
    mut want: HashMap<String, i64>,
    conditions: fn(&K) -> Option<&Vec<Condition>>,
) where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    if want.is_empty() {
        return;
    }
    let api: Api<K> = Api::namespaced(kube.clone(), NAMESPACE);
    let config = watcher::Config::default().labels(RUN_LABEL);
    let events = watcher(api, config).default_backoff().applied_objects();
    futures::pin_mut!(events);
    while !want.is_empty() {
        match events.try_next().await {
            Ok(Some(obj)) => {
                let name = obj.name_any();
                if let Some(generation) = want.get(&name)
                    && conditions(&obj).is_some_and(|c| ready_at(c, *generation))
                {
                    want.remove(&name);
                }
            }
            Ok(None) => return,
            Err(_) => continue,
        }
    }
}

/// Waits (bounded by `limit`) until every object of `want` (kind → name → generation) is Ready.
async fn wait_ready(
    kube: &kube::Client,
    mut want: HashMap<&'static str, HashMap<String, i64>>,
    limit: Duration,
) -> Result<(), String> {
    let subs = want.remove("SubAccount").unwrap_or_default();
    let keys = want.remove("ApiKey").unwrap_or_default();
    let domains = want.remove("SendingDomain").unwrap_or_default();
    let all = async {
        tokio::join!(
            wait_kind::<SubAccount>(kube, subs, |o| o.status.as_ref().map(|s| &s.conditions)),
            wait_kind::<ApiKey>(kube, keys, |o| o.status.as_ref().map(|s| &s.conditions)),
            wait_kind::<SendingDomain>(kube, domains, |o| o.status.as_ref().map(|s| &s.conditions)),
        )
    };
    if tokio::time::timeout(limit, all).await.is_ok() {
        return Ok(());
    }
    Err(format!(
        "not every object was Ready within {limit:?}; not Ready, by kind and reason: {}",
        not_ready(kube).await
    ))
}

/// A watch of one kind's benchmark objects whose initial list is done, so that a phase started
/// afterwards waits on it without paying for a list of every object.
struct KindWatch {
    kind: &'static str,
    events:
        futures::stream::BoxStream<'static, Result<watcher::Event<DynamicObject>, watcher::Error>>,
}

/// Starts a watch of `kind` and reads its initial list.
async fn watch_kind(kube: &kube::Client, kind: &'static str) -> Result<KindWatch, String> {
    let mut events = watcher(
        api_for(kube, kind),
        watcher::Config::default().labels(RUN_LABEL),
    )
    .default_backoff()
    .boxed();
    loop {
        match events.try_next().await {
            Ok(Some(watcher::Event::InitDone)) => return Ok(KindWatch { kind, events }),
            Ok(Some(_)) => {}
            Ok(None) => return Err(format!("the watch of {kind} ended")),
            Err(e) => return Err(format!("watching {kind}: {e}")),
        }
    }
}

/// Waits (bounded by `limit`) until each of `objects` (kind, name, generation) is Ready for
/// that generation, through watches started before the objects changed.
async fn wait_watched(
    kube: &kube::Client,
    watches: Vec<KindWatch>,
    objects: &[(&'static str, String, i64)],
    limit: Duration,
) -> Result<(), String> {
    let all = futures::future::join_all(watches.into_iter().map(|mut w| {
        let mut want: HashMap<String, i64> = objects
            .iter()
            .filter(|(kind, _, _)| *kind == w.kind)
            .map(|(_, name, generation)| (name.clone(), *generation))
            .collect();
        async move {
            while !want.is_empty() {
                let obj = match w.events.try_next().await {
                    Ok(Some(watcher::Event::Apply(o) | watcher::Event::InitApply(o))) => o,
                    Ok(Some(_)) | Err(_) => continue,
                    Ok(None) => return Err(format!("the watch of {} ended", w.kind)),
                };
                let ready = want.get(&obj.name_any()).is_some_and(|generation| {
                    obj.data
                        .pointer("/status/conditions")
                        .and_then(|c| serde_json::from_value::<Vec<Condition>>(c.clone()).ok())
                        .is_some_and(|c| ready_at(&c, *generation))
                });
                if ready {
                    want.remove(&obj.name_any());
                }
            }
            Ok(())
        }
    }));
    if let Ok(results) = tokio::time::timeout(limit, all).await {
        return results.into_iter().collect();
    }
    Err(format!(
        "not every changed object was Ready within {limit:?}; not Ready, by kind and reason: {}",
        not_ready(kube).await
    ))
}

/// `Kind/Reason: count` of the objects whose Ready condition is not True (for diagnostics).
async fn not_ready(kube: &kube::Client) -> String {
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for kind in ["SubAccount", "ApiKey", "SendingDomain"] {
        let Ok(list) = api_for(kube, kind)
            .list(&kube::api::ListParams::default())
            .await
        else {
            continue;
        };
        for o in list {
            let conditions: Vec<Condition> = o
                .data
                .pointer("/status/conditions")
                .and_then(|c| serde_json::from_value(c.clone()).ok())
                .unwrap_or_default();
            let ready = conditions.iter().find(|c| c.type_ == READY);
            if ready.is_none_or(|c| c.status != TRUE) {
                let reason = ready.map_or("no status", |c| c.reason.as_str());
                *reasons.entry(format!("{kind}/{reason}")).or_default() += 1;
            }
        }
    }
    format!("{reasons:?}")
}

/// How long the operator must run no reconcile to count as idle.
const IDLE: Duration = Duration::from_secs(2);

/// Waits until the operator's reconcile counter stays the same for [`IDLE`], at most `limit`
/// (when creating took longer than a resync interval, resyncs have begun and the operator
/// never idles; the measurement then starts anyway). Returns how long it was idle and the CPU
/// seconds process `pid` spent meanwhile.
async fn settle(
    http: &reqwest::Client,
    addr: SocketAddr,
    limit: Duration,
    pid: u32,
) -> Result<Option<(Duration, f64)>, String> {
    let deadline = Instant::now() + limit;
    let mut last = -1.0;
    let mut stable_since = (Instant::now(), 0.0);
    while Instant::now() < deadline {
        let now = probe::scrape(http, addr).await?.reconciles;
        if now != last {
            last = now;
            stable_since = (Instant::now(), probe::cpu_seconds(pid).unwrap_or(0.0));
        } else if stable_since.0.elapsed() >= IDLE {
            let cpu = probe::cpu_seconds(pid).unwrap_or(0.0) - stable_since.1;
            return Ok(Some((stable_since.0.elapsed(), cpu)));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!("note: the operator kept reconciling for {limit:?} after every object was Ready");
    Ok(None)
}

/// Requests the operator made to the Kubernetes API, by endpoint, among `log` entries: the
/// benchmark's own requests (its creates, merge patches and label-selected watches) excluded;
/// the operator's merge patches (its identity annotations) carry its field manager.
fn kube_calls(log: &[mailtarget_test_apiserver::LoggedRequest]) -> BTreeMap<String, usize> {
    let mut by = BTreeMap::new();
    for r in log {
        let mine = (r.method == "POST" && r.path_and_query.contains("/mailtarget.co/"))
            || (r
                .content_type
                .as_deref()
                .is_some_and(|c| c.contains("merge-patch"))
                && !r
                    .path_and_query
                    .contains("fieldManager=mailtarget-operator"))
            || r.path_and_query.contains("labelSelector=bench");
        if !mine {
            *by.entry(calls::kube_template(&r.method, &r.path_and_query))
                .or_default() += 1;
        }
    }
    by
}

/// Everything measured at the start of a phase.
struct Mark {
    started: Instant,
    started_unix_ms: i64,
    kube_log: usize,
    scrape: Scrape,
    cpu: f64,
}

struct Harness<'a> {
    n: usize,
    settings: &'a Settings,
    server: &'a TestApiServer,
    sim: &'a Simulator,
    http: reqwest::Client,
    metrics: SocketAddr,
    pid: u32,
}

impl Harness<'_> {
    async fn mark(&self) -> Result<Mark, String> {
        self.sim.clear_request_log();
        Ok(Mark {
            kube_log: self.server.request_log().len(),
            scrape: probe::scrape(&self.http, self.metrics).await?,
            cpu: probe::cpu_seconds(self.pid).unwrap_or(0.0),
            started: Instant::now(),
            started_unix_ms: probe::unix_ms(),
        })
    }

    async fn row(
        &self,
        mark: &Mark,
        phase: &str,
        min_writes: usize,
        min_reads: usize,
        chain: usize,
    ) -> Result<(Row, BTreeMap<String, usize>), String> {
        let wall = mark.started.elapsed();
        let records = self.sim.request_log();
        if std::env::var_os("BENCH_TRACE").is_some() {
            eprintln!("{phase}: API calls per second by endpoint:");
            eprint!("{}", calls::timeline(&records));
            if let (Some(first), Some(last)) = (
                records.iter().map(|r| r.unix_ms).min(),
                records
                    .iter()
                    .map(|r| r.unix_ms + r.duration.as_millis() as i64)
                    .max(),
            ) {
                eprintln!(
                    "{phase}: first call at +{} ms, last answer at +{} ms, phase ended at +{} ms",
                    first - mark.started_unix_ms,
                    last - mark.started_unix_ms,
                    wall.as_millis()
                );
            }
        }
        let calls: Calls = calls::count(&records);
        let scrape = probe::scrape(&self.http, self.metrics).await?;
        let (reconciles, q) = probe::between(&mark.scrape, &scrape, &[0.5, 0.99]);
        let log = self.server.request_log();
        let kube = kube_calls(log.get(mark.kube_log..).unwrap_or_default());
        let row = Row {
            n: self.n,
            phase: phase.into(),
            wall,
            calls,
            min_writes,
            min_reads,
            reconciles: Some(reconciles),
            p50_p99_ms: (q[0], q[1]),
            peak_rss_mib: probe::peak_rss_mib(self.pid),
            cpu_s: probe::cpu_seconds(self.pid).map(|c| c - mark.cpu),
            kube_calls: Some(kube.values().sum()),
            latency: self.settings.latency,
            concurrency: self.settings.api_concurrency,
            rps: self.settings.api_rps,
            fixed_window: phase.starts_with("resync"),
            chain,
        };
        Ok((row, kube))
    }
}

/// Runs the three controller phases for `n` objects.
///
/// Returns the rows and, per row, the operator's Kubernetes requests by endpoint.
///
/// Errors: set-up failures, an object not Ready in time, the operator exiting.
pub async fn run(
    n: usize,
    settings: &Settings,
) -> Result<Vec<(Row, BTreeMap<String, usize>)>, String> {
    if !Path::new(BIN).exists() {
        return Err(format!(
            "{BIN} is missing; build it with `cargo build --release`"
        ));
    }
    let server = TestApiServer::start_with(ServerOptions {
        history_window: 20 * n + 10_000,
        ..ServerOptions::default()
    })
    .await
    .map_err(|e| e.to_string())?;
    let kube = server.client();
    install(&kube).await?;
    let mut sim_config = SimulatorConfig::new(KEY);
    sim_config.latency = settings.latency;
    let sim = Simulator::start(sim_config)
        .await
        .map_err(|e| e.to_string())?;
    let metrics = free_port()?;
    let log = File::create(log_path(n)).map_err(|e| e.to_string())?;
    let mut command = Command::new(BIN);
    command
        .args([
            "run",
            "--namespace",
            NAMESPACE,
            "--identity",
            "bench",
            "--metrics-addr",
            &metrics.to_string(),
            "--resync-interval",
            &format!("{}ms", settings.resync_interval.as_millis()),
            "--detail-resync-interval",
            &format!("{}ms", settings.detail_resync_interval.as_millis()),
            "--verify-first-interval",
            "200ms",
            "--verify-max-interval",
            "5s",
            "--api-concurrency",
            &settings.api_concurrency.to_string(),
            "--reconcile-concurrency",
            &settings.reconcile_concurrency.to_string(),
        ])
        .env("KUBECONFIG", server.kubeconfig_path())
        .env("MAILTARGET_API_KEY", KEY)
        .env("MAILTARGET_API_URL", sim.base_url())
        .env("MAILTARGET_TRANSMISSION_URL", sim.transmission_url())
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    if let Some(rps) = settings.api_rps {
        command.args(["--api-rps", &rps.to_string()]);
    }
    let mut operator = Operator {
        child: command
            .spawn()
            .map_err(|e| format!("starting {BIN}: {e}"))?,
    };
    let http = reqwest::Client::new();
    // Ready when /metrics answers (bounded).
    let deadline = Instant::now() + Duration::from_secs(30);
    while probe::scrape(&http, metrics).await.is_err() {
        if Instant::now() > deadline {
            return Err("the operator's /metrics did not answer within 30 s".into());
        }
        if let Ok(Some(status)) = operator.child.try_wait() {
            return Err(format!(
                "the operator exited with {status}; see {}",
                log_path(n).display()
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let h = Harness {
        n,
        settings,
        server: &server,
        sim: &sim,
        http,
        metrics,
        pid: operator.pid(),
    };
    let counts = Counts::of(n);
    let limit = Duration::from_secs(120) + Duration::from_millis(100) * n as u32;
    let mut rows = Vec::new();

    // Create every object and wait until all are Ready.
    let mark = h.mark().await?;
    let manifests = workload::manifests(n);
    let created: Vec<(&'static str, String, i64)> = stream::iter(manifests)
        .map(|m| {
            let kube = kube.clone();
            async move {
                let obj: DynamicObject = serde_json::from_value(m).map_err(|e| e.to_string())?;
                let kind = match obj.types.as_ref().map(|t| t.kind.as_str()) {
                    Some("SubAccount") => "SubAccount",
                    Some("ApiKey") => "ApiKey",
                    _ => "SendingDomain",
                };
                let made = api_for(&kube, kind)
                    .create(&PostParams::default(), &obj)
                    .await
                    .map_err(|e| format!("creating {}: {e}", obj.name_any()))?;
                Ok::<_, String>((kind, made.name_any(), made.metadata.generation.unwrap_or(1)))
            }
        })
        .buffer_unordered(CLIENT_PARALLEL)
        .try_collect()
        .await?;
    let mut want: HashMap<&'static str, HashMap<String, i64>> = HashMap::new();
    for (kind, name, generation) in created {
        want.entry(kind).or_default().insert(name, generation);
    }
    wait_ready(&kube, want, limit).await?;
    // Minimum: a POST per sub account (with its first key) and per domain, one verify-txt per
    // domain; reads: one page per (empty) list and each key's detail (the list lacks
    // permissions). A domain still unverified after its first reconcile also gets its SPF
    // suggestion read once, for status.
    rows.push(
        h.row(
            &mark,
            "create → all Ready",
            counts.sub_accounts + 2 * counts.sending_domains,
            3 + counts.api_keys,
            2,
        )
        .await?,
    );

    // One full resync with nothing changed: every object's resync falls in any window of
    // 1.1 × the interval (the delay is jittered by up to 10%).
    if let Some((idle, cpu)) = settle(&h.http, metrics, settings.resync_interval, h.pid).await? {
        rows.push((
            Row {
                n,
                phase: "idle (no reconcile)".into(),
                wall: idle,
                calls: Calls::default(),
                min_writes: 0,
                min_reads: 0,
                reconciles: Some(0.0),
                p50_p99_ms: (None, None),
                peak_rss_mib: probe::peak_rss_mib(h.pid),
                cpu_s: Some(cpu),
                kube_calls: None,
                latency: settings.latency,
                concurrency: settings.api_concurrency,
                rps: settings.api_rps,
                fixed_window: true,
                chain: 0,
            },
            BTreeMap::new(),
        ));
    }
    let mark = h.mark().await?;
    tokio::time::sleep(settings.resync_interval.mul_f64(1.1)).await;
    rows.push(
        h.row(&mark, "resync, no change", 0, counts.list_pages(), 1)
            .await?,
    );

    // Change 1% of the specs and wait until those objects are Ready again (through watches
    // started before the phase).
    let changes = workload::changes(n);
    let mut watches = Vec::new();
    for kind in ["SubAccount", "ApiKey", "SendingDomain"] {
        if changes.iter().any(|c| c.kind == kind) {
            watches.push(watch_kind(&kube, kind).await?);
        }
    }
    let mark = h.mark().await?;
    let patched: Vec<(&'static str, String, i64)> = stream::iter(changes.clone())
        .map(|c| {
            let kube = kube.clone();
            async move {
                let obj = api_for(&kube, c.kind)
                    .patch(&c.name, &PatchParams::default(), &Patch::Merge(&c.patch))
                    .await
                    .map_err(|e| format!("patching {}: {e}", c.name))?;
                Ok::<_, String>((c.kind, c.name, obj.metadata.generation.unwrap_or(1)))
            }
        })
        .buffer_unordered(CLIENT_PARALLEL)
        .try_collect()
        .await?;
    wait_watched(&kube, watches, &patched, limit).await?;
    // Minimum: one PUT per change and nothing else (a key's change is planned against the
    // permissions its status recorded).
    rows.push(
        h.row(&mark, "change 1% → Ready", changes.len(), 0, 1)
            .await?,
    );

    if sim.max_concurrent_requests() > settings.api_concurrency {
        eprintln!(
            "warning: N={n}: the simulator saw {} requests in flight, more than --api-concurrency {}",
            sim.max_concurrent_requests(),
            settings.api_concurrency
        );
    }
    eprintln!(
        "N={n}: operator log in {}; peak requests in flight at the simulator: {} (limit {})",
        log_path(n).display(),
        sim.max_concurrent_requests(),
        settings.api_concurrency
    );
    drop(operator);
    sim.shutdown().await;
    server.shutdown().await;
    Ok(rows)
}
