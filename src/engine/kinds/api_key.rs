//! ApiKey on the engine (interface document, section "API keys"): a company key is created with
//! `name`, `permissionIds` and `allowedIp`; the create body has no `permissionType`, so a spec
//! that sets one is followed by a PUT when the created key differs. A key inside a sub account
//! (`subAccountRef`) is created by the same call made with the sub account's credential (product
//! design, decision "Scope of a key"), and found only among that sub account's keys. The key
//! value is exported to `spec.secretName`: a company key's from the list (interface document,
//! "List API keys"), a sub account key's from the create answer or a read made with the sub
//! account's credential.

use std::net::IpAddr;

use crate::api::{
    ApiError, ApiKeyDetail, ApiKeyListItem, Client, CreateApiKey, UpdateApiKey, allowed_ip,
};
use crate::crd::subaccount::NamedId;
use crate::crd::{ApiKey, ApiKeyStatus, DeletionPolicy};
use crate::engine::inventory::Inventory;
use crate::engine::lookup;
use crate::engine::{
    Export, FieldChange, Found, Lookup, ManagedKind, Planned, PlannedStep, Problem, SecretRef,
    Seen, Step, StepAction, Summary, natural_key, target, validate,
};

/// The key of the key value in its Secret.
pub const SECRET_KEY: &str = "apiKey";

/// A validated ApiKey spec.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// Key name (natural key within its scope).
    pub name: String,
    /// `permissionType`, when managed.
    pub permission_type: Option<String>,
    /// `permissionIds`, sorted; managed when not empty.
    pub permission_ids: Vec<i64>,
    /// Allowed IP addresses in canonical form, sorted; always managed (empty = unrestricted).
    pub allowed_ips: Vec<IpAddr>,
    /// Secret receiving the key value.
    pub secret_name: String,
    /// Name of the referenced SubAccount, for keys that live in a sub account.
    pub sub_account_ref: Option<String>,
    /// Id of the sub account `sub_account_ref` names, once the front end resolved it (`None`
    /// for a company key, or not resolved yet).
    pub sub_account_id: Option<i64>,
}

/// What the service holds for a key. Fields the list item lacks are `None`.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    /// Id.
    pub id: i64,
    /// `name`.
    pub name: String,
    /// `permissionType`.
    pub permission_type: String,
    /// `subAccountId`.
    pub sub_account_id: i64,
    /// Ids of `permissions`, sorted (detail only).
    pub permission_ids: Option<Vec<i64>>,
    /// `allowedIp` parsed and sorted (detail only).
    pub allowed_ips: Option<Vec<IpAddr>>,
}

impl From<&ApiKeyListItem> for Observed {
    fn from(i: &ApiKeyListItem) -> Self {
        Observed {
            id: i.id,
            name: i.name.clone(),
            permission_type: i.permission_type.clone(),
            sub_account_id: i.sub_account_id,
            permission_ids: None,
            allowed_ips: None,
        }
    }
}

impl From<&ApiKeyDetail> for Observed {
    fn from(d: &ApiKeyDetail) -> Self {
        Observed {
            permission_ids: Some(d.permission_ids()),
            allowed_ips: Some(d.allowed_ips()),
            ..Observed::from(&ApiKeyListItem::from(d))
        }
    }
}

/// The calls of an API key.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    /// `POST /api-key`.
    Create(CreateApiKey),
    /// `PUT /api-key/{id}` with the changed fields.
    Update(UpdateApiKey),
    /// `PUT /api-key/{id}` with `permissionType` only, after a create, when the key differs.
    SetPermissionType(UpdateApiKey),
    /// `DELETE /api-key/{id}` (`deletionPolicy: Delete`).
    Delete,
}

/// The step `POST /api-key` for `d`: no `permissionType`, which the create body lacks (a later
/// step sets it).
fn create_step(d: &Desired) -> PlannedStep<Call> {
    let req = CreateApiKey {
        name: Some(d.name.clone()),
        permission_ids: (!d.permission_ids.is_empty()).then(|| d.permission_ids.clone()),
        allowed_ip: (!d.allowed_ips.is_empty()).then(|| allowed_ip::join(&d.allowed_ips)),
    };
    let ips = (!d.allowed_ips.is_empty()).then_some(&d.allowed_ips);
    let step = Step::new(StepAction::Create, "POST /api-key")
        .sends_some("spec.name", req.name.as_deref(), false)
        .sends_some("spec.permissionIds", req.permission_ids.as_ref(), false)
        .sends_some("spec.allowedIps", ips, false);
    let request = Call::Create(req);
    PlannedStep { step, request }
}

impl ManagedKind for ApiKey {
    type Resource = ApiKey;
    type Desired = Desired;
    type Item = ApiKeyListItem;
    type Detail = ApiKeyDetail;
    type Observed = Observed;
    type Request = Call;
    const KIND: &'static str = "ApiKey";
    const NOUN: &'static str = "API key";
    const SECRET_KEY: &'static str = SECRET_KEY;
    /// Key names are not unique at the service (the interface document, section "API keys").
    const NATURAL_KEY_UNIQUE: bool = false;
    const API_KEY: bool = true;

    fn desired(r: &ApiKey) -> Result<Desired, Vec<Problem>> {
        let problems = validate::api_key(r);
        if !problems.is_empty() {
            return Err(problems);
        }
        let mut permission_ids = r.spec.permission_ids.clone();
        permission_ids.sort_unstable();
        Ok(Desired {
            name: r.service_name().to_string(),
            permission_type: r.spec.permission_type.clone(),
            permission_ids,
            allowed_ips: allowed_ip::parse_each(r.spec.allowed_ips.iter().map(String::as_str)),
            secret_name: r.spec.secret_name.clone(),
            sub_account_ref: r.spec.sub_account_ref.as_ref().map(|s| s.name.clone()),
            sub_account_id: None,
        })
    }

    fn natural_key(d: &Desired) -> &str {
        &d.name
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
        // Within the scope, by id or name: a key inside a sub account among that sub account's
        // keys only, a company key among the company's own keys (a key inside a sub account is
        // reached through its SubAccount, whose rules decide who may).
        let scope = d
            .sub_account_id
            .unwrap_or(crate::api::COMPANY_SUB_ACCOUNT_ID);
        lookup::find(
            items,
            |i| i.id,
            |i| i.sub_account_id == scope,
            external_id,
            status_id,
            // Names repeat across scopes: a key of the name elsewhere is no obstacle (the scope
            // here keeps `find` from answering OutsideScope).
            |i| natural_key::same_key_name(&i.name, &d.name) && i.sub_account_id == scope,
        )
    }

    /// The list item lacks `permissions` and `allowedIp`, and `allowedIp` is always managed
    /// (an empty `spec.allowedIps` means any address, which a restriction at the service
    /// contradicts), so every key's plan compares the detail.
    fn needs_detail(_d: &Desired) -> bool {
        true
    }

    fn plan(d: &Desired, found: Option<(Found, &Observed)>) -> Result<Planned<Call>, String> {
        let Some((found, observed)) = found else {
            let mut steps = vec![create_step(d)];
            if let Some(want) = &d.permission_type {
                let request = UpdateApiKey {
                    permission_type: Some(want.clone()),
                    ..Default::default()
                };
                steps.push(PlannedStep {
                    step: Step::new(StepAction::Update, "PUT /api-key/{id}")
                        .when("the created key's permissionType is not spec.permissionType")
                        .sends("spec.permissionType", want, false),
                    request: Call::SetPermissionType(request),
                });
            }
            return Ok(Planned::creating(steps));
        };
        let (changes, request) = diff(d, observed);
        let mut notes = Vec::new();
        if request.allowed_ip.as_deref() == Some("") {
            notes.push(
                "spec.allowedIps is empty: the key's address restriction is removed and it becomes usable from any address"
                    .into(),
            );
        }
        let request = Call::Update(request);
        let endpoint = "PUT /api-key/{id}";
        Ok(Planned::updating(found, endpoint, changes, request, notes))
    }

    fn due(call: &Call, current: Option<&ApiKeyDetail>) -> Option<bool> {
        match call {
            Call::SetPermissionType(req) => {
                current.map(|c| Some(&c.permission_type) != req.permission_type.as_ref())
            }
            Call::Create(_) | Call::Update(_) | Call::Delete => Some(true),
        }
    }

    async fn run(
        client: &Client,
        call: &Call,
        id: Option<i64>,
    ) -> Result<Option<ApiKeyDetail>, ApiError> {
        match call {
            Call::Create(req) => client.create_api_key(req).await.map(Some),
            Call::Update(req) | Call::SetPermissionType(req) => {
                let id = target("PUT /api-key/{id}", id)?;
                client.update_api_key(id, req).await.map(Some)
            }
            Call::Delete => {
                let id = target("DELETE /api-key/{id}", id)?;
                client.delete_api_key(id).await.map(|_| None)
            }
        }
    }

    fn deletion(r: &ApiKey) -> Option<PlannedStep<Call>> {
        (r.spec.deletion_policy == DeletionPolicy::Delete).then(|| PlannedStep {
            step: Step::new(StepAction::Delete, "DELETE /api-key/{id}"),
            request: Call::Delete,
        })
    }

    fn secret_refs(d: &Desired) -> Vec<SecretRef> {
        vec![SecretRef {
            secret_name: d.secret_name.clone(),
            key: Self::SECRET_KEY,
        }]
    }

    fn exports(d: &Desired, detail: &ApiKeyDetail) -> Result<Vec<Export>, String> {
        Ok(vec![export(d, &detail.key)])
    }

    /// A company key's value from the company's list; a key inside a sub account needs a read
    /// with that sub account's credential (product design: a value is exported only from the
    /// create answer or a read with the narrowest credential that owns the object).
    fn item_exports(d: &Desired, item: &ApiKeyListItem) -> Option<Vec<Export>> {
        d.sub_account_ref
            .is_none()
            .then(|| vec![export(d, &item.key)])
    }

    fn project(old: &ApiKeyStatus, seen: Seen<'_, ApiKeyListItem, ApiKeyDetail>) -> ApiKeyStatus {
        match seen {
            Seen::Detail(d) => ApiKeyStatus {
                permissions: (d.permissions.iter())
                    .map(|p| NamedId::new(p.id, &p.name))
                    .collect(),
                allowed_ips: d.allowed_ips().iter().map(ToString::to_string).collect(),
                ..Self::project(old, Seen::Item(&ApiKeyListItem::from(d)))
            },
            // The fields a list item lacks are kept.
            Seen::Item(i) => ApiKeyStatus {
                id: Some(i.id),
                name: Some(i.name.clone()),
                sub_account_id: Some(i.sub_account_id),
                sub_account_name: Some(i.sub_account_name.clone()),
                permission_type: Some(i.permission_type.clone()),
                created_at: Some(i.created_at),
                ..old.clone()
            },
        }
    }

    /// The status of this same key holds the detail-only fields of its last detail (the
    /// create or update answer, or a read). A status written by an earlier version, which
    /// compared keys without permissions or allowed IPs in the spec through the list only, may
    /// hold empty lists never read: the next detail resync (spread over its interval) reads
    /// them.
    fn status_has_detail(_d: &Desired, status: &ApiKeyStatus, item: &ApiKeyListItem) -> bool {
        status.id == Some(item.id)
    }

    /// The list item `i` with the detail-only fields as `status` last recorded them (from a
    /// detail read or an update's answer) when `status` describes this same key (`status.id ==
    /// i.id`); otherwise those fields are unknown (`None`) and not compared. Only for a spec
    /// that needs the detail ([`ManagedKind::needs_detail`]: every key's).
    fn observe_known(i: &ApiKeyListItem, status: &ApiKeyStatus) -> Observed {
        let mut o = Observed::from(i);
        if status.id == Some(i.id) {
            let mut ids: Vec<i64> = status.permissions.iter().map(|p| p.id).collect();
            ids.sort_unstable();
            o.permission_ids = Some(ids);
            o.allowed_ips = Some(allowed_ip::parse_each(
                status.allowed_ips.iter().map(String::as_str),
            ));
        }
        o
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

/// The changed fields of `observed` against `d`, and the update body carrying exactly them.
/// Detail-only fields unknown in `observed` (`None`) are not compared.
fn diff(d: &Desired, observed: &Observed) -> (Vec<FieldChange>, UpdateApiKey) {
    let (mut changes, mut request) = (Vec::new(), UpdateApiKey::default());
    let c = &mut changes;
    request.name = FieldChange::record(c, "spec.name", &observed.name, &d.name);
    if let Some(want) = &d.permission_type {
        let have = &observed.permission_type;
        request.permission_type = FieldChange::record(c, "spec.permissionType", have, want);
    }
    if let (false, Some(have)) = (d.permission_ids.is_empty(), &observed.permission_ids) {
        request.permission_ids =
            FieldChange::record(c, "spec.permissionIds", have, &d.permission_ids);
    }
    if let Some(have) = &observed.allowed_ips {
        let ips = FieldChange::record(c, "spec.allowedIps", have, &d.allowed_ips);
        request.allowed_ip = ips.map(|v| allowed_ip::join(&v));
    }
    (changes, request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::MatchedBy;

    fn plan(d: &Desired, found: Option<(Found, &Observed)>) -> Result<Planned<Call>, String> {
        <ApiKey as ManagedKind>::plan(d, found)
    }

    /// The body of the one update `p` plans.
    fn update(p: Planned<Call>) -> UpdateApiKey {
        match &p.steps[..] {
            [
                PlannedStep {
                    request: Call::Update(r),
                    ..
                },
            ] => r.clone(),
            other => panic!("expected one update, got {other:?}"),
        }
    }

    fn desired() -> Desired {
        Desired {
            name: "ci".into(),
            permission_type: Some("custom".into()),
            permission_ids: vec![1, 2],
            allowed_ips: allowed_ip::parse("10.0.0.2,10.0.0.1"),
            secret_name: "s".into(),
            sub_account_ref: None,
            sub_account_id: None,
        }
    }

    fn observed() -> Observed {
        Observed {
            id: 3,
            name: "ci".into(),
            permission_type: "custom".into(),
            sub_account_id: 0,
            permission_ids: Some(vec![1, 2]),
            allowed_ips: Some(allowed_ip::parse(" 10.0.0.1, 10.0.0.2")),
        }
    }

    const FOUND: Found = Found {
        id: 3,
        matched_by: MatchedBy::StatusId,
    };

    /// Order and spacing of allowedIp do not count as a difference.
    #[test]
    fn equal_sets_are_unchanged() {
        let p = plan(&desired(), Some((FOUND, &observed()))).unwrap();
        assert!(p.steps.is_empty(), "{:?}", p.steps);
    }

    /// A permission change becomes one update with only permissionIds.
    #[test]
    fn permission_change_is_one_field() {
        let mut o = observed();
        o.permission_ids = Some(vec![1]);
        let request = update(plan(&desired(), Some((FOUND, &o))).unwrap());
        assert_eq!(request.permission_ids, Some(vec![1, 2]));
        assert_eq!(request.allowed_ip, None);
        assert_eq!(request.name, None);
    }

    fn list_item() -> ApiKeyListItem {
        ApiKeyListItem {
            id: 3,
            key: "value".to_string().into(),
            name: "ci".into(),
            permission_type: "custom".into(),
            sub_account_id: 0,
            sub_account_name: String::new(),
            created_at: 1,
        }
    }

    /// A spec change is planned against the permissions and allowed IPs status last recorded
    /// for the same key: a changed permission set is one PUT without reading the detail first.
    #[test]
    fn known_detail_fields_come_from_status_of_the_same_key() {
        let status = ApiKeyStatus {
            id: Some(3),
            permissions: vec![
                NamedId {
                    id: 2,
                    name: "b".into(),
                },
                NamedId {
                    id: 1,
                    name: "a".into(),
                },
            ],
            allowed_ips: vec!["10.0.0.2".into(), "10.0.0.1".into()],
            ..Default::default()
        };
        let o = <ApiKey as ManagedKind>::observe_known(&list_item(), &status);
        assert_eq!(o.permission_ids, Some(vec![1, 2]));
        assert!(
            plan(&desired(), Some((FOUND, &o)))
                .unwrap()
                .steps
                .is_empty()
        );
        let mut d = desired();
        d.permission_ids = vec![1, 3];
        let request = update(plan(&d, Some((FOUND, &o))).unwrap());
        assert_eq!(request.permission_ids, Some(vec![1, 3]));
        assert_eq!(request.allowed_ip, None);

        // Status of another key (or none): the detail-only fields are unknown, not compared.
        let other = ApiKeyStatus {
            id: Some(4),
            ..status
        };
        let o = <ApiKey as ManagedKind>::observe_known(&list_item(), &other);
        assert_eq!((o.permission_ids, o.allowed_ips), (None, None));
    }

    /// A key inside a sub account is created (the front end calls with the sub account's
    /// credential), and its value is never taken from the company's list.
    #[test]
    fn sub_account_key_is_created_and_not_exported_from_a_list() {
        let mut d = desired();
        d.sub_account_ref = Some("team-a".into());
        d.sub_account_id = Some(7);
        let p = plan(&d, None).unwrap();
        assert!(matches!(p.steps[0].request, Call::Create(_)));
        let item = ApiKeyListItem {
            sub_account_id: 7,
            ..list_item()
        };
        assert!(<ApiKey as ManagedKind>::item_exports(&d, &item).is_none());
        d.sub_account_ref = None;
        assert!(<ApiKey as ManagedKind>::item_exports(&d, &list_item()).is_some());
    }

    /// A key inside a sub account is found among that sub account's keys only, by id as by
    /// name: another tenant's key id reaches nothing.
    #[test]
    fn sub_account_lookup_stays_inside() {
        let mut d = desired();
        d.sub_account_id = Some(7);
        let theirs = ApiKeyListItem {
            id: 40,
            sub_account_id: 8,
            name: d.name.clone(),
            ..list_item()
        };
        let items = [theirs];
        let lookup = <ApiKey as ManagedKind>::lookup;
        assert!(matches!(
            lookup(&d, Some(40), None, &items),
            Lookup::ExternalIdNotFound(40)
        ));
        assert!(matches!(
            lookup(&d, None, Some(40), &items),
            Lookup::Missing
        ));
        assert!(matches!(lookup(&d, None, None, &items), Lookup::Missing));
    }
}
