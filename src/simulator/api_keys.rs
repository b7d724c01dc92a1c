//! API key endpoints (the interface document, section "API keys"):
//! `GET/POST /api-key`, `GET/PUT/DELETE /api-key/{id}`.
//!
//! Decisions where the interface is silent:
//! - `permissionIds` refer to the fixed catalogue [`PERMISSIONS`]; an unknown id is a 400.
//! - `permissionType` is free text. POST does not take it (the interface lists only
//!   `allowedIp`, `name`, `permissionIds`; other fields are ignored): a new key gets `custom`
//!   when `permissionIds` is non-empty, else `full`. PUT sets it when sent.
//! - A key without `name` is named `key-<id>`. Duplicate names are allowed.
//! - Keys created with a company key belong to the company (`subAccountId` 0,
//!   `subAccountName` ""); keys created with a sub account's key belong to that sub account.
//! - A sub account's key sees (lists, reads, updates, deletes) only its sub account's keys.
//! - `sort`: `<field>`, `-<field>`, `<field>:asc` or `<field>:desc` with field one of `id`,
//!   `name`, `createdAt`, `permissionType`, `subAccountId`; default `id` ascending.

use std::cmp::Ordering;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use super::auth::Caller;
use super::body::read_json;
use super::errors::{ApiError, ApiResult};
use super::paging::{PathId, QueryParams};
use super::server::Shared;
use super::state::{ApiKey, COMPANY_ID, COMPANY_NAME, Store, now_ms};
use super::validate;

/// One entry of the permission catalogue (`permissions` items of the API key detail).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Permission {
    /// The id used in `permissionIds`.
    pub id: i64,
    /// Short name (`name` of the `permissions` item).
    pub name: &'static str,
    /// Human description (`detail` of the `permissions` item).
    pub detail: &'static str,
}

/// The simulator's permission catalogue (the interface does not list one).
pub const PERMISSIONS: &[Permission] = &[
    Permission {
        id: 1,
        name: "send",
        detail: "Send emails",
    },
    Permission {
        id: 2,
        name: "analytics",
        detail: "Read analytics",
    },
    Permission {
        id: 3,
        name: "domain",
        detail: "Manage sending domains",
    },
    Permission {
        id: 4,
        name: "sub-account",
        detail: "Manage sub accounts",
    },
    Permission {
        id: 5,
        name: "api-key",
        detail: "Manage API keys",
    },
    Permission {
        id: 6,
        name: "suppression",
        detail: "Manage the suppression list",
    },
];

pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/api-key", get(list).post(create))
        .route("/api-key/{id}", get(read).put(update).delete(remove))
}

/// API key list item (the interface document, section "API key (list item)").
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ApiKeyListItem {
    id: i64,
    key: String,
    name: String,
    permission_type: String,
    sub_account_id: i64,
    sub_account_name: String,
    created_at: i64,
}

/// API key detail (the interface document, section "API key (detail)").
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ApiKeyDetail {
    id: i64,
    key: String,
    name: String,
    allowed_ip: String,
    company_id: i64,
    company_name: &'static str,
    created_at: i64,
    permission_type: String,
    permissions: Vec<PermissionView>,
    sub_account_id: i64,
    sub_account_name: String,
}

#[derive(Serialize)]
struct PermissionView {
    detail: &'static str,
    id: i64,
    name: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ApiKeyList {
    api_keys: Vec<ApiKeyListItem>,
    count: usize,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateBody {
    allowed_ip: Option<String>,
    name: Option<String>,
    permission_ids: Option<Vec<i64>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UpdateBody {
    allowed_ip: Option<String>,
    name: Option<String>,
    permission_ids: Option<Vec<i64>>,
    permission_type: Option<String>,
}

pub(crate) fn list_item(store: &Store, key: &ApiKey) -> ApiKeyListItem {
    ApiKeyListItem {
        id: key.id,
        key: key.key.clone(),
        name: key.name.clone(),
        permission_type: key.permission_type.clone(),
        sub_account_id: key.sub_account_id,
        sub_account_name: store.sub_account_name(key.sub_account_id),
        created_at: key.created_at,
    }
}

fn detail(store: &Store, key: &ApiKey) -> ApiKeyDetail {
    ApiKeyDetail {
        id: key.id,
        key: key.key.clone(),
        name: key.name.clone(),
        allowed_ip: key.allowed_ip.clone(),
        company_id: COMPANY_ID,
        company_name: COMPANY_NAME,
        created_at: key.created_at,
        permission_type: key.permission_type.clone(),
        permissions: key
            .permission_ids
            .iter()
            .filter_map(|id| PERMISSIONS.iter().find(|p| p.id == *id))
            .map(|p| PermissionView {
                detail: p.detail,
                id: p.id,
                name: p.name,
            })
            .collect(),
        sub_account_id: key.sub_account_id,
        sub_account_name: store.sub_account_name(key.sub_account_id),
    }
}

/// Checks that every id is in the catalogue.
pub(crate) fn check_permission_ids(ids: &[i64]) -> ApiResult<()> {
    match ids
        .iter()
        .find(|id| !PERMISSIONS.iter().any(|p| p.id == **id))
    {
        Some(unknown) => Err(ApiError::bad_request(format!(
            "permissionIds contains {unknown}, which is not a known permission"
        ))),
        None => Ok(()),
    }
}

/// Input for a new key, already validated except for the permission ids.
pub(crate) struct NewKey {
    pub name: Option<String>,
    pub allowed_ip: String,
    pub permission_ids: Vec<i64>,
    pub permission_type: Option<String>,
    pub sub_account_id: i64,
}

/// Stores a new key and returns a copy.
pub(crate) fn insert_key(store: &mut Store, new: NewKey) -> ApiResult<ApiKey> {
    check_permission_ids(&new.permission_ids)?;
    let id = store.take_api_key_id();
    let permission_type = new.permission_type.unwrap_or_else(|| {
        if new.permission_ids.is_empty() {
            "full"
        } else {
            "custom"
        }
        .to_string()
    });
    let now = now_ms();
    let key = ApiKey {
        id,
        key: store.new_key_value(),
        name: new.name.unwrap_or_else(|| format!("key-{id}")),
        allowed_ip: new.allowed_ip,
        permission_type,
        permission_ids: new.permission_ids,
        sub_account_id: new.sub_account_id,
        created_at: now,
        updated_at: now,
    };
    store.state.api_keys.push(key.clone());
    Ok(key)
}

async fn list(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<ApiKeyList>> {
    let query = QueryParams::parse(raw.as_deref());
    let page = query.page()?;
    let search = query.filter("search").map(str::to_lowercase);
    let sub_account_id = query.integer("subAccountId")?;
    let permission_type = query.filter("permissionType");
    let sort = query.filter("sort").map(parse_sort).transpose()?;

    let store = shared.store();
    let mut keys: Vec<&ApiKey> = store
        .state
        .api_keys
        .iter()
        .filter(|k| caller.scope.sees(k.sub_account_id))
        .filter(|k| {
            search
                .as_ref()
                .is_none_or(|s| k.name.to_lowercase().contains(s))
        })
        .filter(|k| sub_account_id.is_none_or(|id| k.sub_account_id == id))
        .filter(|k| permission_type.is_none_or(|t| k.permission_type.eq_ignore_ascii_case(t)))
        .collect();
    if let Some((field, descending)) = sort {
        keys.sort_by(|a, b| {
            let ordering = compare(field, a, b);
            if descending {
                ordering.reverse()
            } else {
                ordering
            }
        });
    }
    let count = keys.len();
    let api_keys = page
        .slice(&keys)
        .into_iter()
        .map(|k| list_item(&store, k))
        .collect();
    Ok(Json(ApiKeyList { api_keys, count }))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SortField {
    Id,
    Name,
    CreatedAt,
    PermissionType,
    SubAccountId,
}

/// Parses `field`, `-field`, `field:asc` or `field:desc` into the field and "descending".
fn parse_sort(raw: &str) -> ApiResult<(SortField, bool)> {
    let (name, descending) = if let Some(rest) = raw.strip_prefix('-') {
        (rest, true)
    } else if let Some((name, direction)) = raw.split_once(':') {
        match direction.to_ascii_lowercase().as_str() {
            "asc" => (name, false),
            "desc" => (name, true),
            _ => return Err(sort_error(raw)),
        }
    } else {
        (raw, false)
    };
    let field = match name {
        "id" => SortField::Id,
        "name" => SortField::Name,
        "createdAt" => SortField::CreatedAt,
        "permissionType" => SortField::PermissionType,
        "subAccountId" => SortField::SubAccountId,
        _ => return Err(sort_error(raw)),
    };
    Ok((field, descending))
}

fn sort_error(raw: &str) -> ApiError {
    ApiError::bad_request(format!(
        "sort {raw:?} is not supported; use [-]id, name, createdAt, permissionType or subAccountId"
    ))
}

fn compare(field: SortField, a: &ApiKey, b: &ApiKey) -> Ordering {
    let primary = match field {
        SortField::Id => a.id.cmp(&b.id),
        SortField::Name => a.name.to_lowercase().cmp(&b.name.to_lowercase()),
        SortField::CreatedAt => a.created_at.cmp(&b.created_at),
        SortField::PermissionType => a.permission_type.cmp(&b.permission_type),
        SortField::SubAccountId => a.sub_account_id.cmp(&b.sub_account_id),
    };
    primary.then(a.id.cmp(&b.id))
}

async fn create(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<(StatusCode, Json<ApiKeyDetail>)> {
    let request: CreateBody = read_json(&headers, body).await?;
    let name = request
        .name
        .as_deref()
        .map(|n| validate::name("name", n))
        .transpose()?;
    let allowed_ip = validate::ip_list("allowedIp", request.allowed_ip.as_deref().unwrap_or(""))?;
    let mut store = shared.store();
    let key = insert_key(
        &mut store,
        NewKey {
            name,
            allowed_ip,
            permission_ids: request.permission_ids.unwrap_or_default(),
            permission_type: None,
            sub_account_id: caller.scope.owner_id(),
        },
    )?;
    Ok((StatusCode::CREATED, Json(detail(&store, &key))))
}

fn visible_key(store: &Store, caller: Caller, id: i64) -> ApiResult<&ApiKey> {
    store
        .api_key(id)
        .filter(|k| caller.scope.sees(k.sub_account_id))
        .ok_or_else(|| ApiError::not_found("API key", id))
}

async fn read(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    PathId(id): PathId,
) -> ApiResult<Json<ApiKeyDetail>> {
    let store = shared.store();
    let key = visible_key(&store, caller, id)?;
    Ok(Json(detail(&store, key)))
}

async fn update(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    PathId(id): PathId,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<ApiKeyDetail>> {
    let request: UpdateBody = read_json(&headers, body).await?;
    let name = request
        .name
        .as_deref()
        .map(|n| validate::name("name", n))
        .transpose()?;
    let allowed_ip = request
        .allowed_ip
        .as_deref()
        .map(|ip| validate::ip_list("allowedIp", ip))
        .transpose()?;
    let permission_type = request
        .permission_type
        .as_deref()
        .map(|t| validate::word("permissionType", t))
        .transpose()?;
    if let Some(ids) = &request.permission_ids {
        check_permission_ids(ids)?;
    }

    let mut store = shared.store();
    visible_key(&store, caller, id)?;
    let Some(key) = store.state.api_keys.iter_mut().find(|k| k.id == id) else {
        return Err(ApiError::not_found("API key", id));
    };
    if let Some(name) = name {
        key.name = name;
    }
    if let Some(allowed_ip) = allowed_ip {
        key.allowed_ip = allowed_ip;
    }
    if let Some(ids) = request.permission_ids {
        key.permission_ids = ids;
    }
    if let Some(permission_type) = permission_type {
        key.permission_type = permission_type;
    }
    key.updated_at = now_ms();
    let key = key.clone();
    Ok(Json(detail(&store, &key)))
}

async fn remove(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    PathId(id): PathId,
) -> ApiResult<Json<bool>> {
    let mut store = shared.store();
    visible_key(&store, caller, id)?;
    store.state.api_keys.retain(|k| k.id != id);
    Ok(Json(true))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Accepted sort forms and rejections.
    #[test]
    fn sort_table() {
        assert_eq!(parse_sort("name").unwrap(), (SortField::Name, false));
        assert_eq!(
            parse_sort("-createdAt").unwrap(),
            (SortField::CreatedAt, true)
        );
        assert_eq!(parse_sort("id:desc").unwrap(), (SortField::Id, true));
        assert_eq!(
            parse_sort("subAccountId:asc").unwrap(),
            (SortField::SubAccountId, false)
        );
        assert!(parse_sort("color").is_err());
        assert!(parse_sort("name:sideways").is_err());
    }

    /// Unknown permission ids are rejected; the default type follows the ids.
    #[test]
    fn permissions_and_default_type() {
        assert!(check_permission_ids(&[1, 6]).is_ok());
        assert!(check_permission_ids(&[7]).is_err());
        let mut store = Store::new(&[], 1);
        let new = |ids: Vec<i64>| NewKey {
            name: None,
            allowed_ip: String::new(),
            permission_ids: ids,
            permission_type: None,
            sub_account_id: 0,
        };
        let full = insert_key(&mut store, new(vec![])).unwrap();
        assert_eq!(
            (full.permission_type.as_str(), full.name.as_str()),
            ("full", "key-1")
        );
        let custom = insert_key(&mut store, new(vec![1])).unwrap();
        assert_eq!(custom.permission_type, "custom");
        assert!(insert_key(&mut store, new(vec![99])).is_err());
        assert_eq!(store.state.api_keys.len(), 2);
    }
}
