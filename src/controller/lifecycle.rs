//! `mailtarget-operator run` from start to exit: the clients (writes gated by the leader Lease
//! when electing), the health server and the CRD check, the election, the controllers, and a
//! shutdown bounded in time whatever the Kubernetes API does.

use std::sync::Arc;
use std::time::Duration;

use super::leader::{self, Elector, LeaderGate, LeaseSettings, Lost};
use super::metrics::{ApiRequestMetrics, Metrics};
use super::readiness::{self, Readiness, Role};
use super::{Operator, RunArgs, Settings, server};
use crate::api::Client as ApiClient;
use crate::cli::CliError;

/// Longest wait for the release of the leader Lease at shutdown.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(2);

/// A future that resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// Runs `work` until it ends, or until `limit` after `stop` resolved (then `work` is dropped:
/// requests in flight are cut).
async fn bounded_after(
    work: impl Future<Output = ()>,
    stop: impl Future<Output = ()>,
    limit: Duration,
) {
    let deadline = async {
        stop.await;
        tokio::time::sleep(limit).await;
    };
    tokio::select! {
        () = work => {}
        () = deadline => tracing::warn!(
            "reconciles still running {limit:?} after the shutdown signal; stopping them"
        ),
    }
}

/// Runs the operator: connects to Kubernetes (kubeconfig or in-cluster) and the service, serves
/// metrics and health, checks the CRDs, waits for the leader Lease when asked, and reconciles
/// until SIGTERM or SIGINT. After the signal, reconciles in flight get `--shutdown-timeout` to
/// finish, then the Lease is released (at most 2 s) and the function returns, whether or not
/// the Kubernetes API answers.
///
/// Errors: missing API key, no Kubernetes configuration, the metrics address cannot be bound,
/// the leader Lease lost (the process exits non-zero so that it restarts as a standby).
pub async fn run(args: RunArgs) -> Result<(), CliError> {
    let metrics = Arc::new(Metrics::default());
    let config = kube::Config::infer()
        .await
        .map_err(|e| CliError::Config(format!("cannot reach Kubernetes: {e}")))?;
    let kube_error = |e: kube::Error| CliError::Config(format!("cannot reach Kubernetes: {e}"));
    // Reads, discovery and the Lease; the controllers write through `kube`.
    let base = kube::Client::try_from(config.clone()).map_err(kube_error)?;
    let gate = args.leader_elect.then(LeaderGate::closed);
    let kube = match &gate {
        Some(gate) => leader::gated_client(config, gate.clone()).map_err(kube_error)?,
        None => base.clone(),
    };
    // The service client counts requests into the metrics, its writes gated by the leader
    // Lease when electing; the accounts' clients start from it too.
    let mut api_config = (args.api.service_config()?)
        .with_observer(Arc::new(ApiRequestMetrics::new(metrics.clone())));
    if let Some(gate) = gate.clone() {
        api_config = api_config.with_write_gate(Arc::new(gate));
    }
    let api = ApiClient::new(api_config.clone())?;
    let identity = args.identity.clone().unwrap_or_else(|| {
        std::env::var("HOSTNAME")
            .unwrap_or_else(|_| format!("mailtarget-operator-{:08x}", rand::random::<u32>()))
    });

    let shutdown_timeout = args.shutdown_timeout;
    let stopped = super::common::stop_signal(async move {
        shutdown_signal().await;
        tracing::info!("shutting down: reconciles in flight get {shutdown_timeout:?} to finish");
    });

    let role = if args.leader_elect {
        Role::Standby
    } else {
        Role::Leader
    };
    let readiness = Arc::new(Readiness::new(role));
    let health = server::Health {
        metrics: metrics.clone(),
        readiness: readiness.clone(),
    };
    let bound = server::serve(args.metrics_addr, health, stopped()).await?;
    tracing::info!(addr = %bound, "serving /metrics, /healthz and /readyz");
    tokio::spawn(readiness::watch_crds(
        base.clone(),
        readiness.clone(),
        stopped(),
    ));

    let resync_interval = args.resync_interval.max(Duration::from_secs(1));
    let settings = Settings {
        resync_interval,
        // Raised to the resync interval by the detail schedule when shorter.
        detail_resync_interval: args.detail_resync_interval,
        verify_first_interval: args.verify_first_interval.max(Duration::from_millis(100)),
        verify_max_interval: args.verify_max_interval.max(Duration::from_secs(1)),
        default_adoption_policy: args.default_adoption_policy,
        ..Settings::default()
    };
    let operator = Operator::new(kube, api, metrics, settings, identity.clone())
        .scoped(args.namespace.clone(), args.label_selector.clone())
        .with_concurrency(args.reconcile_concurrency)
        .with_cluster_resource_namespace(args.cluster_resource_namespace.clone())
        .with_client_template(api_config);
    let mut synced = operator.synced();
    let marks_synced = readiness.clone();
    tokio::spawn(async move {
        if synced.wait_for(|s| *s).await.is_ok() {
            tracing::info!("the controllers' caches are filled");
            marks_synced.set_caches_synced();
        }
    });

    let Some(gate) = gate else {
        bounded_after(operator.run(stopped()), stopped(), shutdown_timeout).await;
        return Ok(());
    };
    let namespace = args
        .leader_election_namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let lease = LeaseSettings::new(
        &namespace,
        &args.leader_election_lease,
        &identity,
        args.leader_election_lease_duration,
    );
    let elector = Elector::new(base, lease, gate);
    run_elected(
        operator,
        elector,
        stopped,
        shutdown_timeout,
        Some(&readiness),
    )
    .await
    .map_err(|lost| CliError::Config(format!("lost the leader lease: {lost}")))
}

/// Waits until `elector` holds the Lease, then runs `operator` while it does: until `stop`
/// resolves (reconciles in flight then get `shutdown_timeout` to finish, and the Lease is
/// released, at most 2 s more), or until the lead is lost (the operator is dropped at once: its
/// requests in flight are cut, and the gate already refuses any further write). `readiness`,
/// when given, learns that this replica leads.
///
/// Errors: why the lead was lost, logged at error level.
pub async fn run_elected<S, F>(
    operator: Operator,
    mut elector: Elector,
    stop: S,
    shutdown_timeout: Duration,
    readiness: Option<&Readiness>,
) -> Result<(), Lost>
where
    S: Fn() -> F,
    F: Future<Output = ()> + Send + Sync + 'static,
{
    if !elector.acquire(stop()).await {
        return Ok(());
    }
    let lease = elector.settings().name.clone();
    tracing::info!(%lease, "became leader");
    if let Some(readiness) = readiness {
        readiness.set_role(Role::Leader);
    }
    tokio::select! {
        () = bounded_after(operator.run(stop()), stop(), shutdown_timeout) => {}
        lost = elector.keep() => {
            tracing::error!(
                %lease,
                %lost,
                "lost the leader lease: stopped writing, exiting so that another replica takes over"
            );
            return Err(lost);
        }
    }
    elector.release(RELEASE_TIMEOUT).await;
    Ok(())
}
