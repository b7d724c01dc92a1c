//! `mailtarget-operator simulator`: run the simulator as a standalone server.
//!
//! When ready it prints exactly one line, `listening on http://ADDR` (`https://ADDR` with
//! `--tls-cert` and `--tls-key`), to standard output and serves until SIGINT or SIGTERM.

use std::future::Future;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::{FaultConfig, Simulator, SimulatorConfig, TlsIdentity};

/// Command line arguments of the `simulator` subcommand.
#[derive(clap::Args, Clone)]
pub struct SimulatorArgs {
    /// Address to listen on; port 0 picks a free port (printed on start).
    #[arg(long, default_value = "127.0.0.1:8025")]
    pub listen: SocketAddr,
    /// Company API key that the simulator accepts (`Authorization: Bearer <key>`).
    #[arg(long, env = "MAILTARGET_API_KEY", hide_env_values = true, value_parser = crate::cli::Unechoed(parse_key))]
    pub api_key: String,
    /// Add an address to the suppression list (repeatable). Applied to transmissions with
    /// `optionsAttributes.transactional: false`.
    #[arg(long = "suppress", value_name = "EMAIL")]
    pub suppress: Vec<String>,
    /// Number of verify-txt calls after which a sending domain counts as verified (0: at once).
    #[arg(long, default_value_t = 1)]
    pub verify_after_calls: u32,
    /// Delay added to every response, in milliseconds.
    #[arg(long, default_value_t = 0)]
    pub latency_ms: u64,
    /// Fraction (0 to 1) of requests answered 500 without being processed.
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    pub error_rate: f64,
    /// Requests served per second; the excess gets 429 with Retry-After.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_limit_rps: Option<u32>,
    /// Fraction (0 to 1) of requests processed whose response is then lost (500 or reset).
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    pub drop_response_rate: f64,
    /// Seed of the fault injection random number generator.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Key for the /_simulator control endpoints (default: the API key).
    #[arg(long, value_parser = crate::cli::Unechoed(parse_key))]
    pub admin_key: Option<String>,
    /// Serve HTTPS with this PEM certificate chain (server certificate first); needs
    /// --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

impl std::fmt::Debug for SimulatorArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimulatorArgs")
            .field("listen", &self.listen)
            .field("api_key", &"<redacted>")
            .field("suppress", &self.suppress)
            .field("verify_after_calls", &self.verify_after_calls)
            .field("latency_ms", &self.latency_ms)
            .field("error_rate", &self.error_rate)
            .field("rate_limit_rps", &self.rate_limit_rps)
            .field("drop_response_rate", &self.drop_response_rate)
            .field("seed", &self.seed)
            .field("admin_key", &self.admin_key.as_ref().map(|_| "<redacted>"))
            .field("tls_cert", &self.tls_cert)
            .field("tls_key", &self.tls_key)
            .finish()
    }
}

fn parse_rate(raw: &str) -> Result<f64, String> {
    let rate: f64 = raw
        .parse()
        .map_err(|_| format!("{raw:?} is not a number"))?;
    if rate.is_finite() && (0.0..=1.0).contains(&rate) {
        Ok(rate)
    } else {
        Err(format!("{raw} is not between 0 and 1"))
    }
}

impl SimulatorArgs {
    /// The simulator configuration these arguments describe, without TLS (see
    /// [`Self::tls_identity`]).
    pub fn to_config(&self) -> SimulatorConfig {
        let mut config = SimulatorConfig::new(self.api_key.clone());
        config.listen = self.listen;
        config.suppress = self.suppress.clone();
        config.verify_after_calls = self.verify_after_calls;
        config.latency = Duration::from_millis(self.latency_ms);
        config.admin_key = self.admin_key.clone();
        config.faults = FaultConfig {
            error_rate: self.error_rate,
            latency: Duration::ZERO,
            rate_limit_rps: self.rate_limit_rps,
            drop_response_rate: self.drop_response_rate,
            seed: self.seed,
        };
        config
    }

    /// The certificate and key of `--tls-cert` and `--tls-key`, read from their files; `None`
    /// without them.
    ///
    /// # Errors
    /// A file cannot be read (the error names it).
    pub fn tls_identity(&self) -> std::io::Result<Option<TlsIdentity>> {
        let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) else {
            return Ok(None);
        };
        let read = |path: &PathBuf| {
            std::fs::read(path).map_err(|e| {
                std::io::Error::new(e.kind(), format!("cannot read {}: {e}", path.display()))
            })
        };
        Ok(Some(TlsIdentity {
            cert_chain_pem: read(cert)?,
            private_key_pem: read(key)?,
        }))
    }
}

/// A key the simulator accepts: not empty nor only spaces (which would let a request with
/// `Authorization: Bearer ` and nothing after it in), and without a control character (a line
/// end), which no client can send in a header.
fn parse_key(key: &str) -> Result<String, String> {
    if key.trim().is_empty() {
        return Err("the key is empty: give a non-empty key".into());
    }
    if key.chars().any(char::is_control) {
        return Err("the key holds a control character (a line end?): give it on one line".into());
    }
    Ok(key.to_string())
}

/// Runs the simulator until SIGINT or SIGTERM.
///
/// # Errors
/// When the address cannot be bound, standard output cannot be written, or the signal
/// handlers cannot be installed.
pub async fn run(args: SimulatorArgs) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let signals = shutdown_signal()?;
    serve(args, std::io::stdout(), signals).await
}

/// Starts the simulator, writes `listening on http://ADDR\n` (`https://` with TLS) to `out`
/// (flushed), serves until `shutdown` completes, then stops it.
///
/// # Errors
/// When the address cannot be bound, the TLS files cannot be read or used, or `out` cannot be
/// written.
pub async fn serve<W, F>(
    args: SimulatorArgs,
    mut out: W,
    shutdown: F,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>>
where
    W: Write + Send,
    F: Future<Output = ()> + Send,
{
    let mut config = args.to_config();
    config.tls = args.tls_identity()?;
    let listen = config.listen;
    let simulator = Simulator::start(config)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot serve on {listen}: {e}")))?;
    writeln!(out, "listening on {}", simulator.base_url())?;
    out.flush()?;
    tracing::info!(addr = %simulator.addr(), "simulator serving");
    shutdown.await;
    simulator.shutdown().await;
    Ok(())
}

/// A future completing on the first SIGINT or SIGTERM.
fn shutdown_signal() -> std::io::Result<impl Future<Output = ()> + Send> {
    #[cfg(unix)]
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    Ok(async move {
        #[cfg(unix)]
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: SimulatorArgs,
    }

    fn parse(argv: &[&str]) -> Result<SimulatorArgs, clap::Error> {
        Wrapper::try_parse_from(std::iter::once("sim").chain(argv.iter().copied())).map(|w| w.args)
    }

    /// Flags map onto the configuration.
    #[test]
    fn flags_to_config() {
        let args = parse(&[
            "--api-key",
            "k",
            "--listen",
            "127.0.0.1:0",
            "--suppress",
            "a@x.co",
            "--suppress",
            "b@x.co",
            "--verify-after-calls",
            "3",
            "--latency-ms",
            "20",
            "--error-rate",
            "0.1",
            "--rate-limit-rps",
            "5",
            "--drop-response-rate",
            "0.2",
            "--seed",
            "7",
            "--admin-key",
            "admin-secret-xyz",
        ])
        .unwrap();
        let config = args.to_config();
        assert_eq!(config.suppress, vec!["a@x.co", "b@x.co"]);
        assert_eq!(config.verify_after_calls, 3);
        assert_eq!(config.latency, Duration::from_millis(20));
        assert_eq!(config.faults.rate_limit_rps, Some(5));
        assert_eq!(config.faults.seed, 7);
        assert_eq!(config.effective_admin_key(), "admin-secret-xyz");
        assert!(!format!("{args:?}").contains("admin-secret-xyz"));
    }

    /// Defaults, and rejection of out-of-range values.
    #[test]
    fn defaults_and_rejections() {
        let args = parse(&["--api-key", "k"]).unwrap();
        assert_eq!(args.listen.to_string(), "127.0.0.1:8025");
        assert_eq!(args.verify_after_calls, 1);
        assert!(parse(&["--api-key", "k", "--error-rate", "1.5"]).is_err());
        assert!(parse(&["--api-key", "k", "--rate-limit-rps", "0"]).is_err());
        // A key that is empty or only spaces would let `Authorization: Bearer ` in.
        for key in ["", "  "] {
            assert!(parse(&["--api-key", key]).is_err(), "{key:?}");
            assert!(
                parse(&["--api-key", "k", "--admin-key", key]).is_err(),
                "{key:?}"
            );
        }
        // A key with a line end or another control character cannot be sent in a header: it is
        // refused, and the error does not repeat it.
        for key in ["hunter-one\n", "hunter\rtwo", "hunter\u{1}three"] {
            for args in [
                vec!["--api-key", key],
                vec!["--api-key", "k", "--admin-key", key],
            ] {
                let error = parse(&args).unwrap_err().to_string();
                assert!(!error.contains("hunter"), "{key:?}: {error}");
                assert!(error.contains("control character"), "{key:?}: {error}");
            }
        }
    }

    /// An address that cannot be bound is named in the error.
    #[tokio::test]
    async fn an_address_in_use_is_named() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap().to_string();
        let args = parse(&["--api-key", "k", "--listen", &addr]).unwrap();
        let error = serve(args, Vec::new(), async {}).await.unwrap_err();
        assert!(error.to_string().contains(&addr), "{error}");
    }

    /// A writer that forwards each write to a channel.
    struct ChannelWriter(tokio::sync::mpsc::UnboundedSender<Vec<u8>>);

    impl Write for ChannelWriter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let _ = self.0.send(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// serve prints exactly one `listening on http://ADDR` line and stops on the signal.
    #[tokio::test]
    async fn serve_prints_listening_line() {
        let args = parse(&["--api-key", "k", "--listen", "127.0.0.1:0"]).unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(serve(args, ChannelWriter(tx), async {
            let _ = stopped.await;
        }));
        let mut printed = Vec::new();
        while !printed.ends_with(b"\n") {
            let chunk = tokio::time::timeout(Duration::from_secs(10), rx.recv())
                .await
                .expect("listening line within 10s")
                .expect("writer alive");
            printed.extend(chunk);
        }
        let line = String::from_utf8(printed).unwrap();
        let addr = line
            .strip_prefix("listening on http://")
            .and_then(|rest| rest.strip_suffix('\n'))
            .expect("line format");
        let addr: SocketAddr = addr.parse().unwrap();
        assert_ne!(addr.port(), 0);
        tokio::net::TcpStream::connect(addr).await.unwrap();
        stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("stops within 10s")
            .unwrap()
            .unwrap();
        assert!(rx.recv().await.is_none(), "exactly one line");
    }
}
