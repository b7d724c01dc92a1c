//! Leader election on a coordination.k8s.io Lease (kube-lease-manager), so that of several
//! replicas only one writes to the service.

use std::future::Future;

use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::cli::CliError;

/// A held lease; dropping it stops renewing.
pub struct Leadership {
    state: watch::Receiver<bool>,
    _task: JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>,
}

impl Leadership {
    /// Resolves when the lease is lost (no longer held by this replica).
    pub async fn lost(&mut self) {
        let _ = self.state.wait_for(|held| !*held).await;
    }
}

/// Waits until this replica holds Lease `name` in `namespace`, or until `stop` resolves
/// (then `None`). The holder renews the Lease a third of `duration` before it runs out; another
/// replica takes over at most `duration` (at least 3 s) after the holder stops renewing.
///
/// Errors: the Lease cannot be created or read.
pub async fn acquire(
    client: kube::Client,
    namespace: &str,
    name: &str,
    identity: &str,
    duration: std::time::Duration,
    stop: impl Future<Output = ()>,
) -> Result<Option<Leadership>, CliError> {
    let seconds = duration.as_secs().max(3);
    let manager = LeaseManagerBuilder::new(client, name)
        .with_namespace(namespace)
        .with_identity(identity)
        .with_duration(seconds)
        .with_grace((seconds / 3).max(1))
        .build()
        .await
        .map_err(|e| CliError::Config(format!("leader election: {e}")))?;
    let (mut state, task) = manager.watch().await;
    let acquired = tokio::select! {
        r = state.wait_for(|held| *held) => r.is_ok(),
        _ = stop => false,
    };
    Ok(acquired.then_some(Leadership { state, _task: task }))
}
