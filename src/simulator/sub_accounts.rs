//! Sub account endpoints (the interface document, section "Sub accounts"):
//! `GET/POST /sub-account`, `GET/PUT /sub-account/{id}`. There is no DELETE (a DELETE is
//! answered 405 `METHOD_NOT_ALLOWED`).
//!
//! Decisions where the interface is silent:
//! - Names are unique, compared case-insensitively: a duplicate on create or update is a 400
//!   `DUPLICATE`. A create without `name` is named `sub-account-<id>`.
//! - `status` is free text, default `active`; it has no effect on behaviour.
//! - `ipPoolId` must be >= 0, default 0; `ipPoolName` is `default` for 0, else `pool-<id>`.
//! - `createApiKey: true` creates the sub account's first key: name `apiKeyName` (default
//!   `<sub account name>-key`), `permissionIds`, `permissionType` (default as on
//!   `POST /api-key`), `allowedIp` = `allowedIps`. It is listed in the detail's `apiKeys`.
//! - A sub account's key sees only its own sub account and cannot create sub accounts (401).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use super::api_keys::{ApiKeyListItem, NewKey, check_permission_ids, insert_key, list_item};
use super::auth::Caller;
use super::body::read_json;
use super::errors::{ApiError, ApiResult};
use super::paging::{PathId, QueryParams};
use super::server::Shared;
use super::state::{COMPANY_ID, Scope, Store, SubAccount, now_ms};
use super::validate;

pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/sub-account", get(list).post(create))
        .route("/sub-account/{id}", get(read).put(update))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SubAccountListItem {
    id: i64,
    name: String,
    status: String,
    created_at: i64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SubAccountList {
    count: usize,
    sub_accounts: Vec<SubAccountListItem>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SubAccountDetail {
    id: i64,
    company_id: i64,
    sub_account_name: String,
    status: String,
    created_at: i64,
    ip_pool_id: i64,
    ip_pool_name: String,
    api_keys: Vec<ApiKeyListItem>,
    domains: Vec<DomainRef>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DomainRef {
    id: i64,
    domain: String,
    created_at: i64,
    updated_at: i64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateBody {
    name: Option<String>,
    status: Option<String>,
    ip_pool_id: Option<i64>,
    allowed_ips: Option<String>,
    create_api_key: Option<bool>,
    api_key_name: Option<String>,
    permission_ids: Option<Vec<i64>>,
    permission_type: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UpdateBody {
    ip_pool_id: Option<i64>,
    name: Option<String>,
    status: Option<String>,
}

fn detail(store: &Store, sub: &SubAccount) -> SubAccountDetail {
    SubAccountDetail {
        id: sub.id,
        company_id: COMPANY_ID,
        sub_account_name: sub.name.clone(),
        status: sub.status.clone(),
        created_at: sub.created_at,
        ip_pool_id: sub.ip_pool_id,
        ip_pool_name: sub.ip_pool_name(),
        api_keys: store
            .state
            .api_keys
            .iter()
            .filter(|k| k.sub_account_id == sub.id)
            .map(|k| list_item(store, k))
            .collect(),
        domains: store
            .state
            .sending_domains
            .iter()
            .filter(|d| d.sub_account_id == sub.id)
            .map(|d| DomainRef {
                id: d.id,
                domain: d.domain.clone(),
                created_at: d.created_at,
                updated_at: d.updated_at,
            })
            .collect(),
    }
}

fn ip_pool(value: Option<i64>) -> ApiResult<Option<i64>> {
    match value {
        Some(id) if id < 0 => Err(ApiError::bad_request("ipPoolId must not be negative")),
        other => Ok(other),
    }
}

fn name_taken(store: &Store, name: &str, except: Option<i64>) -> bool {
    store
        .state
        .sub_accounts
        .iter()
        .any(|s| Some(s.id) != except && s.name.eq_ignore_ascii_case(name))
}

async fn list(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<SubAccountList>> {
    let query = QueryParams::parse(raw.as_deref());
    let page = query.page()?;
    let search = query.filter("search").map(str::to_lowercase);
    let status = query.filter("status");
    let has_api_key = query.boolean("hasApiKey")?;

    let store = shared.store();
    let matching: Vec<&SubAccount> = store
        .state
        .sub_accounts
        .iter()
        .filter(|s| match caller.scope {
            Scope::Company => true,
            Scope::SubAccount(id) => s.id == id,
        })
        .filter(|s| {
            search
                .as_ref()
                .is_none_or(|q| s.name.to_lowercase().contains(q))
        })
        .filter(|s| status.is_none_or(|q| s.status.eq_ignore_ascii_case(q)))
        .filter(|s| {
            has_api_key.is_none_or(|want| {
                store
                    .state
                    .api_keys
                    .iter()
                    .any(|k| k.sub_account_id == s.id)
                    == want
            })
        })
        .collect();
    let count = matching.len();
    let sub_accounts = page
        .slice(&matching)
        .into_iter()
        .map(|s| SubAccountListItem {
            id: s.id,
            name: s.name.clone(),
            status: s.status.clone(),
            created_at: s.created_at,
        })
        .collect();
    Ok(Json(SubAccountList {
        count,
        sub_accounts,
    }))
}

async fn create(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<SubAccountDetail>> {
    if caller.scope != Scope::Company {
        return Err(ApiError::unauthorized(
            "a sub account's API key cannot create sub accounts",
        ));
    }
    let request: CreateBody = read_json(&headers, body).await?;
    let name = request
        .name
        .as_deref()
        .map(|n| validate::name("name", n))
        .transpose()?;
    let status = request
        .status
        .as_deref()
        .map(|s| validate::word("status", s))
        .transpose()?
        .unwrap_or_else(|| "active".to_string());
    let ip_pool_id = ip_pool(request.ip_pool_id)?.unwrap_or(0);
    let allowed_ips =
        validate::ip_list("allowedIps", request.allowed_ips.as_deref().unwrap_or(""))?;
    let create_key = request.create_api_key.unwrap_or(false);
    let key_name = request
        .api_key_name
        .as_deref()
        .filter(|_| create_key)
        .map(|n| validate::name("apiKeyName", n))
        .transpose()?;
    let permission_type = request
        .permission_type
        .as_deref()
        .filter(|_| create_key)
        .map(|t| validate::word("permissionType", t))
        .transpose()?;
    let permission_ids = request.permission_ids.unwrap_or_default();
    if create_key {
        check_permission_ids(&permission_ids)?;
    }

    let mut store = shared.store();
    if let Some(name) = &name
        && name_taken(&store, name, None)
    {
        return Err(ApiError::duplicate(format!(
            "a sub account named {name:?} already exists"
        )));
    }
    let id = store.take_sub_account_id();
    let name = name.unwrap_or_else(|| format!("sub-account-{id}"));
    let now = now_ms();
    let sub = SubAccount {
        id,
        name,
        status,
        ip_pool_id,
        allowed_ips: allowed_ips.clone(),
        created_at: now,
        updated_at: now,
    };
    store.state.sub_accounts.push(sub.clone());
    if create_key {
        insert_key(
            &mut store,
            NewKey {
                name: Some(key_name.unwrap_or_else(|| format!("{}-key", sub.name))),
                allowed_ip: allowed_ips,
                permission_ids,
                permission_type,
                sub_account_id: id,
            },
        )?;
    }
    Ok(Json(detail(&store, &sub)))
}

fn visible(store: &Store, caller: Caller, id: i64) -> ApiResult<SubAccount> {
    store
        .sub_account(id)
        .filter(|s| match caller.scope {
            Scope::Company => true,
            Scope::SubAccount(own) => own == s.id,
        })
        .cloned()
        .ok_or_else(|| ApiError::not_found("sub account", id))
}

async fn read(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    PathId(id): PathId,
) -> ApiResult<Json<SubAccountDetail>> {
    let store = shared.store();
    let sub = visible(&store, caller, id)?;
    Ok(Json(detail(&store, &sub)))
}

async fn update(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    PathId(id): PathId,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<SubAccountDetail>> {
    let request: UpdateBody = read_json(&headers, body).await?;
    let name = request
        .name
        .as_deref()
        .map(|n| validate::name("name", n))
        .transpose()?;
    let status = request
        .status
        .as_deref()
        .map(|s| validate::word("status", s))
        .transpose()?;
    let ip_pool_id = ip_pool(request.ip_pool_id)?;

    let mut store = shared.store();
    visible(&store, caller, id)?;
    if let Some(name) = &name
        && name_taken(&store, name, Some(id))
    {
        return Err(ApiError::duplicate(format!(
            "a sub account named {name:?} already exists"
        )));
    }
    let Some(sub) = store.state.sub_accounts.iter_mut().find(|s| s.id == id) else {
        return Err(ApiError::not_found("sub account", id));
    };
    if let Some(name) = name {
        sub.name = name;
    }
    if let Some(status) = status {
        sub.status = status;
    }
    if let Some(pool) = ip_pool_id {
        sub.ip_pool_id = pool;
    }
    sub.updated_at = now_ms();
    let sub = sub.clone();
    Ok(Json(detail(&store, &sub)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulator::state::ip_pool_name;

    /// Pool ids must not be negative; the name derives from the id.
    #[test]
    fn pools() {
        assert!(ip_pool(Some(-1)).is_err());
        assert_eq!(ip_pool(Some(3)).unwrap(), Some(3));
        assert_eq!(ip_pool_name(3), "pool-3");
    }
}
