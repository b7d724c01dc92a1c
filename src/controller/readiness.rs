//! What `/readyz` answers, and the check of the operator's prerequisite behind it: its
//! CustomResourceDefinitions established in the cluster.
//!
//! - The leader (or the only replica, without leader election) is ready once the CRDs are
//!   established and the controllers' caches (their reflectors' first lists) are filled.
//! - A standby is ready once the CRDs are established: it would take over at once.
//! - Otherwise `/readyz` answers 503 with the reason: which CRDs are missing, the Kubernetes API
//!   error, or the caches still filling.
//!
//! A CRD counts as established when its resource is in the API discovery document of its group
//! version (`/apis/GROUP/VERSION`): kube-apiserver lists a CRD's resource there only once the
//! CRD is `Established`, and discovery needs no RBAC rule (every authenticated user may read
//! it). The check runs every few seconds; a missing CRD or an unreachable API is logged at error
//! level, at most once a minute (governor), naming what is missing or the error.

use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::{Quota, RateLimiter};

/// Time between two checks of the CRDs while they are not all established.
const RECHECK_MISSING: Duration = Duration::from_secs(2);
/// Time between two checks of the CRDs once they are established.
const RECHECK_ESTABLISHED: Duration = Duration::from_secs(30);
/// Time limit of one check (one discovery request per group version).
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// What this replica does now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Waits for the leader Lease.
    Standby,
    /// Runs the controllers (the leader, or the only replica without leader election).
    Leader,
}

/// The state of the CRDs as last checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Crds {
    /// Not checked yet.
    Unchecked,
    /// Every CRD of the operator is established.
    Established,
    /// These CRDs (`plural.group`) are not established.
    Missing(Vec<String>),
    /// The Kubernetes API did not answer the check: the error.
    Unreachable(String),
}

#[derive(Debug)]
struct State {
    role: Role,
    crds: Crds,
    caches_synced: bool,
}

/// Readiness of this replica, shared by `/readyz`, the CRD check and the controllers.
#[derive(Debug)]
pub struct Readiness(Mutex<State>);

impl Readiness {
    /// Not ready: CRDs unchecked, caches empty, in `role`.
    pub fn new(role: Role) -> Self {
        Readiness(Mutex::new(State {
            role,
            crds: Crds::Unchecked,
            caches_synced: false,
        }))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets what this replica does.
    pub fn set_role(&self, role: Role) {
        self.state().role = role;
    }

    /// Records that the controllers' caches hold their first lists.
    pub fn set_caches_synced(&self) {
        self.state().caches_synced = true;
    }

    /// Records the result of a CRD check.
    pub fn set_crds(&self, crds: Crds) {
        self.state().crds = crds;
    }

    /// `Ok(())` when ready, else why not (one line for `/readyz` and logs).
    pub fn check(&self) -> Result<(), String> {
        let state = self.state();
        match &state.crds {
            Crds::Unchecked => return Err("checking the CustomResourceDefinitions".into()),
            Crds::Missing(missing) => {
                return Err(format!(
                    "CustomResourceDefinitions not established: {}",
                    missing.join(", ")
                ));
            }
            Crds::Unreachable(error) => {
                return Err(format!("cannot reach the Kubernetes API: {error}"));
            }
            Crds::Established => {}
        }
        match state.role {
            Role::Standby => Ok(()),
            Role::Leader if state.caches_synced => Ok(()),
            Role::Leader => Err("the controllers' caches are filling".into()),
        }
    }
}

/// The resources the operator's CRDs serve: (group/version, plural, CRD name), one per CRD at
/// its storage version.
fn expected() -> Vec<(String, String, String)> {
    crate::crd::generate::all_crds()
        .into_iter()
        .map(|crd| {
            let version = crd
                .spec
                .versions
                .iter()
                .find(|v| v.storage)
                .or_else(|| crd.spec.versions.first())
                .map(|v| v.name.clone())
                .unwrap_or_default();
            (
                format!("{}/{version}", crd.spec.group),
                crd.spec.names.plural.clone(),
                crd.metadata.name.clone().unwrap_or_default(),
            )
        })
        .collect()
}

/// Checks once which CRDs are established, through API discovery.
pub async fn check_crds(client: &kube::Client) -> Crds {
    let expected = expected();
    let mut versions: Vec<&str> = expected.iter().map(|(gv, _, _)| gv.as_str()).collect();
    versions.sort_unstable();
    versions.dedup();
    let mut served = Vec::new();
    for gv in versions {
        match client.list_api_group_resources(gv).await {
            Ok(list) => served.extend(list.resources.into_iter().map(|r| (gv.to_owned(), r.name))),
            // The group version is not served at all: none of its CRDs is established.
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Crds::Unreachable(e.to_string()),
        }
    }
    let missing: Vec<String> = expected
        .into_iter()
        .filter(|(gv, plural, _)| !served.iter().any(|(g, p)| g == gv && p == plural))
        .map(|(_, _, name)| name)
        .collect();
    if missing.is_empty() {
        Crds::Established
    } else {
        Crds::Missing(missing)
    }
}

/// Checks the CRDs until `stop` resolves: every 2 s while any is missing, every 30 s once all
/// are established; records each result in `readiness`. A missing CRD or an unreachable API is
/// logged at error level at most once a minute; the CRDs becoming established is logged at info
/// level.
pub async fn watch_crds(
    client: kube::Client,
    readiness: Arc<Readiness>,
    stop: impl std::future::Future<Output = ()>,
) {
    let errors = RateLimiter::direct(Quota::per_minute(NonZeroU32::MIN));
    let checks = async {
        let mut established = false;
        loop {
            let crds = tokio::time::timeout(CHECK_TIMEOUT, check_crds(&client))
                .await
                .unwrap_or_else(|_| {
                    Crds::Unreachable(format!(
                        "no answer to API discovery within {CHECK_TIMEOUT:?}"
                    ))
                });
            match &crds {
                Crds::Established if !established => {
                    tracing::info!("the CustomResourceDefinitions are established");
                }
                Crds::Missing(missing) if errors.check().is_ok() => tracing::error!(
                    missing = %missing.join(", "),
                    "CustomResourceDefinitions not established: install them (the chart does, or `kubectl apply -f crds/`); the operator is not ready and reconciles nothing until then"
                ),
                Crds::Unreachable(error) if errors.check().is_ok() => tracing::error!(
                    %error,
                    "cannot reach the Kubernetes API; the operator is not ready"
                ),
                _ => {}
            }
            established = crds == Crds::Established;
            readiness.set_crds(crds);
            let wait = if established {
                RECHECK_ESTABLISHED
            } else {
                RECHECK_MISSING
            };
            tokio::time::sleep(wait).await;
        }
    };
    tokio::select! {
        () = checks => {}
        () = stop => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reasons, in order: CRDs first, then (for the leader) the caches; a standby needs
    /// only the CRDs.
    #[test]
    fn readiness_rules() {
        let r = Readiness::new(Role::Leader);
        assert!(r.check().is_err());
        r.set_crds(Crds::Missing(vec!["apikeys.mailtarget.co".into()]));
        assert_eq!(
            r.check(),
            Err("CustomResourceDefinitions not established: apikeys.mailtarget.co".into())
        );
        r.set_crds(Crds::Established);
        assert_eq!(r.check(), Err("the controllers' caches are filling".into()));
        r.set_role(Role::Standby);
        assert_eq!(r.check(), Ok(()));
        r.set_role(Role::Leader);
        r.set_caches_synced();
        assert_eq!(r.check(), Ok(()));
        r.set_crds(Crds::Unreachable("connection refused".into()));
        assert!(r.check().unwrap_err().contains("connection refused"));
    }

    /// Every CRD of the operator is expected, at its storage version.
    #[test]
    fn every_crd_is_expected() {
        let names: Vec<String> = expected().into_iter().map(|(_, _, n)| n).collect();
        assert_eq!(names.len(), crate::crd::generate::all_crds().len());
        assert!(
            names.contains(&"apikeys.mailtarget.co".to_string()),
            "{names:?}"
        );
    }
}
