//! SubAccount on the engine (interface document, section "Sub accounts"): created with its
//! first API key when the spec asks for one (`createApiKey` and the key's fields, accepted at
//! create only), updated with the changed fields. The first key's value is exported to
//! `spec.apiKey.secretName`. The interface has no DELETE for sub accounts.

use crate::api::{
    ApiError, Client, CreateSubAccount, SubAccountDetail, SubAccountListItem, UpdateSubAccount,
};
use crate::crd::subaccount::NamedId;
use crate::crd::{InitialApiKey, SubAccount, SubAccountDeletionPolicy, SubAccountStatus};
use crate::engine::inventory::Inventory;
use crate::engine::{
    Export, FieldChange, Found, Lookup, ManagedKind, Planned, PlannedStep, Problem, SecretRef,
    Seen, Step, StepAction, Summary, lookup, natural_key, placement, target, validate,
};

/// The key of the first key's value in its Secret (the same as an ApiKey's).
pub use super::api_key::SECRET_KEY;

/// Status written by `deletionPolicy: Deactivate` when `spec.deactivatedStatus` is unset.
pub const DEFAULT_DEACTIVATED_STATUS: &str = "inactive";

/// A validated SubAccount spec.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// Sub account name (natural key).
    pub name: String,
    /// Desired `status`, when managed.
    pub status: Option<String>,
    /// The status the deletion policy sets (`Deactivate`), else `None`.
    pub deactivated_status: Option<String>,
    /// Desired `ipPoolId`, when managed.
    pub ip_pool_id: Option<i64>,
    /// First key to create with the sub account.
    pub initial_key: Option<InitialApiKey>,
    /// Name of the key the operator calls with inside the sub account
    /// ([`placement::credential_key_name`]).
    pub credential_key: String,
}

/// What the service holds for a sub account. `ip_pool_id` is `None` when read from a list item,
/// which does not carry it.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    /// Id.
    pub id: i64,
    /// `name` / `subAccountName`.
    pub name: String,
    /// `status`.
    pub status: String,
    /// `ipPoolId`, when known.
    pub ip_pool_id: Option<i64>,
}

impl From<&SubAccountListItem> for Observed {
    fn from(i: &SubAccountListItem) -> Self {
        Observed {
            id: i.id,
            name: i.name.clone(),
            status: i.status.clone(),
            ip_pool_id: None,
        }
    }
}

impl From<&SubAccountDetail> for Observed {
    fn from(d: &SubAccountDetail) -> Self {
        let ip_pool_id = Some(d.ip_pool_id);
        Observed {
            ip_pool_id,
            ..Observed::from(&SubAccountListItem::from(d))
        }
    }
}

/// The calls of a sub account.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    /// `POST /sub-account`.
    Create(CreateSubAccount),
    /// `PUT /sub-account/{id}` with the changed fields.
    Update(UpdateSubAccount),
}

fn create_step(d: &Desired) -> PlannedStep<Call> {
    let req = create_request(d);
    let ips = (d.initial_key.as_ref())
        .and_then(|k| (!k.allowed_ips.is_empty()).then_some(&k.allowed_ips));
    let step = Step::new(StepAction::Create, "POST /sub-account")
        .sends_some("spec.name", req.name.as_deref(), false)
        .sends_some("spec.status", req.status.as_deref(), false)
        .sends_some("spec.ipPoolId", req.ip_pool_id, false)
        .sends_some("spec.credentialKeyName", req.api_key_name.as_deref(), true)
        .sends_some(
            "spec.apiKey.permissionType",
            req.permission_type.as_deref(),
            true,
        )
        .sends_some(
            "spec.apiKey.permissionIds",
            req.permission_ids.as_ref(),
            true,
        )
        .sends_some("spec.apiKey.allowedIps", ips, true);
    let request = Call::Create(req);
    PlannedStep { step, request }
}

impl ManagedKind for SubAccount {
    type Resource = SubAccount;
    type Desired = Desired;
    type Item = SubAccountListItem;
    type Detail = SubAccountDetail;
    type Observed = Observed;
    type Request = Call;
    const KIND: &'static str = "SubAccount";
    const NOUN: &'static str = "sub account";
    const SECRET_KEY: &'static str = SECRET_KEY;
    /// `PUT /sub-account/{id}` takes a new name (the interface document, "Sub accounts").
    const NATURAL_KEY_UPDATABLE: bool = true;

    fn desired(r: &SubAccount) -> Result<Desired, Vec<Problem>> {
        let problems = validate::sub_account(r);
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(Desired {
            name: r.service_name().to_string(),
            status: r.spec.status.clone(),
            deactivated_status: deactivated_status(r),
            ip_pool_id: r.spec.ip_pool_id,
            initial_key: r.spec.api_key.clone(),
            credential_key: placement::credential_key_name(r),
        })
    }

    fn natural_key(d: &Desired) -> &str {
        &d.name
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
        lookup::find(
            items,
            |i| i.id,
            |_| true,
            external_id,
            status_id,
            |i| natural_key::same_ignoring_case(&i.name, &d.name),
        )
    }

    /// The list item lacks `ipPoolId`.
    fn needs_detail(d: &Desired) -> bool {
        d.ip_pool_id.is_some()
    }

    fn plan(d: &Desired, found: Option<(Found, &Observed)>) -> Result<Planned<Call>, String> {
        let Some((found, observed)) = found else {
            return Ok(Planned::creating(vec![create_step(d)]));
        };
        // Only fields that differ and are known go into the update body.
        let (mut changes, mut request) = (Vec::new(), UpdateSubAccount::default());
        let c = &mut changes;
        request.name = FieldChange::record(c, "spec.name", &observed.name, &d.name);
        if let Some(want) = &d.status {
            request.status = FieldChange::record(c, "spec.status", &observed.status, want);
        }
        if let (Some(want), Some(have)) = (d.ip_pool_id, observed.ip_pool_id) {
            request.ip_pool_id = FieldChange::record(c, "spec.ipPoolId", &have, &want);
        }
        // Deactivated by its deletion policy (`destroy`, or the resource deleted once), it
        // stays so while `status` is unmanaged: said, so that nobody expects a reactivation.
        let notes = (d.status.is_none() && d.deactivated_status.as_ref() == Some(&observed.status))
            .then(|| format!("the sub account has status \"{}\", which its deletion policy sets; spec.status is unset, so it is left as is (set spec.status to change it)", observed.status))
            .into_iter()
            .collect();
        let request = Call::Update(request);
        let endpoint = "PUT /sub-account/{id}";
        Ok(Planned::updating(found, endpoint, changes, request, notes))
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
        let status = deactivated_status(r)?;
        let request = UpdateSubAccount {
            status: Some(status.clone()),
            ..Default::default()
        };
        Some(PlannedStep {
            step: Step::new(StepAction::Update, "PUT /sub-account/{id}").sends(
                "spec.deactivatedStatus",
                status,
                false,
            ),
            request: Call::Update(request),
        })
    }

    fn already_deleted(r: &SubAccount, item: &SubAccountListItem) -> Option<String> {
        let status = deactivated_status(r).filter(|s| *s == item.status)?;
        Some(format!("already deactivated (status \"{status}\")"))
    }

    fn secret_refs(d: &Desired) -> Vec<SecretRef> {
        d.initial_key
            .iter()
            .map(|k| SecretRef {
                secret_name: k.secret_name.clone(),
                key: Self::SECRET_KEY,
            })
            .collect()
    }

    /// The first key's value, from the sub account's keys (a read lists them with their values).
    fn exports(d: &Desired, detail: &SubAccountDetail) -> Result<Vec<Export>, String> {
        // The first key is the credential, which validation keeps named as spec.apiKey.name.
        let Some(key) = &d.initial_key else {
            return Ok(Vec::new());
        };
        let name = &d.credential_key;
        match detail
            .api_keys
            .iter()
            .find(|k| natural_key::same_key_name(&k.name, name))
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

    const NEEDS_COMPANY_KEY: bool = true;

    fn project(
        old: &SubAccountStatus,
        seen: Seen<'_, SubAccountListItem, SubAccountDetail>,
    ) -> SubAccountStatus {
        match seen {
            // `status.apiKeys` lists ids and names only.
            Seen::Detail(d) => SubAccountStatus {
                ip_pool_id: Some(d.ip_pool_id),
                ip_pool_name: Some(d.ip_pool_name.clone()),
                api_keys: (d.api_keys.iter())
                    .map(|k| NamedId::new(k.id, &k.name))
                    .collect(),
                domains: (d.domains.iter())
                    .map(|x| NamedId::new(x.id, &x.domain))
                    .collect(),
                ..Self::project(old, Seen::Item(&SubAccountListItem::from(d)))
            },
            // The fields a list item lacks are kept. The credential is found by the front end,
            // not shown by the object: kept while the object is the same one.
            Seen::Item(i) => SubAccountStatus {
                id: Some(i.id),
                name: Some(i.name.clone()),
                status: Some(i.status.clone()),
                created_at: Some(i.created_at),
                credential: old.credential.clone().filter(|_| old.id == Some(i.id)),
                ..old.clone()
            },
        }
    }

    fn status_has_detail(
        _d: &Desired,
        status: &SubAccountStatus,
        item: &SubAccountListItem,
    ) -> bool {
        // `ipPoolId` is set only from a detail.
        status.id == Some(item.id) && status.ip_pool_id.is_some()
    }

    /// The list item `i` with `ipPoolId` as `status` last recorded it (from a detail read or
    /// an update's answer) when `status` describes this same sub account (`status.id == i.id`);
    /// otherwise `ip_pool_id` is unknown (`None`) and not compared.
    fn observe_known(i: &SubAccountListItem, status: &SubAccountStatus) -> Observed {
        let mut o = Observed::from(i);
        if status.id == Some(i.id) {
            o.ip_pool_id = status.ip_pool_id;
        }
        o
    }

    fn summary(_d: &Desired, status: &SubAccountStatus) -> Summary {
        Summary {
            ready: true,
            reason: "Available",
            message: format!("sub account {} is in sync", status.id.unwrap_or_default()),
        }
    }
}

/// The status `Deactivate` sets (`spec.deactivatedStatus`, else
/// [`DEFAULT_DEACTIVATED_STATUS`]); `None` when the deletion policy keeps the sub account.
fn deactivated_status(r: &SubAccount) -> Option<String> {
    (r.spec.deletion_policy == SubAccountDeletionPolicy::Deactivate).then(|| {
        (r.spec.deactivated_status.clone()).unwrap_or_else(|| DEFAULT_DEACTIVATED_STATUS.into())
    })
}

/// The body of `POST /sub-account` for `d`, including the first key when asked.
fn create_request(d: &Desired) -> CreateSubAccount {
    let mut req = CreateSubAccount {
        name: Some(d.name.clone()),
        status: d.status.clone(),
        ip_pool_id: d.ip_pool_id,
        ..Default::default()
    };
    // The first key is the operator's credential in the sub account: spec.apiKey's (release
    // 0.1's application key, with its restrictions), else a key with full permissions and no
    // address restriction.
    req.create_api_key = Some(true);
    req.api_key_name = Some(d.credential_key.clone());
    if let Some(key) = &d.initial_key {
        req.permission_type = key.permission_type.clone();
        req.permission_ids = (!key.permission_ids.is_empty()).then(|| key.permission_ids.clone());
        req.allowed_ips = (!key.allowed_ips.is_empty()).then(|| key.allowed_ips.join(","));
    }
    req
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::MatchedBy;

    fn plan(d: &Desired, found: Option<(Found, &Observed)>) -> Planned<Call> {
        <SubAccount as ManagedKind>::plan(d, found).unwrap()
    }

    fn status_has_detail(status: &SubAccountStatus, id: i64) -> bool {
        let item = SubAccountListItem {
            id,
            name: String::new(),
            status: String::new(),
            created_at: 0,
        };
        <SubAccount as ManagedKind>::status_has_detail(&desired_named("x"), status, &item)
    }

    /// `ipPoolId` in status comes only from a detail: without it, status does not hold the
    /// detail; with it, a spec change is planned against it.
    #[test]
    fn status_detail_is_known_by_its_ip_pool() {
        let mut status = SubAccountStatus {
            id: Some(5),
            ..Default::default()
        };
        assert!(!status_has_detail(&status, 5));
        status.ip_pool_id = Some(2);
        assert!(status_has_detail(&status, 5));
        assert!(!status_has_detail(&status, 6), "another sub account");
    }

    fn desired_named(name: &str) -> Desired {
        Desired {
            name: name.into(),
            status: Some("active".into()),
            deactivated_status: None,
            ip_pool_id: Some(2),
            initial_key: None,
            credential_key: crate::engine::placement::OPERATOR_KEY_NAME.into(),
        }
    }

    fn found(id: i64) -> Found {
        Found {
            id,
            matched_by: MatchedBy::StatusId,
        }
    }

    /// Only fields that differ and are known go into the update body.
    #[test]
    fn update_carries_only_changed_fields() {
        let d = desired_named("team-a");
        let observed = Observed {
            id: 7,
            name: "team-a".into(),
            status: "inactive".into(),
            ip_pool_id: Some(2),
        };
        let p = plan(&d, Some((found(7), &observed)));
        let want = Call::Update(UpdateSubAccount {
            status: Some("active".into()),
            ..Default::default()
        });
        let calls: Vec<&Call> = p.steps.iter().map(|s| &s.request).collect();
        assert_eq!(calls, [&want]);
        assert_eq!(p.changes.len(), 1);
    }

    /// A list item (no ipPoolId) never causes an ipPoolId update; equal fields mean no write.
    #[test]
    fn unknown_fields_are_not_changed() {
        let d = desired_named("team-a");
        let observed = Observed {
            id: 7,
            name: "team-a".into(),
            status: "active".into(),
            ip_pool_id: None,
        };
        assert!(plan(&d, Some((found(7), &observed))).steps.is_empty());
    }

    /// A missing sub account is created with its first key, which is then the operator's
    /// credential there (release 0.1's `spec.apiKey`, with its restrictions).
    #[test]
    fn create_includes_first_key() {
        let mut d = desired_named("team-a");
        d.initial_key = Some(InitialApiKey {
            allowed_ips: vec!["10.0.0.1".into(), "10.0.0.2".into()],
            secret_name: "s".into(),
            ..Default::default()
        });
        d.credential_key = "team-a".into();
        let Call::Create(req) = &plan(&d, None).steps[0].request else {
            panic!("expected create")
        };
        assert_eq!(req.create_api_key, Some(true));
        assert_eq!(req.api_key_name.as_deref(), Some("team-a"));
        assert_eq!(req.allowed_ips.as_deref(), Some("10.0.0.1,10.0.0.2"));
    }

    /// Without `spec.apiKey`, the sub account is created with the operator's credential: full
    /// permissions (none listed), no address restriction.
    #[test]
    fn create_includes_the_operator_credential() {
        let d = desired_named("team-a");
        let Call::Create(req) = &plan(&d, None).steps[0].request else {
            panic!("expected create")
        };
        assert_eq!(req.create_api_key, Some(true));
        assert_eq!(
            req.api_key_name.as_deref(),
            Some(placement::OPERATOR_KEY_NAME)
        );
        assert_eq!(
            (&req.permission_ids, &req.permission_type, &req.allowed_ips),
            (&None, &None, &None)
        );
    }
}
