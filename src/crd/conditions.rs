//! Status conditions as Kubernetes API conventions define them ("Typical status properties"),
//! with the types kstatus reads: `Ready`, `Reconciling` and `Stalled`.

pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Condition type that is `True` when the API object matches the spec.
pub const READY: &str = "Ready";
/// `Ready` reason of an `ObserveOnly` resource whose object matches its spec.
pub const REASON_OBSERVED: &str = "Observed";
/// `Ready` reason of an `ObserveOnly` resource whose object differs from its spec.
pub const REASON_DRIFT_DETECTED: &str = "DriftDetected";
/// Condition type that is `True` while the operator is still working towards the spec (kstatus).
pub const RECONCILING: &str = "Reconciling";
/// Condition type that is `True` when progress needs a change by the user (kstatus).
pub const STALLED: &str = "Stalled";

/// `status` of a condition that holds.
pub const TRUE: &str = "True";
/// `status` of a condition that does not hold.
pub const FALSE: &str = "False";

/// Sets `new` in `conditions`, replacing the entry of the same type.
///
/// `lastTransitionTime` is kept from the old entry when the status did not change, so that
/// repeated reconciles with the same outcome write identical conditions.
pub fn set(conditions: &mut Vec<Condition>, mut new: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(old) => {
            if old.status == new.status {
                new.last_transition_time = old.last_transition_time.clone();
            }
            *old = new;
        }
        None => conditions.push(new),
    }
}

/// The condition of type `type_`, if present.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// True when `conditions` hold `Ready=True` computed for `generation`.
pub fn is_ready(conditions: &[Condition], generation: Option<i64>) -> bool {
    find(conditions, READY).is_some_and(|c| {
        c.status == TRUE && (generation.is_none() || c.observed_generation == generation)
    })
}

/// The current time, with second precision, as `lastTransitionTime` holds it.
pub fn now() -> Time {
    let now = k8s_openapi::jiff::Timestamp::now();
    Time(k8s_openapi::jiff::Timestamp::from_second(now.as_second()).unwrap_or(now))
}

/// The current time in RFC 3339 with second precision.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(status: &str, reason: &str, second: i64) -> Condition {
        Condition {
            type_: READY.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::from_second(second).unwrap()),
            observed_generation: Some(1),
        }
    }

    /// The transition time stays when the status stays, even if the reason changes.
    #[test]
    fn transition_time_is_stable_while_status_is_unchanged() {
        let mut list = vec![cond(FALSE, "Creating", 1)];
        set(&mut list, cond(FALSE, "Verifying", 2));
        assert_eq!(list.len(), 1);
        assert_eq!(
            list[0].last_transition_time,
            cond(FALSE, "", 1).last_transition_time
        );
        assert_eq!(list[0].reason, "Verifying");
    }

    /// The transition time moves when the status flips.
    #[test]
    fn transition_time_moves_when_status_changes() {
        let mut list = vec![cond(FALSE, "Creating", 1)];
        set(&mut list, cond(TRUE, "Available", 2));
        assert_eq!(
            list[0].last_transition_time,
            cond(FALSE, "", 2).last_transition_time
        );
        assert!(is_ready(&list, Some(1)));
        assert!(!is_ready(&list, Some(2)), "a stale generation is not ready");
    }
}
