//! Sending domain endpoints (the interface document, section "Sending domains").
//!
//! Decisions where the interface is silent:
//! - `domain` is required and must be a DNS host name with at least two labels; it is stored
//!   lower-cased. An existing domain (anywhere in the company) is a 400 `DUPLICATE`.
//! - Defaults: `assignment` `company`, `types` `["sending"]`, `default` false, `status`
//!   `["pending"]` (list item: `"pending"`) until verified, then `["verified"]`.
//! - DNS records: SPF TXT at the domain with [`SPF_VALUE`]; DKIM TXT at
//!   `mt1._domainkey.<domain>` with `v=DKIM1; k=ed25519; p=<public key>` of a real Ed25519
//!   key pair; tracking CNAME `track.<domain>` -> [`CNAME_VALUE`]. The tracking domain id is
//!   the domain id.
//! - `PUT /domain/sending/{id}/verify-txt` checks that one domain: it counts a call and, once
//!   the calls reach the configured `verify_after_calls`, sets all three flags (they then stay
//!   true). It answers an array holding that domain's detail.
//! - `PUT .../share` sets `assignment` to `shared`; shared domains are visible to every sub
//!   account.
//! - A domain belongs to the sub account of the key that created it (company key: 0). A sub
//!   account's key sees its own and shared domains and changes only its own.
//! - `DELETE` answers the JSON string `"deleted"`.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, put};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use super::auth::Caller;
use super::body::{read_ignored, read_json};
use super::dkim;
use super::errors::{self, ApiError, ApiResult};
use super::paging::{PathId, QueryParams};
use super::server::Shared;
use super::state::{COMPANY_ID, SendingDomain, Store, now_ms};
use super::validate;

/// The SPF TXT value every domain should publish.
pub const SPF_VALUE: &str = "v=spf1 include:_spf.mailtarget.co ~all";
/// The DKIM selector of every domain.
pub const DKIM_SELECTOR: &str = "mt1";
/// The target of the tracking CNAME.
pub const CNAME_VALUE: &str = "tracking.mailtarget.co";
/// Longest accepted `note`, in characters.
const MAX_NOTE_CHARS: usize = 1000;

pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/domain/sending", get(list).post(create))
        .route("/domain/sending/unverified-spf", get(unverified_spf))
        .route("/domain/sending/{id}", get(read).delete(remove))
        .route("/domain/sending/{id}/share", put(share))
        .route("/domain/sending/{id}/spf-suggestion", get(spf_suggestion))
        .route("/domain/sending/{id}/verify-txt", put(verify_txt))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DomainListItem {
    id: i64,
    domain: String,
    assignment: String,
    company_id: i64,
    created_at: i64,
    default: bool,
    status: &'static str,
    #[serde(rename = "subAccountID")]
    sub_account_id: i64,
    sub_account_name: String,
    types: Vec<&'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DomainListPage {
    count: usize,
    sending_domain: Vec<DomainListItem>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DomainDetail {
    id: i64,
    domain: String,
    assignment: String,
    created_at: i64,
    status: Vec<&'static str>,
    types: Vec<&'static str>,
    sub_account_id: i64,
    sub_account_name: String,
    tracking_domain_id: i64,
    tracking_domain_name: String,
    spf_hostname: String,
    spf_value: &'static str,
    spf_verified: bool,
    dkim_selector: String,
    dkim_hostname: String,
    dkim_value: String,
    dkim_public_key: String,
    dkim_private_key: String,
    dkim_verified: bool,
    cname_hostname: String,
    cname_value: &'static str,
    cname_verified: bool,
}

#[derive(Serialize)]
struct UnverifiedSpfEntry {
    id: i64,
    name: String,
}

#[derive(Serialize)]
struct UnverifiedSpfList {
    count: usize,
    data: Vec<UnverifiedSpfEntry>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SpfSuggestion {
    note: String,
    spf_records: Vec<&'static str>,
    suggestion: &'static str,
}

#[derive(Deserialize)]
struct CreateBody {
    domain: Option<String>,
    assignment: Option<String>,
    note: Option<String>,
}

fn status_word(domain: &SendingDomain) -> &'static str {
    if domain.verified {
        "verified"
    } else {
        "pending"
    }
}

fn tracking_host(domain: &SendingDomain) -> String {
    format!("track.{}", domain.domain)
}

fn list_item(store: &Store, domain: &SendingDomain) -> DomainListItem {
    DomainListItem {
        id: domain.id,
        domain: domain.domain.clone(),
        assignment: domain.assignment.clone(),
        company_id: COMPANY_ID,
        created_at: domain.created_at,
        default: false,
        status: status_word(domain),
        sub_account_id: domain.sub_account_id,
        sub_account_name: store.sub_account_name(domain.sub_account_id),
        types: vec!["sending"],
    }
}

fn detail(store: &Store, domain: &SendingDomain) -> DomainDetail {
    DomainDetail {
        id: domain.id,
        domain: domain.domain.clone(),
        assignment: domain.assignment.clone(),
        created_at: domain.created_at,
        status: vec![status_word(domain)],
        types: vec!["sending"],
        sub_account_id: domain.sub_account_id,
        sub_account_name: store.sub_account_name(domain.sub_account_id),
        tracking_domain_id: domain.tracking_domain_id,
        tracking_domain_name: tracking_host(domain),
        spf_hostname: domain.domain.clone(),
        spf_value: SPF_VALUE,
        spf_verified: domain.verified,
        dkim_selector: domain.dkim_selector.clone(),
        dkim_hostname: format!("{}._domainkey.{}", domain.dkim_selector, domain.domain),
        dkim_value: dkim::txt_value(&domain.dkim_public_key),
        dkim_public_key: domain.dkim_public_key.clone(),
        dkim_private_key: domain.dkim_private_key.clone(),
        dkim_verified: domain.verified,
        cname_hostname: tracking_host(domain),
        cname_value: CNAME_VALUE,
        cname_verified: domain.verified,
    }
}

/// Readable by the caller: own domains, and shared ones.
fn readable(caller: Caller, domain: &SendingDomain) -> bool {
    caller.scope.sees(domain.sub_account_id) || domain.assignment == "shared"
}

fn find_readable(store: &Store, caller: Caller, id: i64) -> ApiResult<&SendingDomain> {
    store
        .domain(id)
        .filter(|d| readable(caller, d))
        .ok_or_else(|| ApiError::not_found("sending domain", id))
}

fn find_owned(store: &mut Store, caller: Caller, id: i64) -> ApiResult<&mut SendingDomain> {
    store
        .state
        .sending_domains
        .iter_mut()
        .find(|d| d.id == id && caller.scope.sees(d.sub_account_id))
        .ok_or_else(|| ApiError::not_found("sending domain", id))
}

async fn list(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<Vec<DomainListPage>>> {
    let query = QueryParams::parse(raw.as_deref());
    let page = query.page()?;
    let search = query.filter("search").map(str::to_lowercase);
    let status = query.filter("status");

    let store = shared.store();
    let matching: Vec<&SendingDomain> = store
        .state
        .sending_domains
        .iter()
        .filter(|d| readable(caller, d))
        .filter(|d| {
            search
                .as_ref()
                .is_none_or(|q| d.domain.contains(q.as_str()))
        })
        .filter(|d| status.is_none_or(|q| status_word(d).eq_ignore_ascii_case(q)))
        .collect();
    let count = matching.len();
    let sending_domain = page
        .slice(&matching)
        .into_iter()
        .map(|d| list_item(&store, d))
        .collect();
    Ok(Json(vec![DomainListPage {
        count,
        sending_domain,
    }]))
}

async fn create(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<(StatusCode, Json<DomainDetail>)> {
    let request: CreateBody = read_json(&headers, body).await?;
    let domain = request
        .domain
        .as_deref()
        .ok_or_else(|| ApiError::bad_request("domain is required"))
        .and_then(validate::domain)?;
    let assignment = request
        .assignment
        .as_deref()
        .map(|a| validate::word("assignment", a))
        .transpose()?
        .unwrap_or_else(|| "company".to_string());
    let note = request.note.unwrap_or_default();
    if note.chars().count() > MAX_NOTE_CHARS {
        return Err(ApiError::bad_request(format!(
            "note must be at most {MAX_NOTE_CHARS} characters"
        )));
    }
    let keys = dkim::generate().map_err(|_| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            errors::INTERNAL_ERROR,
            "could not generate a DKIM key pair",
        )
    })?;

    let mut store = shared.store();
    if store
        .state
        .sending_domains
        .iter()
        .any(|d| d.domain == domain)
    {
        return Err(ApiError::duplicate(format!(
            "sending domain {domain} already exists"
        )));
    }
    let id = store.take_domain_id();
    let now = now_ms();
    let created = SendingDomain {
        id,
        domain,
        assignment,
        note,
        sub_account_id: caller.scope.owner_id(),
        created_at: now,
        updated_at: now,
        verify_calls: 0,
        verified: store.verify_after_calls == 0,
        dkim_selector: DKIM_SELECTOR.to_string(),
        dkim_public_key: keys.public_key,
        dkim_private_key: keys.private_key_pem,
        tracking_domain_id: id,
    };
    store.state.sending_domains.push(created.clone());
    Ok((StatusCode::CREATED, Json(detail(&store, &created))))
}

async fn unverified_spf(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
) -> ApiResult<Json<UnverifiedSpfList>> {
    let store = shared.store();
    let data: Vec<UnverifiedSpfEntry> = store
        .state
        .sending_domains
        .iter()
        .filter(|d| readable(caller, d) && !d.verified)
        .map(|d| UnverifiedSpfEntry {
            id: d.id,
            name: d.domain.clone(),
        })
        .collect();
    Ok(Json(UnverifiedSpfList {
        count: data.len(),
        data,
    }))
}

async fn read(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    PathId(id): PathId,
) -> ApiResult<Json<DomainDetail>> {
    let store = shared.store();
    let domain = find_readable(&store, caller, id)?;
    Ok(Json(detail(&store, domain)))
}

async fn remove(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    PathId(id): PathId,
) -> ApiResult<Json<&'static str>> {
    let mut store = shared.store();
    find_owned(&mut store, caller, id)?;
    store.state.sending_domains.retain(|d| d.id != id);
    Ok(Json("deleted"))
}

async fn share(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    PathId(id): PathId,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<DomainDetail>> {
    read_ignored(&headers, body).await?;
    let mut store = shared.store();
    let domain = find_owned(&mut store, caller, id)?;
    domain.assignment = "shared".to_string();
    domain.updated_at = now_ms();
    let domain = domain.clone();
    Ok(Json(detail(&store, &domain)))
}

async fn spf_suggestion(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    PathId(id): PathId,
) -> ApiResult<Json<SpfSuggestion>> {
    let store = shared.store();
    let domain = find_readable(&store, caller, id)?;
    Ok(Json(suggestion_for(domain)))
}

fn suggestion_for(domain: &SendingDomain) -> SpfSuggestion {
    if domain.verified {
        SpfSuggestion {
            note: format!(
                "The SPF record of {} already includes _spf.mailtarget.co.",
                domain.domain
            ),
            spf_records: vec![SPF_VALUE],
            suggestion: SPF_VALUE,
        }
    } else {
        SpfSuggestion {
            note: format!(
                "No SPF record including _spf.mailtarget.co was found for {}; publish the suggested TXT record.",
                domain.domain
            ),
            spf_records: Vec::new(),
            suggestion: SPF_VALUE,
        }
    }
}

async fn verify_txt(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    PathId(id): PathId,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<Vec<DomainDetail>>> {
    read_ignored(&headers, body).await?;
    let mut store = shared.store();
    let threshold = store.verify_after_calls;
    let domain = find_owned(&mut store, caller, id)?;
    domain.verify_calls = domain.verify_calls.saturating_add(1);
    if domain.verify_calls >= threshold && !domain.verified {
        domain.verified = true;
        domain.updated_at = now_ms();
    }
    let domain = domain.clone();
    Ok(Json(vec![detail(&store, &domain)]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(verified: bool) -> SendingDomain {
        SendingDomain {
            id: 4,
            domain: "example.com".into(),
            assignment: "company".into(),
            note: String::new(),
            sub_account_id: 0,
            created_at: 1,
            updated_at: 1,
            verify_calls: 0,
            verified,
            dkim_selector: DKIM_SELECTOR.into(),
            dkim_public_key: "PUB".into(),
            dkim_private_key: "PRIV".into(),
            tracking_domain_id: 4,
        }
    }

    /// The detail derives every DNS record from the domain and key.
    #[test]
    fn detail_records() {
        let store = Store::new(&[], 1);
        let json = serde_json::to_value(detail(&store, &sample(false))).unwrap();
        assert_eq!(json["dkimHostname"], "mt1._domainkey.example.com");
        assert_eq!(json["dkimValue"], "v=DKIM1; k=ed25519; p=PUB");
        assert_eq!(json["cnameHostname"], "track.example.com");
        assert_eq!(json["spfHostname"], "example.com");
        assert_eq!(json["status"], serde_json::json!(["pending"]));
        let item = serde_json::to_value(list_item(&store, &sample(true))).unwrap();
        assert_eq!(item["status"], "verified");
        assert!(item.get("subAccountID").is_some());
        assert!(item.get("subAccountId").is_none());
    }

    /// The suggestion always names the SPF value; found records only once verified.
    #[test]
    fn suggestions() {
        assert!(suggestion_for(&sample(false)).spf_records.is_empty());
        assert_eq!(suggestion_for(&sample(true)).spf_records, vec![SPF_VALUE]);
    }
}
