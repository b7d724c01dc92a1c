//! SubAccount pipeline: spec -> desired -> plan against the sub account in the service
//! (interface document, section "Sub accounts").

use crate::api::{CreateSubAccount, SubAccountDetail, SubAccountListItem, UpdateSubAccount};
use crate::crd::subaccount::NamedId;
use crate::crd::{InitialApiKey, SubAccount, SubAccountStatus};

use super::plan::{Action, Plan};
use crate::engine::FieldChange;
use crate::engine::lookup::{self, Found, Lookup};
use crate::engine::natural_key;
use crate::engine::validate::{self, Problem};

/// Status written by `deletionPolicy: Deactivate` when `spec.deactivatedStatus` is unset.
pub const DEFAULT_DEACTIVATED_STATUS: &str = "inactive";

/// A validated SubAccount spec.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// Sub account name (natural key).
    pub name: String,
    /// Desired `status`, when managed.
    pub status: Option<String>,
    /// Desired `ipPoolId`, when managed.
    pub ip_pool_id: Option<i64>,
    /// First key to create with the sub account.
    pub initial_key: Option<InitialApiKey>,
    /// Id from the external-id annotation.
    pub external_id: Option<i64>,
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
        Observed {
            id: d.id,
            name: d.sub_account_name.clone(),
            status: d.status.clone(),
            ip_pool_id: Some(d.ip_pool_id),
        }
    }
}

/// True when `status` describes the sub account `id` and holds fields read from its detail
/// (`ipPoolId` is set only from a detail): a spec change can then be planned against it
/// without reading the detail.
pub fn status_has_detail(status: &SubAccountStatus, id: i64) -> bool {
    status.id == Some(id) && status.ip_pool_id.is_some()
}

impl Observed {
    /// The list item `i` with `ipPoolId` as `status` last recorded it (from a detail read or
    /// an update's answer) when `status` describes this same sub account (`status.id == i.id`);
    /// otherwise `ip_pool_id` is unknown (`None`) and not compared.
    pub fn last_known(i: &SubAccountListItem, status: &SubAccountStatus) -> Self {
        let mut o = Observed::from(i);
        if status.id == Some(i.id) {
            o.ip_pool_id = status.ip_pool_id;
        }
        o
    }
}

/// Validates the spec. Errors: every problem, each naming its field.
pub fn desired(r: &SubAccount) -> Result<Desired, Vec<Problem>> {
    let problems = validate::sub_account(r);
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(Desired {
        name: r.service_name().to_string(),
        status: r.spec.status.clone(),
        ip_pool_id: r.spec.ip_pool_id,
        initial_key: r.spec.api_key.clone(),
        external_id: validate::external_id(r.metadata.annotations.as_ref())
            .ok()
            .flatten(),
    })
}

/// Finds the sub account among `items` (external id, status id, then name).
pub fn lookup<'a>(
    d: &Desired,
    external_id: Option<i64>,
    status_id: Option<i64>,
    items: &'a [SubAccountListItem],
) -> Lookup<'a, SubAccountListItem> {
    lookup::find(
        items,
        |i| i.id,
        external_id,
        status_id,
        |i| natural_key::same_ignoring_case(&i.name, &d.name),
    )
}

/// True when comparing needs the detail (`GET /sub-account/{id}`): the list item lacks `ipPoolId`.
pub fn needs_detail(d: &Desired) -> bool {
    d.ip_pool_id.is_some()
}

/// The plan for `d` given the matched sub account, if any.
pub fn plan(
    d: &Desired,
    found: Option<(Found, &Observed)>,
) -> Plan<CreateSubAccount, UpdateSubAccount> {
    let Some((found, observed)) = found else {
        return Plan {
            found: None,
            action: Action::Create(create_request(d)),
            notes: Vec::new(),
        };
    };
    let mut changes = Vec::new();
    let mut request = UpdateSubAccount::default();
    if observed.name != d.name {
        changes.push(FieldChange::new("spec.name", &observed.name, &d.name));
        request.name = Some(d.name.clone());
    }
    if let Some(status) = &d.status
        && &observed.status != status
    {
        changes.push(FieldChange::new("spec.status", &observed.status, status));
        request.status = Some(status.clone());
    }
    if let (Some(want), Some(have)) = (d.ip_pool_id, observed.ip_pool_id)
        && want != have
    {
        changes.push(FieldChange::new(
            "spec.ipPoolId",
            have.to_string(),
            want.to_string(),
        ));
        request.ip_pool_id = Some(want);
    }
    let action = if changes.is_empty() {
        Action::Unchanged { id: observed.id }
    } else {
        Action::Update {
            id: observed.id,
            changes,
            request,
        }
    };
    Plan {
        found: Some(found),
        action,
        notes: Vec::new(),
    }
}

/// The body of `POST /sub-account` for `d`, including the first key when asked.
pub fn create_request(d: &Desired) -> CreateSubAccount {
    let mut req = CreateSubAccount {
        name: Some(d.name.clone()),
        status: d.status.clone(),
        ip_pool_id: d.ip_pool_id,
        ..Default::default()
    };
    if let Some(key) = &d.initial_key {
        req.create_api_key = Some(true);
        req.api_key_name = Some(key.name.clone().unwrap_or_else(|| d.name.clone()));
        req.permission_type = key.permission_type.clone();
        req.permission_ids = (!key.permission_ids.is_empty()).then(|| key.permission_ids.clone());
        req.allowed_ips = (!key.allowed_ips.is_empty()).then(|| key.allowed_ips.join(","));
    }
    req
}

/// The body of `PUT /sub-account/{id}` for `deletionPolicy: Deactivate`.
pub fn deactivate_request(r: &SubAccount) -> UpdateSubAccount {
    UpdateSubAccount {
        status: Some(
            r.spec
                .deactivated_status
                .clone()
                .unwrap_or_else(|| DEFAULT_DEACTIVATED_STATUS.into()),
        ),
        ..Default::default()
    }
}

/// The name of the first key in the service: `spec.apiKey.name`, else the sub account name.
pub fn initial_key_name(d: &Desired) -> Option<String> {
    d.initial_key
        .as_ref()
        .map(|k| k.name.clone().unwrap_or_else(|| d.name.clone()))
}

/// Status fields mirrored from the detail (conditions and observedGeneration are left empty).
///
/// `status.apiKeys` lists ids and names only.
pub fn status_from_detail(d: &SubAccountDetail) -> SubAccountStatus {
    SubAccountStatus {
        id: Some(d.id),
        name: Some(d.sub_account_name.clone()),
        status: Some(d.status.clone()),
        ip_pool_id: Some(d.ip_pool_id),
        ip_pool_name: Some(d.ip_pool_name.clone()),
        created_at: Some(d.created_at),
        api_keys: d
            .api_keys
            .iter()
            .map(|k| NamedId {
                id: k.id,
                name: k.name.clone(),
            })
            .collect(),
        domains: d
            .domains
            .iter()
            .map(|x| NamedId {
                id: x.id,
                name: x.domain.clone(),
            })
            .collect(),
        ..Default::default()
    }
}

/// The list item the service would now list for `d` (to update a cached list after a write).
pub fn list_item_from_detail(d: &SubAccountDetail) -> SubAccountListItem {
    SubAccountListItem {
        id: d.id,
        name: d.sub_account_name.clone(),
        status: d.status.clone(),
        created_at: d.created_at,
    }
}

/// Status fields mirrored from a list item, keeping the fields a list item lacks from `old`.
pub fn status_from_list_item(i: &SubAccountListItem, old: &SubAccountStatus) -> SubAccountStatus {
    SubAccountStatus {
        id: Some(i.id),
        name: Some(i.name.clone()),
        status: Some(i.status.clone()),
        created_at: Some(i.created_at),
        ip_pool_id: old.ip_pool_id,
        ip_pool_name: old.ip_pool_name.clone(),
        api_keys: old.api_keys.clone(),
        domains: old.domains.clone(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    use crate::engine::MatchedBy;

    fn desired_named(name: &str) -> Desired {
        Desired {
            name: name.into(),
            status: Some("active".into()),
            ip_pool_id: Some(2),
            initial_key: None,
            external_id: None,
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
        let Action::Update {
            id,
            request,
            changes,
        } = p.action
        else {
            panic!("expected update")
        };
        assert_eq!(id, 7);
        assert_eq!(
            request,
            UpdateSubAccount {
                status: Some("active".into()),
                ..Default::default()
            }
        );
        assert_eq!(changes.len(), 1);
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
        assert_eq!(
            plan(&d, Some((found(7), &observed))).action,
            Action::Unchanged { id: 7 }
        );
    }

    /// A missing sub account is created with its first key.
    #[test]
    fn create_includes_first_key() {
        let mut d = desired_named("team-a");
        d.initial_key = Some(InitialApiKey {
            allowed_ips: vec!["10.0.0.1".into(), "10.0.0.2".into()],
            secret_name: "s".into(),
            ..Default::default()
        });
        let Action::Create(req) = plan(&d, None).action else {
            panic!("expected create")
        };
        assert_eq!(req.create_api_key, Some(true));
        assert_eq!(req.api_key_name.as_deref(), Some("team-a"));
        assert_eq!(req.allowed_ips.as_deref(), Some("10.0.0.1,10.0.0.2"));
    }
}
