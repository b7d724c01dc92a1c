//! What a reconcile decides to do for one resource: the pure output of "desired vs observed".

use crate::engine::{FieldChange, Found};

/// The action for one resource. `C` and `U` are the create and update request bodies.
#[derive(Clone, Debug, PartialEq)]
pub enum Action<C, U> {
    /// Create the API object with this body.
    Create(C),
    /// Update the API object `id` with this body, which carries exactly the changed fields.
    Update {
        /// Id in the service.
        id: i64,
        /// What differs.
        changes: Vec<FieldChange>,
        /// The request body (only the changed fields are set).
        request: U,
    },
    /// Nothing to write.
    Unchanged {
        /// Id in the service.
        id: i64,
    },
}

/// A plan for one resource: what matched, what to do, and notes for fields that differ but that
/// the interface cannot change (they are reported, never silently ignored).
#[derive(Clone, Debug, PartialEq)]
pub struct Plan<C, U> {
    /// The matched API object, if any.
    pub found: Option<Found>,
    /// The action.
    pub action: Action<C, U>,
    /// Differences the interface offers no way to change, e.g. a domain's `assignment`.
    pub notes: Vec<String>,
}

impl<C, U> Plan<C, U> {
    /// True when the plan writes to the API.
    pub fn writes(&self) -> bool {
        !matches!(self.action, Action::Unchanged { .. })
    }

    /// The field changes of an update (empty otherwise).
    pub fn changes(&self) -> &[FieldChange] {
        match &self.action {
            Action::Update { changes, .. } => changes,
            _ => &[],
        }
    }
}
