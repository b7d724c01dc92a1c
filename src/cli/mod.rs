//! Command-line pieces shared by the subcommands: how to reach the service, logging, errors.

pub mod output;
pub mod probe;

use std::path::PathBuf;

use secrecy::SecretString;
use url::Url;

use crate::api::{ApiError, Client, ClientConfig, read_key_file};
use crate::manifest::ManifestErrors;
use crate::simulator::{Simulator, SimulatorConfig};

/// Why a subcommand failed; printed by `main` as `error: <message>` with exit code 1.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Manifests failed validation; every problem is listed.
    #[error("{0}")]
    Manifests(#[from] ManifestErrors),
    /// The service answered with an error or could not be reached.
    #[error("API error: {0}")]
    Api(#[from] ApiError),
    /// A required setting is missing or invalid.
    #[error("{0}")]
    Config(String),
    /// A local I/O failure (e.g. starting the simulator).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A file could not be written (see [`crate::files`]).
    #[error(transparent)]
    File(#[from] crate::files::FileError),
    /// An error reaching or planning an account other than `default` (`--account`), naming it.
    #[error("account {account}: {source}")]
    InAccount {
        /// The account, as `--account` names it.
        account: String,
        /// What went wrong.
        source: Box<CliError>,
    },
}

impl CliError {
    /// The error as printed on the terminal: every text from outside (file names, manifest
    /// values, the service's messages) escaped by [`printable`](crate::text::printable), so it
    /// cannot forge lines. Invalid manifests are one line each.
    pub fn for_terminal(&self) -> String {
        match self {
            // Each problem is a line made printable by its own Display.
            CliError::Manifests(errors) => errors.to_string(),
            other => crate::text::printable(&other.to_string(), crate::text::MAX_LINE_CHARS),
        }
    }

    /// The error as `-o json` prints it on standard output, so that a pipeline reading the
    /// output sees why the run stopped: `{"error": {"message", "exitCode", "problems"}}`,
    /// `problems` (invalid manifests only) holding each [`ManifestError`](crate::manifest::ManifestError)
    /// as JSON. The message is the one of [`Display`](std::fmt::Display) (for invalid
    /// manifests, its first line); like it, it holds no secret.
    pub fn to_json(&self, exit_code: u8) -> serde_json::Value {
        let text = self.to_string();
        let message = text
            .lines()
            .next()
            .unwrap_or_default()
            .trim_end_matches(':');
        let mut error = serde_json::json!({"message": message, "exitCode": exit_code});
        if let CliError::Manifests(errors) = self {
            error["problems"] = errors.0.iter().map(|e| e.to_json()).collect();
        }
        serde_json::json!({ "error": error })
    }

    /// The process exit code: 2 for invalid input or usage (manifests that fail validation, a
    /// missing or invalid setting), 1 for a failure while running (the service, local I/O).
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Manifests(_) | CliError::Config(_) => 2,
            // An unusable setting (a key with control characters, say) is invalid input.
            CliError::Api(ApiError::Config { .. }) => 2,
            CliError::Api(_) | CliError::Io(_) | CliError::File(_) => 1,
            CliError::InAccount { source, .. } => source.exit_code(),
        }
    }
}

/// clap's value parser for a value that may be secret (a key, or `NAME=@FILE` given by mistake
/// as `NAME=KEY`): `parse`, with an error that never repeats the value, as clap's own does.
#[derive(Clone, Copy)]
pub struct Unechoed<T>(pub fn(&str) -> Result<T, String>);

impl<T: Clone + Send + Sync + 'static> clap::builder::TypedValueParser for Unechoed<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        let text = value.to_str().ok_or_else(|| "not UTF-8 text".to_string());
        text.and_then(self.0).map_err(|message| {
            let arg = arg.map_or_else(|| "a value".to_string(), |a| format!("'{a}'"));
            let message = format!(
                "invalid value for {arg} (not repeated here: it may be secret): {message}\n"
            );
            clap::Error::raw(clap::error::ErrorKind::ValueValidation, message).with_cmd(cmd)
        })
    }
}

/// How to reach the service. Flags override the environment. Its `Debug` form never shows the
/// key.
#[derive(clap::Args, Clone)]
pub struct ApiArgs {
    /// Company API key (ClusterAccount `default`'s), sent as `Authorization: Bearer <key>`.
    /// Required unless --api-key-file is given; plan, apply and destroy need one only when a
    /// resource uses `default`, and none under --simulate. Either flag overrides the other's
    /// environment variable.
    #[arg(long, env = "MAILTARGET_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// File holding the company API key (surrounding whitespace ignored), read again whenever
    /// it changes (looked at at most once per second): a rotated key (a mounted Kubernetes
    /// Secret) is used from the next request a second after the change on, without a restart.
    /// Instead of --api-key.
    #[arg(long, env = "MAILTARGET_API_KEY_FILE", value_name = "FILE")]
    pub api_key_file: Option<PathBuf>,
    /// PEM file with one or more CA certificates trusted in addition to the system's roots,
    /// e.g. the CA of a TLS-inspecting proxy in front of the API. Read at start.
    #[arg(long, env = "MAILTARGET_CA_BUNDLE", value_name = "FILE")]
    pub ca_bundle: Option<PathBuf>,
    /// Base URL of the management API.
    #[arg(long, env = "MAILTARGET_API_URL", default_value = ClientConfig::DEFAULT_API_URL)]
    pub api_url: Url,
    /// Base URL of the transmission API.
    #[arg(long, env = "MAILTARGET_TRANSMISSION_URL", default_value = ClientConfig::DEFAULT_TRANSMISSION_URL)]
    pub transmission_url: Url,
    /// Timeout of one API request, in seconds (1 to 3600).
    #[arg(long, env = "MAILTARGET_API_TIMEOUT", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub api_timeout: u64,
    /// Most API requests in flight at once (per account; 1 to 1000, as an account's
    /// `spec.requestBudget.concurrency`).
    #[arg(long, env = "MAILTARGET_API_CONCURRENCY", default_value_t = 8,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1000))]
    pub api_concurrency: usize,
    /// Most API requests per second (per account; 1 to 10000, as an account's
    /// `spec.requestBudget.requestsPerSecond`); unlimited when unset.
    #[arg(long, env = "MAILTARGET_API_RPS",
          value_parser = clap::builder::RangedU64ValueParser::<u32>::new().range(1..=10000))]
    pub api_rps: Option<u32>,
}

impl std::fmt::Debug for ApiArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiArgs")
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_key_file", &self.api_key_file)
            .field("ca_bundle", &self.ca_bundle)
            .field("api_url", &self.api_url)
            .field("transmission_url", &self.transmission_url)
            .field("api_timeout", &self.api_timeout)
            .field("api_concurrency", &self.api_concurrency)
            .field("api_rps", &self.api_rps)
            .finish()
    }
}

/// A connected client, with the in-process simulator behind it when `--simulate` was given.
pub struct Target {
    /// Client for the service (or the simulator).
    pub client: Client,
    simulator: Option<Simulator>,
}

impl Target {
    /// Stops the in-process simulator, if any.
    pub async fn shutdown(self) {
        if let Some(sim) = self.simulator {
            sim.shutdown().await;
        }
    }
}

/// The error of a missing API key.
const NO_API_KEY: &str = "no API key: set MAILTARGET_API_KEY (or --api-key), or MAILTARGET_API_KEY_FILE (or --api-key-file)";

impl ApiArgs {
    /// Settles --api-key against --api-key-file from where each came from (`matches`, the
    /// subcommand's): a flag overrides the other's environment variable (flags override the
    /// environment), so one of the two is dropped.
    ///
    /// Errors (clap's `ArgumentConflict`): both flags given, or both environment variables
    /// set and neither flag; `--api-url` or `--transmission-url` given with `--simulate`,
    /// which would ignore them (their environment variables are ignored under `--simulate`).
    pub fn prefer_flags(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        use clap::parser::ValueSource::{CommandLine, EnvVariable};
        let source = |id: &str| {
            (matches.ids().any(|i| i == id))
                .then(|| matches.value_source(id))
                .flatten()
        };
        let conflict = |message: &str| {
            Err(clap::Error::raw(
                clap::error::ErrorKind::ArgumentConflict,
                message.to_string(),
            ))
        };
        let simulate = matches.ids().any(|i| i == "simulate") && matches.get_flag("simulate");
        for (id, flag) in [
            ("api_url", "--api-url"),
            ("transmission_url", "--transmission-url"),
        ] {
            if simulate && source(id) == Some(CommandLine) {
                return conflict(&format!(
                    "{flag} cannot be used with --simulate, which runs against the built-in simulator: give one"
                ));
            }
        }
        match (source("api_key"), source("api_key_file")) {
            (Some(CommandLine), Some(EnvVariable)) => self.api_key_file = None,
            (Some(EnvVariable), Some(CommandLine)) => self.api_key = None,
            (Some(CommandLine), Some(CommandLine)) => {
                return conflict("--api-key and --api-key-file cannot be used together: give one");
            }
            (Some(_), Some(_)) => {
                return conflict(
                    "MAILTARGET_API_KEY and MAILTARGET_API_KEY_FILE are both set: unset one, or choose with --api-key or --api-key-file",
                );
            }
            _ => {}
        }
        Ok(())
    }

    /// The configuration of a client of the service these flags describe: the key (given, or
    /// read from --api-key-file), the URLs, the CA bundle and the request settings.
    ///
    /// Errors ([`CliError::Config`]): no key given, the key file or the CA bundle cannot be
    /// read.
    pub fn service_config(&self) -> Result<ClientConfig, CliError> {
        let (api_url, transmission_url) = (self.api_url.clone(), self.transmission_url.clone());
        let mut config = match (&self.api_key_file, &self.api_key) {
            (Some(path), _) => {
                let from_file = ClientConfig::from_key_file(
                    api_url.clone(),
                    transmission_url.clone(),
                    path.clone(),
                )
                .map_err(|e| CliError::Config(e.to_string()))?;
                let mut config = self.client_config(api_url, transmission_url, from_file.api_key);
                config.api_key_file = from_file.api_key_file;
                config
            }
            (None, Some(key)) if !key.is_empty() => {
                self.client_config(api_url, transmission_url, key.clone().into())
            }
            (None, _) => return Err(CliError::Config(NO_API_KEY.into())),
        };
        if let Some(path) = &self.ca_bundle {
            let pem = std::fs::read(path).map_err(|e| {
                CliError::Config(format!("cannot read the CA bundle {}: {e}", path.display()))
            })?;
            config.ca_bundle_pem = Some(pem);
        }
        Ok(config)
    }

    /// The client configuration these flags describe, with `key` and URLs given.
    pub fn client_config(
        &self,
        api_url: Url,
        transmission_url: Url,
        key: SecretString,
    ) -> ClientConfig {
        let mut config = ClientConfig::new(api_url, transmission_url, key);
        config.timeout = std::time::Duration::from_secs(self.api_timeout.max(1));
        config.max_concurrency = self.api_concurrency.max(1);
        config.requests_per_second = self.api_rps.and_then(std::num::NonZeroU32::new);
        config
    }

    /// Connects to the service, or starts the simulator in-process when `simulate` is true.
    ///
    /// Errors: no API key without `simulate`; a `--api-key-file` that cannot be read (also with
    /// `simulate`, which uses no key); the simulator cannot bind; invalid client settings.
    pub async fn connect(&self, simulate: bool) -> Result<Target, CliError> {
        if simulate {
            // The key is unused, but a key file that cannot be read is the same mistake as
            // without --simulate (as for --account's files): said now, not at the real run.
            if let Some(path) = &self.api_key_file {
                read_key_file(path).map_err(|e| CliError::Config(e.to_string()))?;
            }
            let key = format!("sim-{:016x}", rand::random::<u64>());
            let sim = Simulator::start(SimulatorConfig::new(key.clone())).await?;
            let parse = |s: String| {
                Url::parse(&s).map_err(|e| CliError::Config(format!("simulator address: {e}")))
            };
            let config = self.client_config(
                parse(sim.base_url())?,
                parse(sim.transmission_url())?,
                key.into(),
            );
            return Ok(Target {
                client: Client::new(config)?,
                simulator: Some(sim),
            });
        }
        let config = self.service_config().map_err(|e| match e {
            CliError::Config(m) if m == NO_API_KEY => CliError::Config(format!(
                "{m}, or use --simulate to run against the built-in simulator"
            )),
            e => e,
        })?;
        Ok(Target {
            client: Client::new(config)?,
            simulator: None,
        })
    }
}

#[cfg(test)]
mod debug_tests {
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        api: super::ApiArgs,
    }

    /// The key never reaches a `Debug` rendering (a `?args` in a log line).
    #[test]
    fn debug_form_hides_the_key() {
        let cli = Cli::parse_from(["test", "--api-key", "sk-very-secret"]);
        let shown = format!("{:?}", cli.api);
        assert!(!shown.contains("sk-very-secret"), "{}", shown.len());
        assert!(shown.contains("<redacted>"));
    }
}
