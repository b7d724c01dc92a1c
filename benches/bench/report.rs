//! The benchmark's result table (Markdown, so that `docs/performance.md` can quote it).

use std::time::Duration;

use crate::calls::Calls;

/// One measured phase.
#[derive(Clone, Debug)]
pub struct Row {
    /// Objects in the run.
    pub n: usize,
    /// Phase name.
    pub phase: String,
    /// Wall time of the phase.
    pub wall: Duration,
    /// Service calls of the phase.
    pub calls: Calls,
    /// The fewest writes the phase needs.
    pub min_writes: usize,
    /// The fewest reads the phase needs.
    pub min_reads: usize,
    /// Reconciles run (controller phases).
    pub reconciles: Option<f64>,
    /// Reconcile duration p50 and p99 in ms (controller phases).
    pub p50_p99_ms: (Option<f64>, Option<f64>),
    /// Operator peak RSS in MiB so far (controller phases).
    pub peak_rss_mib: Option<f64>,
    /// Operator CPU seconds spent in the phase (controller phases).
    pub cpu_s: Option<f64>,
    /// Kubernetes API requests made during the phase (controller phases; the benchmark's own
    /// creates and patches excluded).
    pub kube_calls: Option<usize>,
    /// Simulated latency of each call.
    pub latency: Duration,
    /// Requests in flight allowed per account.
    pub concurrency: usize,
    /// Requests per second allowed per account, when limited.
    pub rps: Option<u32>,
    /// The phase lasts a fixed time (a resync interval), so wall / floor means nothing.
    pub fixed_window: bool,
    /// Calls one object needs one after the other in this phase (e.g. a key's detail GET, then
    /// its PUT): no concurrency makes the phase shorter than that many latencies.
    pub chain: usize,
}

impl Row {
    /// The time the calls need at the API's speed limit: calls × latency / concurrency, in
    /// whole rounds (each of `concurrency` slots completes one call per latency, so `calls`
    /// calls need `ceil(calls / concurrency)` latencies: 10 calls at 8 in flight take two), or
    /// calls / requests per second when limited, or the latency of the calls one object makes
    /// one after the other, whichever is longest.
    pub fn floor(&self) -> Duration {
        let rounds = self.calls.total.div_ceil(self.concurrency.max(1));
        let throughput = self.latency.mul_f64(rounds as f64);
        let chain = self
            .latency
            .mul_f64(self.chain.min(self.calls.total) as f64);
        let rate = self.rps.map_or(Duration::ZERO, |rps| {
            Duration::from_secs_f64(self.calls.total as f64 / f64::from(rps.max(1)))
        });
        throughput.max(chain).max(rate)
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{v:.digits$}"))
}

fn ratio(have: usize, min: usize) -> String {
    if min == 0 {
        if have == 0 {
            "1.00".into()
        } else {
            "∞".into()
        }
    } else {
        format!("{:.2}", have as f64 / min as f64)
    }
}

/// Prints the main table and the calls-by-endpoint table.
pub fn print(rows: &[Row]) {
    println!();
    println!(
        "| N | phase | wall s | API calls | writes (min, ratio) | reads (min, ratio) | list pages | reconciles | p50 / p99 ms | peak RSS MiB | CPU s | k8s calls | floor s | wall / floor |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let floor = r.floor();
        let ratio_floor = if floor.is_zero() || r.fixed_window {
            "–".to_string()
        } else {
            format!("{:.2}", r.wall.as_secs_f64() / floor.as_secs_f64())
        };
        println!(
            "| {} | {} | {:.2} | {} | {} ({}, {}) | {} ({}, {}) | {} | {} | {} / {} | {} | {} | {} | {:.2} | {} |",
            r.n,
            r.phase,
            r.wall.as_secs_f64(),
            r.calls.total,
            r.calls.writes,
            r.min_writes,
            ratio(r.calls.writes, r.min_writes),
            r.calls.reads(),
            r.min_reads,
            ratio(r.calls.reads(), r.min_reads),
            r.calls.list_pages(),
            opt(r.reconciles, 0),
            opt(r.p50_p99_ms.0, 1),
            opt(r.p50_p99_ms.1, 1),
            opt(r.peak_rss_mib, 1),
            opt(r.cpu_s, 2),
            r.kube_calls.map_or_else(|| "–".into(), |c| c.to_string()),
            floor.as_secs_f64(),
            ratio_floor,
        );
    }
    println!();
    println!("| N | phase | API calls by endpoint | peak calls/s |");
    println!("|---:|---|---|---:|");
    for r in rows {
        let endpoints: Vec<String> = r
            .calls
            .by_endpoint
            .iter()
            .map(|(e, n)| format!("`{e}` {n}"))
            .collect();
        println!(
            "| {} | {} | {} | {} |",
            r.n,
            r.phase,
            if endpoints.is_empty() {
                "none".into()
            } else {
                endpoints.join(", ")
            },
            r.calls.peak_per_second
        );
    }
    println!();
}

/// Prints the operator's Kubernetes requests by endpoint for each controller phase.
pub fn print_kube(rows: &[(Row, std::collections::BTreeMap<String, usize>)]) {
    if rows.is_empty() {
        return;
    }
    println!("| N | phase | operator's Kubernetes requests by endpoint |");
    println!("|---:|---|---|");
    for (r, by) in rows {
        let endpoints: Vec<String> = by.iter().map(|(e, n)| format!("`{e}` {n}")).collect();
        println!(
            "| {} | {} | {} |",
            r.n,
            r.phase,
            if endpoints.is_empty() {
                "none".into()
            } else {
                endpoints.join(", ")
            }
        );
    }
    println!();
}
