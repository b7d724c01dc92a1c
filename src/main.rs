//! `mailtarget-operator`: command-line entry point. Parses arguments and hands each subcommand
//! to the library.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use mailtarget_operator::cli::output::{stderr, stdout};
use mailtarget_operator::cli::probe::{ProbeArgs, run_probe};
use mailtarget_operator::cli::{ApiArgs, CliError};
use mailtarget_operator::controller::{LogFormat, RunArgs};
use mailtarget_operator::offline::cli::{
    ApplyArgs, DestroyArgs, PlanCommand, run_apply, run_destroy, run_plan,
};
use mailtarget_operator::offline::render::OutputFormat;
use mailtarget_operator::simulator::cli::SimulatorArgs;

/// Kubernetes operator that makes a Mailtarget email-delivery account declarative.
#[derive(Parser, Debug)]
#[command(name = "mailtarget-operator", version, about)]
struct Cli {
    /// Log filter (tracing-subscriber's EnvFilter syntax), e.g. `info` or `mailtarget_operator=debug`.
    #[arg(long, env = "RUST_LOG", default_value = "warn", global = true)]
    log_level: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the CustomResourceDefinitions as YAML, or write one file per CRD into a directory.
    Crds {
        /// Write `<plural>.<group>.yaml` files into DIR (as kept in the repository's `crds/`)
        /// instead of printing one YAML stream.
        #[arg(long, value_name = "DIR")]
        out_dir: Option<std::path::PathBuf>,
    },
    /// Show what `apply` would do for manifest files, without writing anything.
    Plan(PlanCommand),
    /// Create or update the account's objects to match manifest files.
    Apply(ApplyArgs),
    /// Carry out the deletion policy of every resource in manifest files (delete, deactivate or
    /// keep its object), as deleting the resources in a cluster would.
    Destroy(DestroyArgs),
    /// Run the operator: reconcile SubAccount, ApiKey and SendingDomain resources in a cluster.
    Run(Box<RunArgs>),
    /// Serve the built-in simulator of the Mailtarget API.
    Simulator(SimulatorArgs),
    /// GET a URL once and exit 0 on a 2xx answer, 1 otherwise (e.g. the operator's `/readyz`
    /// in the chart's `helm test` Pod, whose image has no curl).
    Probe(ProbeArgs),
}

impl Command {
    /// True when the subcommand was asked for `-o json`.
    fn json_output(&self) -> bool {
        let output = match self {
            Command::Plan(args) => args.plan.output,
            Command::Apply(args) => args.plan.output,
            Command::Destroy(args) => args.plan.output,
            _ => return false,
        };
        output == OutputFormat::Json
    }

    /// How the subcommand reaches the service, for those that do.
    fn api_mut(&mut self) -> Option<&mut ApiArgs> {
        match self {
            Command::Plan(args) => Some(&mut args.plan.api),
            Command::Apply(args) => Some(&mut args.plan.api),
            Command::Destroy(args) => Some(&mut args.plan.api),
            Command::Run(args) => Some(&mut args.api),
            Command::Crds { .. } | Command::Simulator(_) | Command::Probe(_) => None,
        }
    }
}

fn crds(out_dir: Option<&std::path::Path>) -> Result<i32, CliError> {
    use mailtarget_operator::crd::generate;
    let render = |e: serde_yaml::Error| CliError::Config(format!("cannot render CRDs: {e}"));
    let Some(dir) = out_dir else {
        stdout(&generate::crds_yaml().map_err(render)?)?;
        return Ok(0);
    };
    // No symbolic link below DIR is followed and no parent of DIR is created; a directory that
    // cannot be opened is a usage error (exit 2), as for `apply --secrets-dir`.
    let dir = mailtarget_operator::files::SafeDir::open(dir)
        .map_err(|e| CliError::Config(format!("--out-dir: {e}")))?;
    for crd in generate::all_crds() {
        let yaml = generate::crd_yaml(&crd).map_err(render)?;
        let written = dir.write(&[&generate::file_name(&crd)], yaml.as_bytes(), 0o644)?;
        let did = if written.changed {
            "wrote"
        } else {
            "unchanged"
        };
        let wrote = format!("{did} {}", written.path.display());
        let wrote =
            mailtarget_operator::text::printable(&wrote, mailtarget_operator::text::MAX_LINE_CHARS);
        stderr(&format!("{wrote}\n"));
    }
    Ok(0)
}

/// Most time the runtime waits, at exit, for blocking tasks still running (a DNS lookup of an
/// unreachable API server, say): the process exits within it.
const RUNTIME_SHUTDOWN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            stderr(&format!("error: cannot start the async runtime: {e}\n"));
            return ExitCode::from(1);
        }
    };
    let code = runtime.block_on(cli_main());
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN_TIMEOUT);
    code
}

/// The parsed command line; on a usage error, exits after printing it: with code 2 (clap's),
/// or 1 under `plan --detailed-exitcode`, where 2 means "changes pending" (Terraform's
/// convention: every error exits 1).
fn parse() -> Cli {
    let parsed = Cli::command().try_get_matches().and_then(|matches| {
        let mut cli = Cli::from_arg_matches(&matches)?;
        if let (Some(api), Some((name, sub))) = (cli.command.api_mut(), matches.subcommand()) {
            api.prefer_flags(sub).map_err(|e| {
                // Shown with the subcommand's usage, as clap's own errors are.
                let mut command = Cli::command();
                command.build();
                match command.find_subcommand_mut(name) {
                    Some(subcommand) => e.format(subcommand),
                    None => e,
                }
            })?;
        }
        Ok(cli)
    });
    parsed.unwrap_or_else(|e| {
        // The subcommand is the first argument not an option (nor `--log-level`'s value).
        let mut args = std::env::args_os().skip(1);
        let mut after = Vec::new();
        while let Some(arg) = args.next() {
            if arg == "--log-level" {
                args.next();
            } else if !arg.to_string_lossy().starts_with('-') {
                after = std::iter::once(arg).chain(args).collect();
                break;
            }
        }
        let detailed = after.first().is_some_and(|c| c == "plan")
            && after.iter().any(|a| a == "--detailed-exitcode");
        if e.use_stderr() && detailed {
            let _ = e.print();
            std::process::exit(1);
        }
        e.exit()
    })
}

async fn cli_main() -> ExitCode {
    let cli = parse();
    let filter =
        tracing_subscriber::EnvFilter::try_new(&cli.log_level).unwrap_or_else(|_| "warn".into());
    // A log line that cannot be written (the reader of standard error gone) is dropped: the
    // subscriber's own report of it would panic as `eprintln!` does (see `cli::output`). Colours
    // only on a terminal: a pod's log or a file would show the escape codes as text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .log_internal_errors(false);
    match &cli.command {
        Command::Run(args) if args.log_format == LogFormat::Json => builder.json().init(),
        _ => builder.init(),
    }
    // With `plan --detailed-exitcode`, 2 means "changes pending": every error exits 1, as with
    // Terraform.
    let errors_exit_1 = matches!(&cli.command, Command::Plan(args) if args.detailed_exitcode);
    let json_output = cli.command.json_output();
    let result: Result<i32, CliError> = match cli.command {
        Command::Crds { out_dir } => crds(out_dir.as_deref()),
        Command::Plan(args) => run_plan(args).await,
        Command::Apply(args) => run_apply(args).await,
        Command::Destroy(args) => run_destroy(args).await,
        Command::Run(args) => mailtarget_operator::controller::run(*args)
            .await
            .map(|()| 0),
        Command::Probe(args) => Ok(run_probe(args).await),
        Command::Simulator(args) => mailtarget_operator::simulator::cli::run(args)
            .await
            .map(|()| 0)
            .map_err(|e| CliError::Config(e.to_string())),
    };
    match result {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            let code = if errors_exit_1 { 1 } else { e.exit_code() };
            // Under `-o json` the output stays JSON, also when the run stopped before a plan.
            if json_output {
                let _ = stdout(&format!("{}\n", e.to_json(code)));
            }
            stderr(&format!("error: {}\n", e.for_terminal()));
            ExitCode::from(code)
        }
    }
}
