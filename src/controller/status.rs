//! Conditions and status writes shared by every kind's reconcile.
//!
//! Every reconcile sets the three condition types kstatus reads (Kubernetes API conventions,
//! "Typical status properties"; kstatus "abnormal-true" conditions):
//! - `Ready`: `True` when the API object matches the spec;
//! - `Reconciling`: `True` while the operator is still working (creating, verifying DNS, retrying);
//! - `Stalled`: `True` when progress needs a change by the user (invalid spec, 400/401 from the API).

use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::context::FIELD_MANAGER;
use super::revision::Revision;
use crate::crd::conditions::{self, Condition, FALSE, READY, RECONCILING, STALLED, TRUE};

/// The outcome of a reconcile as the conditions express it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `Ready=True`.
    Ready {
        /// CamelCase reason, e.g. `Available`.
        reason: &'static str,
        /// Message for people.
        message: String,
    },
    /// `Ready=False`, `Reconciling=True`: work is under way or will be retried.
    Progressing {
        /// CamelCase reason, e.g. `Creating`, `VerifyingDns`, `ReferenceNotReady`.
        reason: &'static str,
        /// Message for people.
        message: String,
    },
    /// `Ready=False`, `Stalled=True`: nothing changes until the user acts.
    Stalled {
        /// CamelCase reason, e.g. `InvalidSpec`, `Unauthorized`, `ApiRejected`.
        reason: &'static str,
        /// Message for people, saying what to fix.
        message: String,
    },
}

impl Outcome {
    /// [`Outcome::Ready`] with `reason` and `message`.
    pub fn ready(reason: &'static str, message: impl Into<String>) -> Self {
        let message = message.into();
        Outcome::Ready { reason, message }
    }

    /// [`Outcome::Progressing`] with `reason` and `message`.
    pub fn progressing(reason: &'static str, message: impl Into<String>) -> Self {
        let message = message.into();
        Outcome::Progressing { reason, message }
    }

    /// [`Outcome::Stalled`] with `reason` and `message`.
    pub fn stalled(reason: &'static str, message: impl Into<String>) -> Self {
        let message = message.into();
        Outcome::Stalled { reason, message }
    }

    /// True for [`Outcome::Ready`].
    pub fn is_ready(&self) -> bool {
        matches!(self, Outcome::Ready { .. })
    }

    /// The reason and the message, whatever the outcome.
    pub fn parts(&self) -> (&'static str, &str) {
        match self {
            Outcome::Ready { reason, message }
            | Outcome::Progressing { reason, message }
            | Outcome::Stalled { reason, message } => (reason, message),
        }
    }
}

/// Most characters of a condition message; a longer one is cut and ends with `…`. The messages
/// the operator builds stay well below it (a spec's problems are counted past the first few,
/// the service's answers are quoted in excerpts): this bounds whatever else comes through.
pub const MAX_CONDITION_MESSAGE_CHARS: usize = 2000;

/// `message` cut after [`MAX_CONDITION_MESSAGE_CHARS`] characters, ending with `…` when cut.
pub fn bounded_message(message: &str) -> String {
    crate::text::cut(message, MAX_CONDITION_MESSAGE_CHARS)
}

/// Sets `Ready`, `Reconciling` and `Stalled` in `list` for `outcome`, keeping transition times
/// of conditions whose status did not change. Each carries the outcome's reason; the message
/// only `Ready` and the one condition that is `True`.
pub fn set_conditions(list: &mut Vec<Condition>, outcome: &Outcome, generation: Option<i64>) {
    let (reason, message) = outcome.parts();
    let (ready, reconciling, stalled) = match outcome {
        Outcome::Ready { .. } => (TRUE, FALSE, FALSE),
        Outcome::Progressing { .. } => (FALSE, TRUE, FALSE),
        Outcome::Stalled { .. } => (FALSE, FALSE, TRUE),
    };
    for (type_, status) in [
        (READY, ready),
        (RECONCILING, reconciling),
        (STALLED, stalled),
    ] {
        let shown = type_ == READY || status == TRUE;
        let condition = Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: bounded_message(if shown { message } else { "" }),
            last_transition_time: conditions::now(),
            observed_generation: generation,
        };
        conditions::set(list, condition);
    }
}

/// Writes `status` of `name` with a server-side apply of the status subresource as the
/// operator's field manager (forced: the operator owns status), over the version `revision`
/// holds (see [`super::revision`]), and takes the version the write produced into `revision`.
///
/// Errors: the Kubernetes API's error; 409 Conflict when the object changed since that version
/// (nothing is written).
pub async fn write_status<K, S>(
    api: &Api<K>,
    name: &str,
    status: &S,
    revision: &Revision,
) -> Result<K, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    S: Serialize,
{
    let mut patch = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    revision.stamp(&mut patch);
    let written = api
        .patch_status(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await?;
    revision.advance(&written);
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message of the limit's length is kept; a longer one is cut to the limit, `…` included.
    #[test]
    fn condition_messages_are_bounded() {
        let fits = "é".repeat(MAX_CONDITION_MESSAGE_CHARS);
        assert_eq!(bounded_message(&fits), fits);
        let cut = bounded_message(&format!("{fits}x"));
        assert_eq!(cut.chars().count(), MAX_CONDITION_MESSAGE_CHARS);
        assert!(cut.ends_with("é…"), "{cut}");
    }

    /// Each outcome sets the three conditions to the statuses kstatus expects.
    #[test]
    fn outcomes_map_to_kstatus_conditions() {
        let cases = [
            (
                Outcome::ready("Available", String::new()),
                ["True", "False", "False"],
            ),
            (
                Outcome::progressing("Creating", "x"),
                ["False", "True", "False"],
            ),
            (
                Outcome::stalled("InvalidSpec", "x"),
                ["False", "False", "True"],
            ),
        ];
        for (outcome, want) in cases {
            let mut list = Vec::new();
            set_conditions(&mut list, &outcome, Some(3));
            let got: Vec<String> = [READY, RECONCILING, STALLED]
                .iter()
                .map(|t| conditions::find(&list, t).unwrap().status.clone())
                .collect();
            assert_eq!(got, want, "{outcome:?}");
            assert!(list.iter().all(|c| c.observed_generation == Some(3)));
        }
    }
}
