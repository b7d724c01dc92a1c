//! Counting the service calls of a phase from the simulator's request log.

use std::collections::BTreeMap;

use mailtarget_operator::simulator::RequestRecord;

/// The calls of one phase, grouped.
#[derive(Clone, Debug, Default)]
pub struct Calls {
    /// Calls by `METHOD /path/{id}/template`.
    pub by_endpoint: BTreeMap<String, usize>,
    /// Every call.
    pub total: usize,
    /// POST, PUT and DELETE calls.
    pub writes: usize,
    /// Most calls that started within any one second.
    pub peak_per_second: usize,
}

impl Calls {
    /// GET calls.
    pub fn reads(&self) -> usize {
        self.total - self.writes
    }

    /// Calls to list endpoints (GET of a collection).
    pub fn list_pages(&self) -> usize {
        self.by_endpoint
            .iter()
            .filter(|(e, _)| {
                matches!(
                    e.as_str(),
                    "GET /sub-account" | "GET /api-key" | "GET /domain/sending"
                )
            })
            .map(|(_, n)| n)
            .sum()
    }
}

/// Groups `log` by endpoint and finds the busiest second.
pub fn count(log: &[RequestRecord]) -> Calls {
    let mut calls = Calls::default();
    for r in log {
        *calls.by_endpoint.entry(r.endpoint()).or_default() += 1;
        calls.total += 1;
        calls.writes += usize::from(r.is_write());
    }
    let mut starts: Vec<i64> = log.iter().map(|r| r.unix_ms).collect();
    starts.sort_unstable();
    let mut first = 0;
    for (last, t) in starts.iter().enumerate() {
        while *t - starts[first] >= 1000 {
            first += 1;
        }
        calls.peak_per_second = calls.peak_per_second.max(last + 1 - first);
    }
    calls
}

/// A Kubernetes request as `METHOD resource[/{name}][/subresource][?watch]`, e.g.
/// `PATCH subaccounts/{name}/status` or `GET secrets/{name}`.
pub fn kube_template(method: &str, path_and_query: &str) -> String {
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let rest: &[&str] = match parts.iter().position(|p| *p == "namespaces") {
        Some(i) if parts.len() > i + 2 => &parts[i + 2..],
        _ => match parts.first() {
            Some(&"api") => parts.get(2..).unwrap_or_default(),
            _ => parts.get(3..).unwrap_or_default(),
        },
    };
    let mut out = format!("{method} ");
    for (i, p) in rest.iter().enumerate() {
        if i > 0 {
            out.push('/');
        }
        out.push_str(if i == 1 { "{name}" } else { p });
    }
    if query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1")
    {
        out.push_str("?watch");
    }
    out
}

/// Calls per second of `log`, one line per second: `+Ns  total  endpoint=count ...`
/// (diagnostics, printed with `BENCH_TRACE=1`).
pub fn timeline(log: &[RequestRecord]) -> String {
    let Some(start) = log.iter().map(|r| r.unix_ms).min() else {
        return String::new();
    };
    let mut seconds: BTreeMap<i64, BTreeMap<String, usize>> = BTreeMap::new();
    for r in log {
        *seconds
            .entry((r.unix_ms - start) / 1000)
            .or_default()
            .entry(r.endpoint())
            .or_default() += 1;
    }
    let mut out = String::new();
    for (second, by) in seconds {
        let total: usize = by.values().sum();
        let parts: Vec<String> = by.iter().map(|(e, n)| format!("{e}={n}")).collect();
        out.push_str(&format!("+{second}s {total:4} {}\n", parts.join(" ")));
    }
    out
}
