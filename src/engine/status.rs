//! The status every managed kind reports (Kubernetes API conventions, "Typical status
//! properties"): conditions, `observedGeneration`, the id of the API object, and for kinds with
//! a step that repeats until the service says it is done (a sending domain's `verify-txt`), the
//! pacing of that step.

use std::time::Duration;

use serde::Serialize;

use crate::crd::{ApiKeyStatus, Condition, Ownership, SendingDomainStatus, SubAccountStatus};

/// A status with conditions, `observedGeneration` and the managed object's id.
pub trait ManagedStatus: Clone + Default + Serialize + Send + Sync {
    /// `status.conditions`.
    fn conditions(&self) -> &Vec<Condition>;
    /// `status.conditions`, for writing.
    fn conditions_mut(&mut self) -> &mut Vec<Condition>;
    /// `status.observedGeneration`.
    fn observed_generation(&self) -> Option<i64>;
    /// Sets `status.observedGeneration`.
    fn set_observed_generation(&mut self, generation: Option<i64>);
    /// Forgets `status.id` and records that the resource owns nothing (`ownership: Observed`).
    fn clear_id(&mut self);
    /// `status.id`: the API object the resource manages.
    fn id(&self) -> Option<i64>;
    /// `status.ownership`: whether the resource owns the object `status.id` names.
    fn ownership(&self) -> Option<Ownership>;
    /// Sets `status.ownership`.
    fn set_ownership(&mut self, ownership: Option<Ownership>);
    /// The id `status.id` records when the resource owns that object (`status.ownership`):
    /// not one an `ObserveOnly` reconcile recorded.
    ///
    /// A status written before `status.ownership` existed owns its id unless its `Ready`
    /// reason says the last reconcile only observed (`Observed`, `DriftDetected`).
    fn owned_id(&self) -> Option<i64> {
        let id = self.id()?;
        match self.ownership() {
            Some(Ownership::Owned) => Some(id),
            Some(Ownership::Observed) => None,
            None => {
                use crate::crd::conditions::{READY, REASON_DRIFT_DETECTED, REASON_OBSERVED, find};
                let observed = find(self.conditions(), READY).is_some_and(|c| {
                    c.reason == REASON_OBSERVED || c.reason == REASON_DRIFT_DETECTED
                });
                (!observed).then_some(id)
            }
        }
    }
    /// The pacing of the kind's repeated step ([`crate::engine::StepAction::VerifyTxt`]), for
    /// kinds that have one.
    fn pacing(&mut self) -> Option<Pacing<'_>> {
        None
    }
}

/// How often a repeated step was made and when last: the step runs again once a backoff that
/// doubles per attempt has passed since `last` (RFC 3339).
pub struct Pacing<'a> {
    /// Calls made so far (`None`: not started).
    pub attempts: &'a mut Option<u32>,
    /// When the last call was made, or the object created.
    pub last: &'a mut Option<String>,
}

impl Pacing<'_> {
    /// The wait before the next call after `attempts` calls: `first` doubled per call, capped
    /// at `max`. A domain is checked within seconds of creation, then less and less often.
    pub fn backoff(attempts: u32, first: Duration, max: Duration) -> Duration {
        first
            .checked_mul(1u32 << attempts.min(20))
            .unwrap_or(max)
            .min(max)
    }
}

macro_rules! managed_status {
    ($($t:ident),*) => {$(
        impl ManagedStatus for $t {
            fn conditions(&self) -> &Vec<Condition> {
                &self.conditions
            }
            fn conditions_mut(&mut self) -> &mut Vec<Condition> {
                &mut self.conditions
            }
            fn observed_generation(&self) -> Option<i64> {
                self.observed_generation
            }
            fn set_observed_generation(&mut self, generation: Option<i64>) {
                self.observed_generation = generation;
            }
            fn clear_id(&mut self) {
                self.id = None;
                // Explicit: an `id` that another field manager wrote stays in the stored status
                // (server-side apply removes only the fields the operator's manager owns).
                self.ownership = Some(Ownership::Observed);
            }
            fn ownership(&self) -> Option<Ownership> {
                self.ownership
            }
            fn set_ownership(&mut self, ownership: Option<Ownership>) {
                self.ownership = ownership;
            }
            fn id(&self) -> Option<i64> {
                self.id
            }
            managed_status!(@pacing $t);
        }
    )*};
    (@pacing SendingDomainStatus) => {
        fn pacing(&mut self) -> Option<Pacing<'_>> {
            Some(Pacing {
                attempts: &mut self.verify_attempts,
                last: &mut self.last_verify_time,
            })
        }
    };
    (@pacing $t:ident) => {};
}
managed_status!(SubAccountStatus, ApiKeyStatus, SendingDomainStatus);

#[cfg(test)]
mod tests {
    use super::*;

    /// Backoff starts within seconds, doubles, and stops at the cap.
    #[test]
    fn backoff_doubles_to_cap() {
        let (first, max) = (Duration::from_secs(5), Duration::from_secs(600));
        assert_eq!(Pacing::backoff(0, first, max), Duration::from_secs(5));
        assert_eq!(Pacing::backoff(1, first, max), Duration::from_secs(10));
        assert_eq!(Pacing::backoff(10, first, max), max);
        assert_eq!(Pacing::backoff(u32::MAX, first, max), max);
    }
}
