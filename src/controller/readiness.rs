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
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use kube::{CustomResourceExt, Resource};

use crate::controller::common::Locked;
use crate::crd::{Account, ApiKey, ClusterAccount, SendingDomain, SubAccount};

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
        self.0.locked()
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

/// A resource one of the operator's CRDs serves.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Served {
    /// `group/version` of the kind's (only, hence storage) version, e.g. `mailtarget.co/v1alpha1`.
    group_version: String,
    /// The resource's plural name, e.g. `apikeys`.
    plural: String,
    /// The CRD's name, `plural.group`.
    crd: &'static str,
}

/// Where the CRD of kind `K` serves it.
fn served<K: Resource<DynamicType = ()> + CustomResourceExt>() -> Served {
    Served {
        group_version: K::api_version(&()).into_owned(),
        plural: K::plural(&()).into_owned(),
        crd: K::crd_name(),
    }
}

/// The resources of the CRDs of every kind the controllers run, from the kinds' types (no
/// schema generated), computed once.
fn expected() -> &'static [Served] {
    static EXPECTED: OnceLock<Vec<Served>> = OnceLock::new();
    EXPECTED.get_or_init(|| {
        vec![
            served::<ClusterAccount>(),
            served::<Account>(),
            served::<SubAccount>(),
            served::<ApiKey>(),
            served::<SendingDomain>(),
        ]
    })
}

/// Checks once which CRDs are established, through API discovery.
pub async fn check_crds(client: &kube::Client) -> Crds {
    let expected = expected();
    let mut versions: Vec<&str> = expected.iter().map(|s| s.group_version.as_str()).collect();
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
        .iter()
        .filter(|s| {
            !served
                .iter()
                .any(|(gv, plural)| *gv == s.group_version && *plural == s.plural)
        })
        .map(|s| s.crd.to_owned())
        .collect();
    if missing.is_empty() {
        Crds::Established
    } else {
        Crds::Missing(missing)
    }
}

/// The limit of the error lines of [`report`]: one a minute, by `C` (a fake clock in tests).
type ErrorLimit<C> = RateLimiter<NotKeyed, InMemoryState, C, NoOpMiddleware<<C as Clock>::Instant>>;

/// At most one error line a minute, by `clock`.
fn error_limit<C: Clock>(clock: C) -> ErrorLimit<C> {
    RateLimiter::direct_with_clock(Quota::per_minute(NonZeroU32::MIN), clock)
}

/// Logs the result of a check, `established` telling whether the previous one found every CRD:
/// an info line when the CRDs become established, an error line for missing CRDs or an
/// unreachable API if `errors` allows one. True when it logged.
fn report<C: Clock>(crds: &Crds, established: bool, errors: &ErrorLimit<C>) -> bool {
    match crds {
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
        _ => return false,
    }
    true
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
    let errors = error_limit(DefaultClock::default());
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
            report(&crds, established, &errors);
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

    /// A missing CRD or an unreachable API is logged once a minute: a second error within the
    /// minute is not logged, one after it is; the CRDs becoming established always are.
    #[test]
    fn errors_are_logged_once_a_minute() {
        let clock = governor::clock::FakeRelativeClock::default();
        let errors = error_limit(clock.clone());
        let missing = Crds::Missing(vec!["apikeys.mailtarget.co".into()]);
        let unreachable = Crds::Unreachable("connection refused".into());
        assert!(report(&missing, false, &errors), "the first error");
        clock.advance(Duration::from_secs(59));
        assert!(
            !report(&unreachable, false, &errors),
            "an error within the minute"
        );
        assert!(
            !report(&missing, false, &errors),
            "an error within the minute"
        );
        assert!(report(&Crds::Established, false, &errors), "established");
        assert!(
            !report(&Crds::Established, true, &errors),
            "still established"
        );
        clock.advance(Duration::from_secs(1));
        assert!(
            report(&unreachable, true, &errors),
            "an error a minute later"
        );
        assert!(
            !report(&missing, false, &errors),
            "the next within the minute"
        );
    }

    /// Exactly the CRDs the operator installs are expected (the files in `crds/`, which a test
    /// keeps equal to the generated CRDs), each at the group version, storage version and plural
    /// its CRD serves.
    #[test]
    fn every_crd_is_expected_where_it_is_served() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crds");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .expect("crds/")
            .map(|entry| entry.expect("crds/ entry").file_name())
            .filter_map(|name| name.to_str()?.strip_suffix(".yaml").map(str::to_owned))
            .collect();
        files.sort_unstable();
        let mut names: Vec<String> = expected().iter().map(|s| s.crd.to_owned()).collect();
        names.sort_unstable();
        assert_eq!(names, files, "the CRDs checked are those in crds/");

        for crd in crate::crd::generate::all_crds() {
            let name = crd.metadata.name.clone().unwrap_or_default();
            let storage = crd
                .spec
                .versions
                .iter()
                .find(|v| v.storage)
                .map(|v| v.name.clone())
                .unwrap_or_default();
            let want = Served {
                group_version: format!("{}/{storage}", crd.spec.group),
                plural: crd.spec.names.plural.clone(),
                crd: "",
            };
            let got = expected().iter().find(|s| s.crd == name).map(|s| Served {
                crd: "",
                ..s.clone()
            });
            assert_eq!(got, Some(want), "{name}");
        }
    }
}
