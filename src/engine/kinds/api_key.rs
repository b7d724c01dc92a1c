//! ApiKey on the engine (interface document, section "API keys"): a company key is created with
//! `name`, `permissionIds` and `allowedIp`; the create body has no `permissionType`, so a spec
//! that sets one is followed by a PUT when the created key differs. Keys inside a sub account
//! cannot be created through `POST /api-key` (only with their sub account); they are found and
//! updated. The key value is exported to `spec.secretName`.

use crate::api::{
    ApiError, ApiKeyDetail, ApiKeyListItem, Client, CreateApiKey, ListApiKeysQuery, UpdateApiKey,
};
use crate::crd::{ApiKey, ApiKeyStatus, DeletionPolicy};
use crate::engine::inventory::Inventory;
use crate::engine::{
    Export, ManagedKind, Planned, PlannedStep, SecretRef, Seen, Step, StepAction, Summary, target,
};
use crate::engine::{Found, Lookup, Problem};
use crate::reconcile::Action;
use crate::reconcile::apikey::{self, Desired, Observed};

/// The key of the key value in its Secret.
pub const SECRET_KEY: &str = "apiKey";

const WHEN_TYPE_DIFFERS: &str = "the created key's permissionType is not spec.permissionType";

/// The calls of an API key.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    /// `POST /api-key`.
    Create(CreateApiKey),
    /// `PUT /api-key/{id}` with the changed fields.
    Update(UpdateApiKey),
    /// `PUT /api-key/{id}` with `permissionType`, after a create, when the key differs.
    SetPermissionType(String),
    /// `DELETE /api-key/{id}` (`deletionPolicy: Delete`).
    Delete,
}

fn create_step(req: CreateApiKey) -> PlannedStep<Call> {
    let mut s = Step::new(StepAction::Create, "POST /api-key");
    if let Some(v) = &req.name {
        s = s.sends("spec.name", v, false);
    }
    if let Some(v) = &req.permission_ids {
        s = s.sends("spec.permissionIds", format!("{v:?}"), false);
    }
    if let Some(v) = &req.allowed_ip {
        s = s.sends("spec.allowedIps", v, false);
    }
    PlannedStep {
        step: s,
        request: Call::Create(req),
    }
}

impl ManagedKind for ApiKey {
    type Resource = ApiKey;
    type Desired = Desired;
    type Item = ApiKeyListItem;
    type Detail = ApiKeyDetail;
    type Observed = Observed;
    type Request = Call;
    type Status = ApiKeyStatus;
    const KIND: &'static str = "ApiKey";
    const NOUN: &'static str = "API key";
    /// Key names are not unique at the service (the interface document, section "API keys").
    const NATURAL_KEY_UNIQUE: bool = false;

    fn desired(r: &ApiKey) -> Result<Desired, Vec<Problem>> {
        apikey::desired(r)
    }

    fn natural_key(d: &Desired) -> &str {
        &d.name
    }

    fn external_id(d: &Desired) -> Option<i64> {
        d.external_id
    }

    fn items(inventory: &Inventory) -> &[ApiKeyListItem] {
        &inventory.api_keys
    }

    fn lookup<'a>(
        d: &Desired,
        external_id: Option<i64>,
        status_id: Option<i64>,
        items: &'a [ApiKeyListItem],
    ) -> Lookup<'a, ApiKeyListItem> {
        apikey::lookup(d, external_id, status_id, d.sub_account_id, items)
    }

    fn needs_detail(d: &Desired) -> bool {
        apikey::needs_detail(d)
    }

    fn observe_item(item: &ApiKeyListItem) -> Observed {
        Observed::from(item)
    }

    fn observe_detail(detail: &ApiKeyDetail) -> Observed {
        Observed::from(detail)
    }

    fn plan(d: &Desired, found: Option<(Found, &Observed)>) -> Result<Planned<Call>, String> {
        let p = apikey::plan(d, found)?;
        let mut steps = Vec::new();
        match &p.action {
            Action::Create(req) => {
                steps.push(create_step(req.clone()));
                if let Some(want) = &d.permission_type {
                    steps.push(PlannedStep {
                        step: Step::new(StepAction::Update, "PUT /api-key/{id}")
                            .when(WHEN_TYPE_DIFFERS)
                            .sends("spec.permissionType", want, false),
                        request: Call::SetPermissionType(want.clone()),
                    });
                }
            }
            Action::Update {
                request, changes, ..
            } => {
                let mut s = Step::new(StepAction::Update, "PUT /api-key/{id}");
                for c in changes {
                    s = s.sends(c.field, &c.to, false);
                }
                steps.push(PlannedStep {
                    step: s,
                    request: Call::Update(request.clone()),
                });
            }
            Action::Unchanged { .. } => {}
        }
        Ok(Planned {
            found: p.found,
            steps,
            changes: p.changes().to_vec(),
            notes: p.notes,
        })
    }

    async fn read(client: &Client, id: i64) -> Result<ApiKeyDetail, ApiError> {
        client.get_api_key(id).await
    }

    fn due(call: &Call, current: Option<&ApiKeyDetail>) -> Option<bool> {
        match call {
            Call::SetPermissionType(want) => current.map(|c| &c.permission_type != want),
            Call::Create(_) | Call::Update(_) | Call::Delete => Some(true),
        }
    }

    async fn run(
        client: &Client,
        call: &Call,
        id: Option<i64>,
    ) -> Result<Option<ApiKeyDetail>, ApiError> {
        if let Call::Create(req) = call {
            return client.create_api_key(req).await.map(Some);
        }
        let id = target("PUT /api-key/{id}", id)?;
        match call {
            Call::Create(_) => unreachable!("handled above"),
            Call::Update(req) => client.update_api_key(id, req).await.map(Some),
            Call::SetPermissionType(want) => {
                let req = UpdateApiKey {
                    permission_type: Some(want.clone()),
                    ..Default::default()
                };
                client.update_api_key(id, &req).await.map(Some)
            }
            Call::Delete => client.delete_api_key(id).await.map(|_| None),
        }
    }

    fn deletion(r: &ApiKey) -> Option<PlannedStep<Call>> {
        (r.spec.deletion_policy == DeletionPolicy::Delete).then(|| PlannedStep {
            step: Step::new(StepAction::Delete, "DELETE /api-key/{id}"),
            request: Call::Delete,
        })
    }

    async fn search(client: &Client, search: &str) -> Result<Vec<ApiKeyListItem>, ApiError> {
        let query = ListApiKeysQuery {
            search: Some(search.to_string()),
            ..Default::default()
        };
        client.list_all_api_keys(&query).await
    }

    fn detail_id(detail: &ApiKeyDetail) -> i64 {
        detail.id
    }

    fn secret_refs(d: &Desired) -> Vec<SecretRef> {
        vec![SecretRef {
            secret_name: d.secret_name.clone(),
            key: SECRET_KEY,
        }]
    }

    fn exports(d: &Desired, detail: &ApiKeyDetail) -> Result<Vec<Export>, String> {
        Ok(vec![export(d, &detail.key)])
    }

    /// Lists carry the key value (interface document, "List API keys").
    fn item_exports(d: &Desired, item: &ApiKeyListItem) -> Option<Vec<Export>> {
        Some(vec![export(d, &item.key)])
    }

    fn status(r: &ApiKey) -> ApiKeyStatus {
        r.status.clone().unwrap_or_default()
    }

    fn project(old: &ApiKeyStatus, seen: Seen<'_, ApiKeyListItem, ApiKeyDetail>) -> ApiKeyStatus {
        let mut status = match seen {
            Seen::Detail(d) => apikey::status_from_detail(d),
            Seen::Item(i) => apikey::status_from_list_item(i, old),
        };
        status.conditions = old.conditions.clone();
        status.observed_generation = old.observed_generation;
        status
    }

    fn status_has_detail(d: &Desired, status: &ApiKeyStatus, item: &ApiKeyListItem) -> bool {
        status.id == Some(item.id)
            && (!apikey::needs_detail(d) || apikey::status_has_detail(status, item.id))
    }

    fn observe_known(item: &ApiKeyListItem, status: &ApiKeyStatus) -> Observed {
        Observed::last_known(item, status)
    }

    fn summary(d: &Desired, status: &ApiKeyStatus) -> Summary {
        Summary {
            ready: true,
            reason: "Available",
            message: format!(
                "API key {} is in sync; its value is in Secret \"{}\"",
                status.id.unwrap_or_default(),
                d.secret_name
            ),
        }
    }

    fn item_of(detail: &ApiKeyDetail) -> ApiKeyListItem {
        apikey::list_item_from_detail(detail)
    }

    fn sub_account_ref(r: &ApiKey) -> Option<&str> {
        r.spec.sub_account_ref.as_ref().map(|s| s.name.as_str())
    }

    fn in_sub_account(d: &mut Desired, id: i64) {
        d.sub_account_id = Some(id);
    }
}

fn export(d: &Desired, value: &secrecy::SecretString) -> Export {
    Export {
        secret_name: d.secret_name.clone(),
        key: SECRET_KEY,
        value: value.clone(),
    }
}
