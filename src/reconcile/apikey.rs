//! ApiKey pipeline: spec -> desired -> plan against the key in the service
//! (interface document, section "API keys").

use std::net::IpAddr;

use crate::api::{ApiKeyDetail, ApiKeyListItem, CreateApiKey, UpdateApiKey};
use crate::crd::subaccount::NamedId;
use crate::crd::{ApiKey, ApiKeyStatus};

use super::plan::{Action, Plan};
use crate::engine::FieldChange;
use crate::engine::lookup::{self, Found, Lookup};
use crate::engine::natural_key;
use crate::engine::validate::{self, Problem};

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
    /// Id from the external-id annotation.
    pub external_id: Option<i64>,
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
        let mut ids: Vec<i64> = d.permissions.iter().map(|p| p.id).collect();
        ids.sort_unstable();
        Observed {
            id: d.id,
            name: d.name.clone(),
            permission_type: d.permission_type.clone(),
            sub_account_id: d.sub_account_id,
            permission_ids: Some(ids),
            allowed_ips: Some(parse_allowed_ip(&d.allowed_ip)),
        }
    }
}

/// True when `status` describes the key `id` and holds fields read from its detail (a
/// permission or an allowed IP): a spec change can then be planned against it without reading
/// the detail. A status whose permissions and allowed IPs are both empty may never have been
/// read from a detail (keys whose spec sets neither are compared through the list only), so it
/// does not count.
pub fn status_has_detail(status: &ApiKeyStatus, id: i64) -> bool {
    status.id == Some(id) && (!status.permissions.is_empty() || !status.allowed_ips.is_empty())
}

impl Observed {
    /// The list item `i` with the detail-only fields as `status` last recorded them (from a
    /// detail read or an update's answer) when `status` describes this same key (`status.id ==
    /// i.id`); otherwise those fields are unknown (`None`) and not compared. Only for a spec
    /// that sets permissions or allowed IPs ([`needs_detail`]); use `Observed::from(i)` for
    /// the others, whose allowed IPs are not managed.
    pub fn last_known(i: &ApiKeyListItem, status: &ApiKeyStatus) -> Self {
        let mut o = Observed::from(i);
        if status.id == Some(i.id) {
            let mut ids: Vec<i64> = status.permissions.iter().map(|p| p.id).collect();
            ids.sort_unstable();
            o.permission_ids = Some(ids);
            o.allowed_ips = Some(parse_allowed_ip(&status.allowed_ips.join(",")));
        }
        o
    }
}

/// Parses the interface's comma separated `allowedIp` into sorted addresses, skipping blanks and
/// entries that are not addresses (they cannot match the spec, which only holds addresses).
pub fn parse_allowed_ip(raw: &str) -> Vec<IpAddr> {
    let mut ips: Vec<IpAddr> = raw
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    ips.sort_unstable();
    ips.dedup();
    ips
}

fn join_ips(ips: &[IpAddr]) -> String {
    ips.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Validates the spec. Errors: every problem, each naming its field.
pub fn desired(r: &ApiKey) -> Result<Desired, Vec<Problem>> {
    let problems = validate::api_key(r);
    if !problems.is_empty() {
        return Err(problems);
    }
    let mut permission_ids = r.spec.permission_ids.clone();
    permission_ids.sort_unstable();
    let mut allowed_ips: Vec<IpAddr> = r
        .spec
        .allowed_ips
        .iter()
        .filter_map(|s| s.parse().ok())
        .collect();
    allowed_ips.sort_unstable();
    Ok(Desired {
        name: r.service_name().to_string(),
        permission_type: r.spec.permission_type.clone(),
        permission_ids,
        allowed_ips,
        secret_name: r.spec.secret_name.clone(),
        sub_account_ref: r.spec.sub_account_ref.as_ref().map(|s| s.name.clone()),
        external_id: validate::external_id(r.metadata.annotations.as_ref())
            .ok()
            .flatten(),
        sub_account_id: None,
    })
}

/// Finds the key among `items`: external id, status id, then the name within the scope:
/// the referenced sub account's keys (`sub_account_id` Some), or company keys (subAccountId 0).
pub fn lookup<'a>(
    d: &Desired,
    external_id: Option<i64>,
    status_id: Option<i64>,
    sub_account_id: Option<i64>,
    items: &'a [ApiKeyListItem],
) -> Lookup<'a, ApiKeyListItem> {
    let scope = sub_account_id.unwrap_or(0);
    lookup::find(
        items,
        |i| i.id,
        external_id,
        status_id,
        |i| natural_key::same_key_name(&i.name, &d.name) && i.sub_account_id == scope,
    )
}

/// True when comparing needs the detail (`GET /api-key/{id}`): the list item lacks
/// `permissions` and `allowedIp`.
pub fn needs_detail(d: &Desired) -> bool {
    !d.permission_ids.is_empty() || !d.allowed_ips.is_empty()
}

/// The plan for `d` given the matched key, if any.
///
/// Errors: a message for people when the key is missing but cannot be created: the interface
/// creates keys only at company level (`POST /api-key` takes no sub account).
pub fn plan(
    d: &Desired,
    found: Option<(Found, &Observed)>,
) -> Result<Plan<CreateApiKey, UpdateApiKey>, String> {
    let Some((found, observed)) = found else {
        if let Some(sub) = &d.sub_account_ref {
            return Err(format!(
                "no key named \"{}\" exists in the sub account of SubAccount \"{sub}\", and the interface cannot create keys inside a sub account; create it through the SubAccount's spec.apiKey or set the {} annotation to an existing key's id",
                d.name,
                crate::crd::ANNOTATION_EXTERNAL_ID
            ));
        }
        return Ok(Plan {
            found: None,
            action: Action::Create(create_request(d)),
            notes: Vec::new(),
        });
    };
    let mut changes = Vec::new();
    let mut request = UpdateApiKey::default();
    if observed.name != d.name {
        changes.push(FieldChange::new("spec.name", &observed.name, &d.name));
        request.name = Some(d.name.clone());
    }
    if let Some(want) = &d.permission_type
        && &observed.permission_type != want
    {
        changes.push(FieldChange::new(
            "spec.permissionType",
            &observed.permission_type,
            want,
        ));
        request.permission_type = Some(want.clone());
    }
    if !d.permission_ids.is_empty()
        && let Some(have) = &observed.permission_ids
        && have != &d.permission_ids
    {
        changes.push(FieldChange::new(
            "spec.permissionIds",
            format!("{have:?}"),
            format!("{:?}", d.permission_ids),
        ));
        request.permission_ids = Some(d.permission_ids.clone());
    }
    if let Some(have) = &observed.allowed_ips
        && have != &d.allowed_ips
    {
        changes.push(FieldChange::new(
            "spec.allowedIps",
            join_ips(have),
            join_ips(&d.allowed_ips),
        ));
        request.allowed_ip = Some(join_ips(&d.allowed_ips));
    }
    let mut notes = Vec::new();
    if request.allowed_ip.as_deref() == Some("") {
        notes.push(
            "spec.allowedIps is empty: the key's address restriction is removed and it becomes usable from any address"
                .into(),
        );
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
    Ok(Plan {
        found: Some(found),
        action,
        notes,
    })
}

/// The body of `POST /api-key` for `d`. The interface's create body has no `permissionType`;
/// when the spec sets one that the created key lacks, the next plan updates it.
pub fn create_request(d: &Desired) -> CreateApiKey {
    CreateApiKey {
        name: Some(d.name.clone()),
        permission_ids: (!d.permission_ids.is_empty()).then(|| d.permission_ids.clone()),
        allowed_ip: (!d.allowed_ips.is_empty()).then(|| join_ips(&d.allowed_ips)),
    }
}

/// Status fields mirrored from the detail (never the key value).
pub fn status_from_detail(d: &ApiKeyDetail) -> ApiKeyStatus {
    ApiKeyStatus {
        id: Some(d.id),
        name: Some(d.name.clone()),
        sub_account_id: Some(d.sub_account_id),
        sub_account_name: Some(d.sub_account_name.clone()),
        permission_type: Some(d.permission_type.clone()),
        permissions: d
            .permissions
            .iter()
            .map(|p| NamedId {
                id: p.id,
                name: p.name.clone(),
            })
            .collect(),
        allowed_ips: parse_allowed_ip(&d.allowed_ip)
            .iter()
            .map(ToString::to_string)
            .collect(),
        created_at: Some(d.created_at),
        ..Default::default()
    }
}

/// The list item the service would now list for `d` (to update a cached list after a write).
pub fn list_item_from_detail(d: &ApiKeyDetail) -> ApiKeyListItem {
    ApiKeyListItem {
        id: d.id,
        key: d.key.clone(),
        name: d.name.clone(),
        permission_type: d.permission_type.clone(),
        sub_account_id: d.sub_account_id,
        sub_account_name: d.sub_account_name.clone(),
        created_at: d.created_at,
    }
}

/// Status fields mirrored from a list item, keeping the fields a list item lacks from `old`.
pub fn status_from_list_item(i: &ApiKeyListItem, old: &ApiKeyStatus) -> ApiKeyStatus {
    ApiKeyStatus {
        id: Some(i.id),
        name: Some(i.name.clone()),
        sub_account_id: Some(i.sub_account_id),
        sub_account_name: Some(i.sub_account_name.clone()),
        permission_type: Some(i.permission_type.clone()),
        created_at: Some(i.created_at),
        permissions: old.permissions.clone(),
        allowed_ips: old.allowed_ips.clone(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::MatchedBy;

    fn desired() -> Desired {
        Desired {
            name: "ci".into(),
            permission_type: Some("custom".into()),
            permission_ids: vec![1, 2],
            allowed_ips: parse_allowed_ip("10.0.0.2,10.0.0.1"),
            secret_name: "s".into(),
            sub_account_ref: None,
            external_id: None,
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
            allowed_ips: Some(parse_allowed_ip(" 10.0.0.1, 10.0.0.2")),
        }
    }

    const FOUND: Found = Found {
        id: 3,
        matched_by: MatchedBy::StatusId,
    };

    /// Order and spacing of allowedIp do not count as a difference.
    #[test]
    fn equal_sets_are_unchanged() {
        assert_eq!(
            plan(&desired(), Some((FOUND, &observed()))).unwrap().action,
            Action::Unchanged { id: 3 }
        );
    }

    /// A permission change becomes one update with only permissionIds.
    #[test]
    fn permission_change_is_one_field() {
        let mut o = observed();
        o.permission_ids = Some(vec![1]);
        let p = plan(&desired(), Some((FOUND, &o))).unwrap();
        let Action::Update { request, .. } = p.action else {
            panic!("expected update")
        };
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
    fn last_known_detail_fields_come_from_status_of_the_same_key() {
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
        let o = Observed::last_known(&list_item(), &status);
        assert_eq!(o.permission_ids, Some(vec![1, 2]));
        assert_eq!(
            plan(&desired(), Some((FOUND, &o))).unwrap().action,
            Action::Unchanged { id: 3 }
        );
        let mut d = desired();
        d.permission_ids = vec![1, 3];
        let Action::Update { request, .. } = plan(&d, Some((FOUND, &o))).unwrap().action else {
            panic!("expected update")
        };
        assert_eq!(request.permission_ids, Some(vec![1, 3]));
        assert_eq!(request.allowed_ip, None);

        // Status of another key (or none): the detail-only fields are unknown, not compared.
        let other = ApiKeyStatus {
            id: Some(4),
            ..status
        };
        let o = Observed::last_known(&list_item(), &other);
        assert_eq!((o.permission_ids, o.allowed_ips), (None, None));
    }

    /// A key scoped to a sub account is never created (the interface cannot).
    #[test]
    fn sub_account_key_is_not_created() {
        let mut d = desired();
        d.sub_account_ref = Some("team-a".into());
        assert!(
            plan(&d, None)
                .unwrap_err()
                .contains("cannot create keys inside a sub account")
        );
    }
}
