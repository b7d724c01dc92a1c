//! Measuring the operator process from outside: CPU time and peak memory from `/proc`, reconcile
//! counts and durations from its `/metrics` endpoint.

use std::net::SocketAddr;
use std::time::Duration;

/// CPU time (user + system) of process `pid`, from `/proc/<pid>/stat` (clock ticks of 1/100 s,
/// the Linux default).
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at field 3 (state).
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// Peak resident memory of process `pid` in MiB (`VmHWM` of `/proc/<pid>/status`).
pub fn peak_rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// One reading of the operator's metrics.
#[derive(Clone, Debug, Default)]
pub struct Scrape {
    /// `mailtarget_reconcile_duration_seconds` buckets summed over kinds: (upper bound in
    /// seconds, cumulative count), in increasing bound order; `+Inf` is `f64::INFINITY`.
    pub buckets: Vec<(f64, f64)>,
    /// Sum of `mailtarget_reconciles_total` over kinds and results.
    pub reconciles: f64,
}

fn label(line: &str, name: &str) -> Option<String> {
    let start = line.find(&format!("{name}=\""))? + name.len() + 2;
    let end = line[start..].find('"')? + start;
    Some(line[start..end].to_string())
}

fn value(line: &str) -> Option<f64> {
    line.rsplit(' ').next()?.trim().parse().ok()
}

/// Parses the OpenMetrics text of `/metrics`.
pub fn parse(text: &str) -> Scrape {
    let mut scrape = Scrape::default();
    for line in text.lines() {
        if line.starts_with("mailtarget_reconcile_duration_seconds_bucket{") {
            let (Some(le), Some(v)) = (label(line, "le"), value(line)) else {
                continue;
            };
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap_or(f64::INFINITY)
            };
            match scrape.buckets.iter_mut().find(|(b, _)| *b == le) {
                Some((_, c)) => *c += v,
                None => scrape.buckets.push((le, v)),
            }
        } else if line.starts_with("mailtarget_reconciles_total{") {
            scrape.reconciles += value(line).unwrap_or(0.0);
        }
    }
    scrape.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    scrape
}

/// Reads `http://<addr>/metrics`.
pub async fn scrape(http: &reqwest::Client, addr: SocketAddr) -> Result<Scrape, String> {
    let text = http
        .get(format!("http://{addr}/metrics"))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .map_err(|e| e.to_string())?
        .text()
        .await
        .map_err(|e| e.to_string())?;
    Ok(parse(&text))
}

/// The reconciles between two readings: their count and the `q` quantiles (0..1) of their
/// duration in milliseconds, interpolated linearly inside the histogram bucket (`None` when no
/// reconcile ran; the last finite bound when the quantile is in `+Inf`).
pub fn between(before: &Scrape, after: &Scrape, qs: &[f64]) -> (f64, Vec<Option<f64>>) {
    let buckets: Vec<(f64, f64)> = after
        .buckets
        .iter()
        .map(|(le, c)| {
            let old = before
                .buckets
                .iter()
                .find(|(b, _)| b == le)
                .map_or(0.0, |(_, c)| *c);
            (*le, c - old)
        })
        .collect();
    let total = buckets.last().map_or(0.0, |(_, c)| *c);
    let quantiles = qs
        .iter()
        .map(|q| {
            if total <= 0.0 {
                return None;
            }
            let rank = q * total;
            let mut lower = (0.0, 0.0);
            for (le, c) in &buckets {
                if *c >= rank {
                    if le.is_infinite() {
                        return Some(lower.0 * 1000.0);
                    }
                    let width = c - lower.1;
                    let frac = if width > 0.0 {
                        (rank - lower.1) / width
                    } else {
                        1.0
                    };
                    return Some((lower.0 + (le - lower.0) * frac) * 1000.0);
                }
                lower = (*le, *c);
            }
            None
        })
        .collect();
    (after.reconciles - before.reconciles, quantiles)
}

/// Wall-clock time now, Unix milliseconds (the clock of the simulator's request log).
pub fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
