//! Phase 1: the cluster-less `apply` (`plan::build` + `apply::run`) of the N manifests against
//! the simulator, then the same apply again (nothing to change).

use std::time::{Duration, Instant};

use mailtarget_operator::api::{Client, ClientConfig};
use mailtarget_operator::manifest;
use mailtarget_operator::offline::{apply, plan};
use mailtarget_operator::simulator::{RequestRecord, Simulator, SimulatorConfig};

use crate::calls;
use crate::report::Row;
use crate::workload::{self, Counts};

const KEY: &str = "bench-offline-key";

/// Runs both offline phases for `n` objects at `latency`; the phase names get `suffix`.
///
/// Errors: the simulator cannot start, the manifests do not load, or an apply does not do what
/// it must (every object created, then every object unchanged).
pub async fn run(
    n: usize,
    latency: Duration,
    concurrency: usize,
    rps: Option<u32>,
    suffix: &str,
) -> Result<Vec<Row>, String> {
    let mut config = SimulatorConfig::new(KEY);
    config.latency = latency;
    let sim = Simulator::start(config).await.map_err(|e| e.to_string())?;
    let mut client_config = ClientConfig::new(
        sim.base_url().parse().map_err(|e| format!("{e}"))?,
        sim.transmission_url().parse().map_err(|e| format!("{e}"))?,
        KEY.to_string().into(),
    );
    client_config.max_concurrency = concurrency;
    client_config.requests_per_second = rps.and_then(std::num::NonZeroU32::new);
    let client = Client::new(client_config).map_err(|e| e.to_string())?;
    let set = manifest::load_str(
        "bench.yaml",
        &workload::yaml_stream(&workload::manifests(n)),
    )
    .map_err(|e| e.to_string())?;
    let counts = Counts::of(n);
    let row =
        |phase: &str, wall: Duration, log: &[RequestRecord], min_writes, min_reads, chain| Row {
            n,
            phase: format!("{phase}{suffix}"),
            wall,
            calls: calls::count(log),
            min_writes,
            min_reads,
            reconciles: None,
            p50_p99_ms: (None, None),
            peak_rss_mib: None,
            cpu_s: None,
            kube_calls: None,
            latency,
            concurrency,
            rps,
            fixed_window: false,
            chain,
        };
    let mut rows = Vec::new();

    // First apply: everything is created. Minimum: a POST per sub account (its first key comes
    // with it) and per domain, one verify-txt per domain; reads: one page per (empty) list and
    // each key's detail (the list lacks permissions).
    let started = Instant::now();
    let planned = plan::build(&client, &set.resources, &set.namespace_selectors)
        .await
        .map_err(|e| e.to_string())?;
    let report = apply::run(&client, &planned, None).await;
    let wall = started.elapsed();
    let summary = report.summary();
    if summary.create != n {
        return Err(format!(
            "offline apply: expected {n} created, got {summary:?}"
        ));
    }
    let log = sim.request_log();
    rows.push(row(
        "offline apply",
        wall,
        &log,
        counts.sub_accounts + 2 * counts.sending_domains,
        3 + counts.api_keys,
        2,
    ));

    // Second apply: nothing changes. Reads: the lists, each key's detail (permissions) and
    // each domain's detail (its DNS records are printed).
    sim.clear_request_log();
    let started = Instant::now();
    let planned = plan::build(&client, &set.resources, &set.namespace_selectors)
        .await
        .map_err(|e| e.to_string())?;
    let report = apply::run(&client, &planned, None).await;
    let wall = started.elapsed();
    let summary = report.summary();
    if summary.unchanged != n {
        return Err(format!(
            "offline re-apply: expected {n} unchanged, got {summary:?}"
        ));
    }
    let log = sim.request_log();
    rows.push(row(
        "offline re-apply",
        wall,
        &log,
        0,
        counts.list_pages() + counts.api_keys + counts.sending_domains,
        2,
    ));
    if sim.max_concurrent_requests() > concurrency {
        return Err(format!(
            "offline: the simulator saw {} requests in flight, more than the budget of {concurrency}",
            sim.max_concurrent_requests()
        ));
    }
    sim.shutdown().await;
    Ok(rows)
}
