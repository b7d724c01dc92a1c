//! Status conditions as Kubernetes API conventions define them ("Typical status properties"),
//! with the types kstatus reads: `Ready`, `Reconciling` and `Stalled`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Condition type that is `True` when the API object matches the spec.
pub const READY: &str = "Ready";
/// Condition type that is `True` while the operator is still working towards the spec (kstatus).
pub const RECONCILING: &str = "Reconciling";
/// Condition type that is `True` when progress needs a change by the user (kstatus).
pub const STALLED: &str = "Stalled";

/// Status of a condition: `True`, `False` or `Unknown`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// The operator cannot tell yet.
    Unknown,
}

/// One entry of `status.conditions`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Condition type, e.g. `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: ConditionStatus,
    /// A CamelCase word saying why, e.g. `Available`, `Creating`, `ReferenceNotReady`.
    pub reason: String,
    /// A sentence for people: what happened and, on failure, what to fix.
    #[serde(default)]
    pub message: String,
    /// RFC 3339 time when `status` last changed.
    pub last_transition_time: String,
    /// `metadata.generation` this condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

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
        c.status == ConditionStatus::True
            && (generation.is_none() || c.observed_generation == generation)
    })
}

/// The current time in RFC 3339 with second precision, the format of `lastTransitionTime`.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(status: ConditionStatus, reason: &str, time: &str) -> Condition {
        Condition {
            type_: READY.into(),
            status,
            reason: reason.into(),
            message: String::new(),
            last_transition_time: time.into(),
            observed_generation: Some(1),
        }
    }

    /// The transition time stays when the status stays, even if the reason changes.
    #[test]
    fn transition_time_is_stable_while_status_is_unchanged() {
        let mut list = vec![cond(ConditionStatus::False, "Creating", "t1")];
        set(&mut list, cond(ConditionStatus::False, "Verifying", "t2"));
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].last_transition_time, "t1");
        assert_eq!(list[0].reason, "Verifying");
    }

    /// The transition time moves when the status flips.
    #[test]
    fn transition_time_moves_when_status_changes() {
        let mut list = vec![cond(ConditionStatus::False, "Creating", "t1")];
        set(&mut list, cond(ConditionStatus::True, "Available", "t2"));
        assert_eq!(list[0].last_transition_time, "t2");
        assert!(is_ready(&list, Some(1)));
        assert!(!is_ready(&list, Some(2)), "a stale generation is not ready");
    }
}
