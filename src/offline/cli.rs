//! The `plan` and `apply` subcommands.

use std::path::PathBuf;

use super::accounts::{self, AccountKey};
use super::render::{self, OutputFormat};
use super::{apply, destroy, plan};
use crate::cli::output::{stderr, stdout};
use crate::cli::{ApiArgs, CliError, Target};
use crate::files::SafeDir;
use crate::manifest;
use crate::text::{MAX_LINE_CHARS, printable};

/// Arguments of `mailtarget-operator plan`.
#[derive(clap::Args, Debug, Clone)]
pub struct PlanArgs {
    /// Manifest files or directories (YAML or JSON, several documents per file, a `List`'s
    /// items read one by one; directories are read recursively); `-` reads standard input.
    /// Repeatable.
    #[arg(short = 'f', long = "filename", required = true, value_name = "PATH")]
    pub files: Vec<PathBuf>,
    /// Start the built-in simulator on a free port and run against it instead of the service.
    #[arg(long)]
    pub simulate: bool,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// The key of an account other than ClusterAccount `default` (whose key is --api-key):
    /// `NAME=@FILE` for ClusterAccount NAME, `NAMESPACE/NAME=@FILE` for an Account, FILE holding
    /// the key. Its addresses come from its manifest among the files, else from --api-url and
    /// --transmission-url. Repeatable.
    #[arg(long = "account", value_name = "NAME=@FILE", value_parser = crate::cli::Unechoed::<AccountKey>(|s| s.parse()))]
    pub accounts: Vec<AccountKey>,
    /// How to reach the service.
    #[command(flatten)]
    pub api: ApiArgs,
}

impl PlanArgs {
    /// The manifests, refusing resources whose account the run has no key for; a note on
    /// standard error for each `--account` no resource uses.
    ///
    /// Each `--account` key file is read here, once (a process substitution can be read only
    /// once), needed or not (under --simulate, or for an account no resource uses), so that a
    /// wrong path fails the dry run too; the keys read are returned beside the manifests.
    ///
    /// Errors: invalid manifests (every problem listed); an `--account` given twice, or whose
    /// file cannot be read or is empty.
    fn load(&self) -> Result<(manifest::ManifestSet, Vec<accounts::ReadKey>), CliError> {
        let names: Vec<String> = self.accounts.iter().map(|a| a.name.clone()).collect();
        if let Some(twice) =
            (names.iter().enumerate()).find_map(|(i, n)| names[..i].contains(n).then_some(n))
        {
            return Err(CliError::Config(format!(
                "--account {twice}=@... is given twice: give each account's key once"
            )));
        }
        let set = manifest::load_with(&self.files, &names)?;
        report_skipped(&set);
        let mut keys = Vec::new();
        for key in &self.accounts {
            let value = crate::api::read_key_file(&key.file)
                .map_err(|e| CliError::Config(format!("--account {}: {e}", key.name)))?;
            keys.push(accounts::ReadKey {
                name: key.name.clone(),
                value,
            });
            if !(set.resources.iter()).any(|l| accounts::of(&l.resource) == key.name) {
                let note = format!(
                    "note: --account {}: no resource uses this account",
                    key.name
                );
                stderr(&format!("{}\n", printable(&note, MAX_LINE_CHARS)));
            }
        }
        Ok((set, keys))
    }

    /// Plans each account's resources with its own client (see [`accounts`]): the deletions of
    /// `destroy` when `destroying`. Connections stay open for the apply.
    ///
    /// Errors: a connection that cannot be made; an API failure while planning (every
    /// connection is closed first); for an account other than `default`, naming it
    /// ([`CliError::InAccount`]).
    async fn plan_accounts(
        &self,
        (set, keys): &(manifest::ManifestSet, Vec<accounts::ReadKey>),
        destroying: bool,
    ) -> Result<Vec<(Target, plan::OfflinePlan)>, CliError> {
        let mut planned: Vec<(Target, plan::OfflinePlan)> = Vec::new();
        let selectors = &set.namespace_selectors;
        let groups = accounts::groups(set, &self.api, keys);
        if !self.simulate {
            accounts::one_per_company(&groups).map_err(CliError::Config)?;
        }
        for group in groups {
            let named = |e: CliError| match group.label() {
                Some(account) => CliError::InAccount {
                    account,
                    source: Box::new(e),
                },
                None => e,
            };
            let target = match group.api.connect(self.simulate).await {
                Ok(target) => target,
                Err(e) => {
                    shutdown(planned).await;
                    return Err(named(e));
                }
            };
            let built = if destroying {
                destroy::plan(&target.client, &group.resources, selectors).await
            } else {
                plan::build(&target.client, &group.resources, selectors).await
            };
            match built {
                Ok(mut plan) => {
                    plan.label(group.label());
                    planned.push((target, plan));
                }
                Err(e) => {
                    target.shutdown().await;
                    shutdown(planned).await;
                    return Err(named(e.into()));
                }
            }
        }
        Ok(planned)
    }
}

/// Closes every connection (and stops the simulators of `--simulate`).
async fn shutdown(planned: Vec<(Target, plan::OfflinePlan)>) {
    for (target, _) in planned {
        target.shutdown().await;
    }
}

/// The plans of every account, as one.
fn merged(planned: &[(Target, plan::OfflinePlan)]) -> plan::OfflinePlan {
    plan::OfflinePlan::merged(planned.iter().map(|(_, p)| p.clone()).collect())
}

/// Arguments of `mailtarget-operator plan`: [`PlanArgs`] and the exit-code convention.
#[derive(clap::Args, Debug, Clone)]
pub struct PlanCommand {
    /// What to plan.
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Exit 2 when the plan has changes (a create or an update), 0 when it has none, 1 on
    /// errors (Terraform's `-detailed-exitcode`), so CI can tell drift from success. A pending
    /// `verify-txt` of an unchanged domain asks the service to check the DNS and changes
    /// nothing: it is no change.
    #[arg(long)]
    pub detailed_exitcode: bool,
}

/// Arguments of `mailtarget-operator apply`.
#[derive(clap::Args, Debug, Clone)]
pub struct ApplyArgs {
    /// Same as for `plan`.
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Write each API key value and DKIM private key to `DIR/<namespace>/<secretName>/<key>`
    /// (mode 0600). Without it, secret material is not stored anywhere.
    #[arg(long, value_name = "DIR")]
    pub secrets_dir: Option<PathBuf>,
}

/// Runs `plan`: prints the plan and returns the process exit code: 0 when every resource could
/// be planned, 1 otherwise; with `--detailed-exitcode`, 2 when something would be created or
/// updated.
///
/// Errors: invalid manifests (every problem listed), unreachable or failing service.
pub async fn run_plan(command: PlanCommand) -> Result<i32, CliError> {
    let args = command.plan;
    let loaded = args.load()?;
    let planned = args.plan_accounts(&loaded, false).await?;
    let plan = merged(&planned);
    shutdown(planned).await;
    let summary = plan.summary();
    let failed = (plan.has_errors()).then(|| match summary.error {
        1 => "1 resource cannot be planned: see its error".to_string(),
        n => format!("{n} resources cannot be planned: see their error"),
    });
    stdout(&match args.output {
        OutputFormat::Text => render::plan_text(&plan, false),
        OutputFormat::Json => render::plan_json(&plan, false, failed.as_deref()),
    })?;
    Ok(if plan.has_errors() {
        1
    } else if command.detailed_exitcode && summary.create + summary.update > 0 {
        2
    } else {
        0
    })
}

/// Runs `apply`: plans, executes in dependency order, prints the outcome and returns the exit
/// code (0 when every resource was applied, 1 otherwise).
///
/// Errors: invalid manifests (nothing is written), unreachable or failing service while planning.
pub async fn run_apply(args: ApplyArgs) -> Result<i32, CliError> {
    let loaded = args.plan.load()?;
    // Opened before any API call: a directory that cannot take the secrets stops the run before
    // anything is created whose secret would be lost.
    let secrets_dir = open_secrets_dir(args.secrets_dir.as_deref())?;
    let mut planned = args.plan.plan_accounts(&loaded, false).await?;
    for (_, plan) in &mut planned {
        match &secrets_dir {
            Some(dir) => super::secret_files::check_apply(plan, dir),
            None => super::secret_files::note_unwritten(plan),
        }
    }
    let dir = secrets_dir.as_ref();
    Ok(carry_out(planned, (false, dir), args.plan.output, |_| true).await)
}

/// `--secrets-dir` `path`, opened (created when missing, see [`crate::files::SafeDir::open`]).
///
/// Errors: `path` is not a writable directory (exit 2).
fn open_secrets_dir(path: Option<&std::path::Path>) -> Result<Option<SafeDir>, CliError> {
    path.map(SafeDir::open)
        .transpose()
        .map_err(|e| CliError::Config(format!("--secrets-dir: {e}")))
}

/// Carries out `planned` (each account's plan, with its client): for `apply` the plan, writing
/// secret values under `dir`; for `destroy` (`deletes`) the deletion plan, removing the files
/// written for its resources under `dir`. When a plan has errors or `approve` refuses, prints
/// why, writes nothing and answers exit code 1 (a plan with errors is printed, on standard
/// output as JSON under `-o json`); else runs each plan, prints the report and answers 0, or 1
/// when a resource failed.
async fn carry_out(
    planned: Vec<(Target, plan::OfflinePlan)>,
    (deletes, dir): (bool, Option<&SafeDir>),
    output: OutputFormat,
    approve: impl FnOnce(&plan::OfflinePlan) -> bool,
) -> i32 {
    let plan = merged(&planned);
    let done = if deletes { "destroyed" } else { "applied" };
    let why = if plan.has_errors() {
        Some(": fix the errors in the plan first")
    } else if approve(&plan) {
        None
    } else {
        Some("")
    };
    if let Some(why) = why {
        let message = format!("Nothing was {done}{why}.");
        // The plan it will not carry out; as text it was shown already for the question, or it
        // goes to standard error with its errors. Exit code 1 follows whether it could be
        // written or not.
        match output {
            OutputFormat::Json => {
                let _ = stdout(&render::plan_json(&plan, deletes, Some(&message)));
            }
            OutputFormat::Text if plan.has_errors() => {
                stderr(&render::plan_text(&plan, deletes));
            }
            OutputFormat::Text => {}
        }
        stderr(&format!("{message}\n"));
        shutdown(planned).await;
        return 1;
    }
    let mut report = apply::ApplyReport::default();
    for (target, plan) in &planned {
        let part = match deletes {
            false => apply::run(&target.client, plan, dir).await,
            true => destroy::run(&target.client, plan, dir).await,
        };
        report.outcomes.extend(part.outcomes);
    }
    shutdown(planned).await;
    let text = match output {
        OutputFormat::Json => render::apply_json(&report, deletes),
        OutputFormat::Text => render::apply_text(&report, deletes),
    };
    if let Err(e) = stdout(&text) {
        stderr(&format!("error: the report could not be written: {e}\n"));
        return 1;
    }
    if report.summary().error > 0 { 1 } else { 0 }
}

/// Arguments of `mailtarget-operator destroy`.
#[derive(clap::Args, Debug, Clone)]
pub struct DestroyArgs {
    /// Same as for `plan`.
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Carry out the plan without asking. Without it, `destroy` shows the plan and asks for
    /// `yes` on a terminal, and refuses to run when standard input is not one or holds the
    /// manifests (`-f -`).
    #[arg(long)]
    pub auto_approve: bool,
    /// Remove the files `apply --secrets-dir DIR` wrote for the resources destroyed (as garbage
    /// collection removes their Secrets in a cluster); files it did not write for them stay.
    #[arg(long, value_name = "DIR")]
    pub secrets_dir: Option<PathBuf>,
}

/// Runs `destroy`: plans the deletion policy of every resource, prints the plan and stops when
/// it has errors (exit 1, nothing written), else carries it out (after the user's `yes` unless
/// `--auto-approve` or nothing is to be deleted, deactivated or removed) and prints the outcome
/// (exit 0, or 1 when a resource failed).
///
/// Errors: invalid manifests, unreachable or failing service while planning.
pub async fn run_destroy(args: DestroyArgs) -> Result<i32, CliError> {
    let loaded = args.plan.load()?;
    // An existing directory only: there is nothing to remove from one that does not exist.
    let secrets_dir = open_secrets_dir(args.secrets_dir.as_deref().filter(|d| d.exists()))?;
    let mut planned = args.plan.plan_accounts(&loaded, true).await?;
    let mut removals = 0;
    if let Some(dir) = &secrets_dir {
        for (_, plan) in &mut planned {
            removals += super::secret_files::note_removals(plan, dir);
        }
    }
    // Nothing to delete, deactivate or remove: nothing to confirm.
    let manifests_on_stdin = (args.plan.files.iter()).any(|f| f.as_os_str() == manifest::STDIN);
    let approve = |plan: &plan::OfflinePlan| {
        let nothing = plan.summary().delete == 0 && removals == 0;
        args.auto_approve || nothing || approved(plan, manifests_on_stdin)
    };
    let dir = secrets_dir.as_ref();
    Ok(carry_out(planned, (true, dir), args.plan.output, approve).await)
}

/// Shows the deletion plan and asks for `yes` on a terminal; false without a terminal, or when
/// standard input held the manifests (`manifests_on_stdin`; the caller must pass
/// `--auto-approve`), or without `yes`.
fn approved(plan: &plan::OfflinePlan, manifests_on_stdin: bool) -> bool {
    use std::io::{BufRead, IsTerminal};
    stderr(&render::plan_text(plan, true));
    if manifests_on_stdin {
        stderr(
            "destroy carries out the plan above (objects matched by external-id or by name): standard input holds the manifests, so it cannot confirm; pass --auto-approve, or give the manifests as files\n",
        );
        return false;
    }
    if !std::io::stdin().is_terminal() {
        stderr(
            "destroy carries out the plan above (objects matched by external-id or by name): run it on a terminal to confirm, or pass --auto-approve\n",
        );
        return false;
    }
    stderr("Type yes to carry out the plan above: ");
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    answer.trim() == "yes"
}

fn report_skipped(set: &manifest::ManifestSet) {
    for (source, what, why) in &set.skipped {
        let note = format!("note: skipped {what} at {source}: {why}");
        stderr(&format!("{}\n", printable(&note, MAX_LINE_CHARS)));
    }
}
