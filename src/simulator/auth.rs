//! Authentication: `Authorization: Bearer <key>` (the interface document, section
//! "Authentication").
//!
//! - The company key of the configuration always authenticates, as the company.
//! - Every API key that exists authenticates; a deleted key does not (401).
//! - A key with a non-empty `allowedIp` authenticates only from a peer address in that comma
//!   separated list (401 otherwise).
//! - A key created by the company (`subAccountId` 0) acts as the company; a key of a sub
//!   account acts within that sub account.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;

use super::errors::{ApiError, ApiResult};
use super::server::Shared;
use super::state::{COMPANY_SUB_ACCOUNT_ID, Scope};

/// The authenticated caller of an interface endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Caller {
    pub scope: Scope,
}

impl FromRequestParts<Arc<Shared>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, shared: &Arc<Shared>) -> ApiResult<Self> {
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|info| info.0.ip());
        let token = bearer_token(&parts.headers)?;
        authenticate(shared, token, peer).map(|scope| Caller { scope })
    }
}

/// The token of an `Authorization: Bearer <token>` header.
pub(crate) fn bearer_token(headers: &HeaderMap) -> ApiResult<&str> {
    let value = headers
        .get(AUTHORIZATION)
        .ok_or_else(|| ApiError::unauthorized("missing Authorization header"))?
        .to_str()
        .map_err(|_| ApiError::unauthorized("the Authorization header is not valid text"))?;
    let (scheme, token) = value
        .trim()
        .split_once(' ')
        .ok_or_else(|| ApiError::unauthorized("the Authorization header must be 'Bearer <key>'"))?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(ApiError::unauthorized(
            "the Authorization header must be 'Bearer <key>'",
        ));
    }
    Ok(token)
}

fn authenticate(shared: &Shared, token: &str, peer: Option<IpAddr>) -> ApiResult<Scope> {
    if token == shared.api_key {
        return Ok(Scope::Company);
    }
    let store = shared.store();
    let key = store
        .state
        .api_keys
        .iter()
        .find(|k| k.key == token)
        .ok_or_else(|| ApiError::unauthorized("unknown or deleted API key"))?;
    if !ip_allowed(&key.allowed_ip, peer) {
        return Err(ApiError::unauthorized(
            "this API key is not allowed from your address",
        ));
    }
    Ok(if key.sub_account_id == COMPANY_SUB_ACCOUNT_ID {
        Scope::Company
    } else {
        Scope::SubAccount(key.sub_account_id)
    })
}

/// Whether `peer` may use a key whose `allowedIp` is `allowed` (empty: anyone). IPv4-mapped
/// IPv6 peers compare as IPv4.
pub(crate) fn ip_allowed(allowed: &str, peer: Option<IpAddr>) -> bool {
    let entries: Vec<&str> = allowed
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    if entries.is_empty() {
        return true;
    }
    let Some(peer) = peer.map(|ip| ip.to_canonical()) else {
        return false;
    };
    entries
        .iter()
        .filter_map(|e| e.parse::<IpAddr>().ok())
        .any(|ip| ip.to_canonical() == peer)
}

/// Checks the bearer key of a `/_simulator/*` request against the admin key.
pub(crate) fn check_admin(shared: &Shared, headers: &HeaderMap) -> ApiResult<()> {
    let token = bearer_token(headers)?;
    if token == shared.admin_key {
        Ok(())
    } else {
        Err(ApiError::unauthorized(
            "the control endpoints need the admin key",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        headers
    }

    /// Only well-formed Bearer headers yield a token.
    #[test]
    fn bearer_parsing() {
        assert_eq!(bearer_token(&headers("Bearer abc")).unwrap(), "abc");
        assert_eq!(bearer_token(&headers("bearer  abc ")).unwrap(), "abc");
        assert!(bearer_token(&headers("Basic abc")).is_err());
        assert!(bearer_token(&headers("Bearer ")).is_err());
        assert!(bearer_token(&headers("abc")).is_err());
        assert!(bearer_token(&HeaderMap::new()).is_err());
    }

    /// allowedIp is a comma separated list; empty allows everyone.
    #[test]
    fn allowed_ip_table() {
        let v4: IpAddr = "10.0.0.1".parse().unwrap();
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert!(ip_allowed("", Some(v4)));
        assert!(ip_allowed(" ", None));
        assert!(ip_allowed("127.0.0.1, 10.0.0.1", Some(v4)));
        assert!(ip_allowed("10.0.0.1", Some(mapped)));
        assert!(!ip_allowed("10.0.0.2", Some(v4)));
        assert!(!ip_allowed("10.0.0.1", None));
    }
}
