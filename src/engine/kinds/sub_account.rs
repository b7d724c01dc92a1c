//! SubAccount on the engine (interface document, section "Sub accounts"): created with its
//! first API key when the spec asks for one (`createApiKey` and the key's fields, accepted at
//! create only), updated with the changed fields. The first key's value is exported to
//! `spec.apiKey.secretName`. The interface has no DELETE for sub accounts.

use crate::api::{
    ApiError, Client, CreateSubAccount, ListSubAccountsQuery, SubAccountDetail, SubAccountListItem,
    UpdateSubAccount,
};
use crate::crd::{SubAccount, SubAccountDeletionPolicy, SubAccountStatus};
use crate::engine::inventory::Inventory;
use crate::engine::{
    Export, ManagedKind, Planned, PlannedStep, SecretRef, Seen, Step, StepAction, Summary, target,
};
use crate::engine::{Found, Lookup, Problem, natural_key};
use crate::reconcile::Action;
use crate::reconcile::subaccount::{self, Desired, Observed};

/// The key of the first key's value in its Secret (the same as an ApiKey's).
pub use super::api_key::SECRET_KEY;

/// The calls of a sub account.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    /// `POST /sub-account`.
    Create(CreateSubAccount),
    /// `PUT /sub-account/{id}` with the changed fields.
    Update(UpdateSubAccount),
}

fn create_step(req: CreateSubAccount) -> PlannedStep<Call> {
    let mut s = Step::new(StepAction::Create, "POST /sub-account");
    if let Some(n) = &req.name {
        s = s.sends("spec.name", n, false);
    }
    if let Some(v) = &req.status {
        s = s.sends("spec.status", v, false);
    }
    if let Some(v) = req.ip_pool_id {
        s = s.sends("spec.ipPoolId", v.to_string(), false);
    }
    if let Some(v) = &req.api_key_name {
        s = s.sends("spec.apiKey.name", v, true);
    }
    if let Some(v) = &req.permission_type {
        s = s.sends("spec.apiKey.permissionType", v, true);
    }
    if let Some(v) = &req.permission_ids {
        s = s.sends("spec.apiKey.permissionIds", format!("{v:?}"), true);
    }
    if let Some(v) = &req.allowed_ips {
        s = s.sends("spec.apiKey.allowedIps", v, true);
    }
    PlannedStep {
        step: s,
        request: Call::Create(req),
    }
}

impl ManagedKind for SubAccount {
    type Resource = SubAccount;
    type Desired = Desired;
    type Item = SubAccountListItem;
    type Detail = SubAccountDetail;
    type Observed = Observed;
    type Request = Call;
    type Status = SubAccountStatus;
    const KIND: &'static str = "SubAccount";
    const NOUN: &'static str = "sub account";

    fn desired(r: &SubAccount) -> Result<Desired, Vec<Problem>> {
        subaccount::desired(r)
    }

    fn natural_key(d: &Desired) -> &str {
        &d.name
    }

    fn external_id(d: &Desired) -> Option<i64> {
        d.external_id
    }

    fn items(inventory: &Inventory) -> &[SubAccountListItem] {
        &inventory.sub_accounts
    }

    fn lookup<'a>(
        d: &Desired,
        external_id: Option<i64>,
        status_id: Option<i64>,
        items: &'a [SubAccountListItem],
    ) -> Lookup<'a, SubAccountListItem> {
        subaccount::lookup(d, external_id, status_id, items)
    }

    fn needs_detail(d: &Desired) -> bool {
        subaccount::needs_detail(d)
    }

    fn observe_item(item: &SubAccountListItem) -> Observed {
        Observed::from(item)
    }

    fn observe_detail(detail: &SubAccountDetail) -> Observed {
        Observed::from(detail)
    }

    fn plan(d: &Desired, found: Option<(Found, &Observed)>) -> Result<Planned<Call>, String> {
        let p = subaccount::plan(d, found);
        let steps = match &p.action {
            Action::Create(req) => vec![create_step(req.clone())],
            Action::Update {
                request, changes, ..
            } => {
                let mut s = Step::new(StepAction::Update, "PUT /sub-account/{id}");
                for c in changes {
                    s = s.sends(c.field, &c.to, false);
                }
                vec![PlannedStep {
                    step: s,
                    request: Call::Update(request.clone()),
                }]
            }
            Action::Unchanged { .. } => Vec::new(),
        };
        Ok(Planned {
            found: p.found,
            steps,
            changes: p.changes().to_vec(),
            notes: p.notes,
        })
    }

    async fn read(client: &Client, id: i64) -> Result<SubAccountDetail, ApiError> {
        client.get_sub_account(id).await
    }

    fn due(_call: &Call, _current: Option<&SubAccountDetail>) -> Option<bool> {
        Some(true)
    }

    async fn run(
        client: &Client,
        call: &Call,
        id: Option<i64>,
    ) -> Result<Option<SubAccountDetail>, ApiError> {
        match call {
            Call::Create(req) => client.create_sub_account(req).await.map(Some),
            Call::Update(req) => client
                .update_sub_account(target("PUT /sub-account/{id}", id)?, req)
                .await
                .map(Some),
        }
    }

    /// The interface has no DELETE for sub accounts: `Deactivate` sets the deactivated status.
    fn deletion(r: &SubAccount) -> Option<PlannedStep<Call>> {
        if r.spec.deletion_policy != SubAccountDeletionPolicy::Deactivate {
            return None;
        }
        let request = subaccount::deactivate_request(r);
        let status = request.status.clone().unwrap_or_default();
        Some(PlannedStep {
            step: Step::new(StepAction::Update, "PUT /sub-account/{id}").sends(
                "spec.deactivatedStatus",
                status,
                false,
            ),
            request: Call::Update(request),
        })
    }

    async fn search(client: &Client, search: &str) -> Result<Vec<SubAccountListItem>, ApiError> {
        let query = ListSubAccountsQuery {
            search: Some(search.to_string()),
            ..Default::default()
        };
        client.list_all_sub_accounts(&query).await
    }

    fn detail_id(detail: &SubAccountDetail) -> i64 {
        detail.id
    }

    fn secret_refs(d: &Desired) -> Vec<SecretRef> {
        d.initial_key
            .iter()
            .map(|k| SecretRef {
                secret_name: k.secret_name.clone(),
                key: SECRET_KEY,
            })
            .collect()
    }

    /// The first key's value, from the sub account's keys (a read lists them with their values).
    fn exports(d: &Desired, detail: &SubAccountDetail) -> Result<Vec<Export>, String> {
        let (Some(key), Some(name)) = (&d.initial_key, subaccount::initial_key_name(d)) else {
            return Ok(Vec::new());
        };
        match detail
            .api_keys
            .iter()
            .find(|k| natural_key::same_key_name(&k.name, &name))
        {
            Some(k) => Ok(vec![Export {
                secret_name: key.secret_name.clone(),
                key: SECRET_KEY,
                value: k.key.clone(),
            }]),
            None => Err(format!(
                "the sub account has no key named \"{name}\" to write to Secret \"{}\" (spec.apiKey applies at creation only)",
                key.secret_name
            )),
        }
    }

    fn status(r: &SubAccount) -> SubAccountStatus {
        r.status.clone().unwrap_or_default()
    }

    fn project(
        old: &SubAccountStatus,
        seen: Seen<'_, SubAccountListItem, SubAccountDetail>,
    ) -> SubAccountStatus {
        let mut status = match seen {
            Seen::Detail(d) => subaccount::status_from_detail(d),
            Seen::Item(i) => subaccount::status_from_list_item(i, old),
        };
        status.conditions = old.conditions.clone();
        status.observed_generation = old.observed_generation;
        status
    }

    fn status_has_detail(
        _d: &Desired,
        status: &SubAccountStatus,
        item: &SubAccountListItem,
    ) -> bool {
        subaccount::status_has_detail(status, item.id)
    }

    fn observe_known(item: &SubAccountListItem, status: &SubAccountStatus) -> Observed {
        Observed::last_known(item, status)
    }

    fn summary(_d: &Desired, status: &SubAccountStatus) -> Summary {
        Summary {
            ready: true,
            reason: "Available",
            message: format!("sub account {} is in sync", status.id.unwrap_or_default()),
        }
    }

    fn item_of(detail: &SubAccountDetail) -> SubAccountListItem {
        subaccount::list_item_from_detail(detail)
    }
}
