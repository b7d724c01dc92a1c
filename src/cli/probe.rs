//! `mailtarget-operator probe`: one HTTP GET whose status decides the exit code, for checks
//! in images without curl or wget (the chart's `helm test` Pod probes the operator's `/readyz`
//! through its Service with it).

use std::time::Duration;

use url::Url;

use crate::api::describe_error as describe;

/// Most characters of the answer body shown when the probe fails.
const MAX_BODY_CHARS: usize = 200;

/// Arguments of `mailtarget-operator probe`.
#[derive(clap::Args, Debug, Clone)]
pub struct ProbeArgs {
    /// URL to GET, e.g. `http://mailtarget-operator-metrics.mailtarget-system.svc:8080/readyz`.
    #[arg(long)]
    pub url: Url,
    /// Time limit of the whole probe (connecting, sending, reading the answer), e.g. `5s`.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
}

/// What a probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// A 2xx answer: the line to print.
    Passed(String),
    /// Any other answer, no answer in time, or no connection: the line to print.
    Failed(String),
}

/// GETs `args.url` once, following no redirect, within `args.timeout` (at least 1 ms).
/// `https` URLs are checked against the system's root certificates.
pub async fn probe(args: &ProbeArgs) -> ProbeOutcome {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let timeout = args.timeout.max(Duration::from_millis(1));
    let client = match reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!(
            "mailtarget-operator-probe/",
            env!("CARGO_PKG_VERSION")
        ))
        .build()
    {
        Ok(client) => client,
        Err(e) => return ProbeOutcome::Failed(format!("cannot build an HTTP client: {e}")),
    };
    let url = &args.url;
    // One time limit over connecting, the answer and its body.
    let answer = tokio::time::timeout(timeout, async {
        let response = client.get(url.clone()).send().await?;
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        Ok::<_, reqwest::Error>((status, body))
    })
    .await;
    match answer {
        Ok(Ok((status, _))) if status.is_success() => {
            ProbeOutcome::Passed(format!("GET {url}: {status}"))
        }
        Ok(Ok((status, body))) => {
            let body = crate::text::printable(body.trim(), MAX_BODY_CHARS);
            ProbeOutcome::Failed(format!("GET {url}: {status}: {body}"))
        }
        Ok(Err(e)) => ProbeOutcome::Failed(format!("GET {url}: {}", describe(&e))),
        Err(_) => ProbeOutcome::Failed(format!("GET {url}: no answer within {timeout:?}")),
    }
}

/// Runs the probe and prints its line (standard output when it passes, standard error when it
/// fails); returns the exit code: 0 passed, 1 failed.
pub async fn run_probe(args: ProbeArgs) -> i32 {
    match probe(&args).await {
        // The verdict is the exit code, whatever becomes of the line.
        ProbeOutcome::Passed(line) => {
            let _ = super::output::stdout(&format!("ok: {line}\n"));
            0
        }
        ProbeOutcome::Failed(line) => {
            super::output::stderr(&format!("probe failed: {line}\n"));
            1
        }
    }
}
