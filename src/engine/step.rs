//! Steps: every API call the driver may make for a resource, with the condition under which it
//! runs, so that `plan` shows exactly what `apply` (or the controller) will do.

use serde::Serialize;

/// What a step does at the service.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepAction {
    /// Create the object (never retried blindly: an unsure answer is resolved by natural key).
    Create,
    /// Change fields of the object.
    Update,
    /// `PUT /domain/sending/{id}/share`.
    Share,
    /// `PUT /domain/sending/{id}/verify-txt`: ask the service to check the DNS records.
    VerifyTxt,
    /// Delete the object.
    Delete,
}

/// One attribute a step sends (never a secret value).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Sent {
    /// Spec field path, e.g. `spec.note`.
    pub field: &'static str,
    /// The value sent, shaped as the spec field holds it (a list of allowed IPs is a JSON
    /// array, though the interface sends it joined); an empty string or list removes it.
    pub value: serde_json::Value,
    /// True when the interface accepts this field at create only: a later change of the spec
    /// is reported, never applied.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub create_only: bool,
}

/// One API call of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// What it does.
    pub action: StepAction,
    /// The endpoint template, e.g. `POST /domain/sending`.
    pub endpoint: &'static str,
    /// When it runs, for people (`None`: always); evaluated again when the step is reached, on
    /// what the service answered so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub when: Option<&'static str>,
    /// The attributes it sends.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sends: Vec<Sent>,
}

impl Step {
    /// A step that always runs.
    pub fn new(action: StepAction, endpoint: &'static str) -> Self {
        Step {
            action,
            endpoint,
            when: None,
            sends: Vec::new(),
        }
    }

    /// The same step, run only when `condition` holds.
    pub fn when(mut self, condition: &'static str) -> Self {
        self.when = Some(condition);
        self
    }

    /// The same step, sending `value` for `field`.
    pub fn sends(mut self, field: &'static str, value: impl Serialize, create_only: bool) -> Self {
        self.sends.push(Sent {
            field,
            value: json(&value),
            create_only,
        });
        self
    }

    /// [`Step::sends`] when `value` is set; the same step when it is `None`.
    pub fn sends_some(
        self,
        field: &'static str,
        value: Option<impl Serialize>,
        create_only: bool,
    ) -> Self {
        match value {
            Some(v) => self.sends(field, v, create_only),
            None => self,
        }
    }
}

/// What became of one step when it was reached.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "result")]
pub enum StepOutcome {
    /// The call was made and succeeded.
    Done,
    /// Its condition did not hold: no call.
    Skipped,
    /// The call failed (the message is scrubbed of secrets by the client).
    Failed {
        /// Why.
        error: String,
    },
    /// An earlier step failed: not reached.
    NotReached,
}

/// A step and its outcome, for `apply -o json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StepReport {
    /// The planned step.
    #[serde(flatten)]
    pub step: Step,
    /// What became of it.
    #[serde(flatten)]
    pub outcome: StepOutcome,
}

impl StepReport {
    /// True when this step is a create the service carried out.
    pub fn created(&self) -> bool {
        self.step.action == StepAction::Create && self.outcome == StepOutcome::Done
    }

    /// True when this step is a create that failed (it may still have happened: see
    /// [`crate::engine::recovery::may_have_committed`]).
    pub fn create_failed(&self) -> bool {
        self.step.action == StepAction::Create && matches!(self.outcome, StepOutcome::Failed { .. })
    }
}

/// One field whose value in the service differs from the spec.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldChange {
    /// Spec field path, e.g. `spec.permissionType`.
    pub field: &'static str,
    /// Value in the service, shaped as the spec field holds it (never a secret).
    pub from: serde_json::Value,
    /// Value in the spec; an empty string or list removes the service's value.
    pub to: serde_json::Value,
}

impl FieldChange {
    /// A change of `field` from `from` to `to`.
    pub fn new(field: &'static str, from: impl Serialize, to: impl Serialize) -> Self {
        FieldChange {
            field,
            from: json(&from),
            to: json(&to),
        }
    }

    /// When the service's `have` differs from the spec's `want`: records the change of `field`
    /// in `changes` and answers `Some(want)`, the value an update sends; else `None`.
    pub fn record<T: PartialEq + Clone + Serialize>(
        changes: &mut Vec<FieldChange>,
        field: &'static str,
        have: &T,
        want: &T,
    ) -> Option<T> {
        (have != want).then(|| {
            changes.push(FieldChange::new(field, have, want));
            want.clone()
        })
    }

    /// The drift this change corrects, as people read it: `spec.field: 1 (service) vs 2 (spec)`
    /// ([`shown_held`], [`shown`]).
    pub fn drift(&self) -> String {
        let (from, to) = (shown_held(&self.from), shown(&self.to));
        format!("{}: {from} (service) vs {to} (spec)", self.field)
    }
}

/// `value` as JSON: the plain values a step sends (strings, numbers, lists of them) always
/// convert; anything else would be `null`.
fn json(value: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or_default()
}

/// A sent or changed value as people read it: strings quoted and escaped as JSON strings
/// ([`crate::text::quoted`]: a control character as `\u001b`, as all terminal output), lists as `[1, 2]`, or
/// `(removed)` for an empty string or list, so the plan hides no removal.
pub fn shown(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::Null => REMOVED.into(),
        Value::String(s) if s.is_empty() => REMOVED.into(),
        Value::Array(a) if a.is_empty() => REMOVED.into(),
        Value::String(s) => crate::text::quoted(s),
        Value::Array(a) => format!("[{}]", a.iter().map(shown).collect::<Vec<_>>().join(", ")),
        v => v.to_string(),
    }
}

/// How an emptied value shows.
const REMOVED: &str = "(removed)";

/// A value the service holds, as people read it: as [`shown`], but `(none)` when empty (the
/// service's side of a change removes nothing).
pub fn shown_held(value: &serde_json::Value) -> String {
    match shown(value) {
        s if s == REMOVED => "(none)".into(),
        s => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Values read as the spec writes them; an empty one is a removal on the spec's side and
    /// nothing on the service's.
    #[test]
    fn values_as_people_read_them() {
        assert_eq!(shown(&json!("a\u{1b}b\u{9b}")), r#""a\u001bb\u009b""#);
        assert_eq!(shown(&json!([1, 2])), "[1, 2]");
        assert_eq!(shown(&json!(["10.0.0.1"])), r#"["10.0.0.1"]"#);
        assert_eq!(shown(&json!(3)), "3");
        for empty in [json!(""), json!([]), json!(null)] {
            assert_eq!(shown(&empty), "(removed)");
            assert_eq!(shown_held(&empty), "(none)");
        }
        assert_eq!(shown_held(&json!([1])), "[1]");
    }
}
