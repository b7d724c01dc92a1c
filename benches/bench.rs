//! The performance benchmark: API calls, time, memory and CPU of the cluster-less `apply` and
//! of the operator, against the simulator (and the test API server for the operator).
//!
//! ```sh
//! cargo bench --bench bench -- --objects 100,1000 --latency-ms 50 --api-concurrency 8
//! ```
//!
//! For each N it runs, in order:
//! 1. the cluster-less apply (`plan::build` + `apply::run`) of N manifests against an in-process
//!    simulator, at 0 ms latency and at `--latency-ms`, each followed by the same apply again
//!    (nothing to change);
//! 2. the operator binary (`mailtarget-operator run`, a child process) against an in-process
//!    test API server and simulator: create the N objects and wait until all are Ready; one
//!    resync interval with nothing changed; change 1% of the specs and wait until they are
//!    Ready again.
//!
//! It prints Markdown tables (see `docs/performance.md` for the columns). Progress and the
//! operator's log location go to standard error.

#[path = "bench/calls.rs"]
mod calls;
#[path = "bench/controller.rs"]
mod controller;
#[path = "bench/offline.rs"]
mod offline;
#[path = "bench/probe.rs"]
mod probe;
#[path = "bench/report.rs"]
mod report;
#[path = "bench/workload.rs"]
mod workload;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

/// Options of the benchmark.
#[derive(Parser, Debug)]
#[command(about = "mailtarget-operator performance benchmark")]
struct Args {
    /// Objects per run (one third of each kind); a comma-separated list runs each in turn.
    #[arg(long, value_delimiter = ',', default_value = "100")]
    objects: Vec<usize>,
    /// Latency the simulator adds to every call, in milliseconds.
    #[arg(long, default_value_t = 50)]
    latency_ms: u64,
    /// Requests in flight per account (`--api-concurrency` of the operator and the client).
    #[arg(long, default_value_t = 8)]
    api_concurrency: usize,
    /// Requests per second per account (`--api-rps`); unlimited when unset.
    #[arg(long)]
    api_rps: Option<u32>,
    /// The operator's `--resync-interval` (the resync phase lasts 1.1 times this).
    #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
    resync_interval: Duration,
    /// The operator's `--detail-resync-interval` (its default, `1h`, keeps detail reads out of
    /// the resync phase; set it to the resync interval to measure a resync that reads them).
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    detail_resync_interval: Duration,
    /// The operator's `--reconcile-concurrency`.
    #[arg(long, default_value_t = 16)]
    reconcile_concurrency: u16,
    /// Skip the cluster-less apply phases.
    #[arg(long)]
    skip_offline: bool,
    /// Skip the operator phases.
    #[arg(long)]
    skip_controller: bool,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

async fn run(args: Args) -> Result<(), String> {
    let latency = Duration::from_millis(args.latency_ms);
    let settings = controller::Settings {
        latency,
        api_concurrency: args.api_concurrency.max(1),
        api_rps: args.api_rps,
        resync_interval: args.resync_interval,
        detail_resync_interval: args.detail_resync_interval,
        reconcile_concurrency: args.reconcile_concurrency,
    };
    let mut rows = Vec::new();
    let mut kube_rows = Vec::new();
    for &n in &args.objects {
        if !args.skip_offline {
            eprintln!("N={n}: cluster-less apply");
            if !latency.is_zero() {
                rows.extend(
                    offline::run(
                        n,
                        Duration::ZERO,
                        settings.api_concurrency,
                        args.api_rps,
                        " (L=0)",
                    )
                    .await?,
                );
            }
            rows.extend(
                offline::run(n, latency, settings.api_concurrency, args.api_rps, "").await?,
            );
        }
        if !args.skip_controller {
            eprintln!("N={n}: operator");
            for (row, kube) in controller::run(n, &settings).await? {
                rows.push(row.clone());
                kube_rows.push((row, kube));
            }
        }
    }
    println!(
        "latency {} ms, api concurrency {}, api rps {}, resync interval {:?}, reconcile concurrency {}",
        args.latency_ms,
        settings.api_concurrency,
        args.api_rps
            .map_or_else(|| "unlimited".into(), |r| r.to_string()),
        args.resync_interval,
        args.reconcile_concurrency
    );
    report::print(&rows);
    report::print_kube(&kube_rows);
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
