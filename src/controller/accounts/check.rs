//! One check of an account: read its key from the Secret, build (or keep) its client, make one
//! authenticated read, and learn the key's scope. Nothing is written to the service.
//!
//! Reading the scope: with `spec.scope` declared, the read is one page of one key
//! (`GET /api-key?page=1&size=1`), and so it is while an earlier check's answer from the key list
//! holds (see [`super::memo`]). Otherwise the whole key list is read (pages of 100) and the
//! key's own entry found by its value (the list items carry `key`, interface document "API key
//! (list item)"): `subAccountId` 0 is a company key, any other a key of that sub account. A key
//! missing from its own list is a company key when the list shows company keys or keys of
//! several sub accounts (a sub account key sees only its own sub account's keys: product design,
//! decision "Scope of a key"); otherwise the scope stays unknown and the status asks for
//! `spec.scope`.

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use secrecy::{ExposeSecret, SecretString};

use crate::api::{ApiError, Client as ApiClient, ClientConfig, ListApiKeysQuery};
use crate::controller::status::Outcome;
use crate::crd::{AccountConnection, KeyScope, ScopeSource};

/// Reads the key `connection` names from Secret `namespace/<name>`: the key, and the Secret's
/// `resourceVersion`.
///
/// Returns `Ok(Err(outcome))` for a Secret or key that is missing, empty, not UTF-8 or not
/// usable in an HTTP header (`CredentialsNotFound`, `CredentialsInvalid`); messages name the
/// Secret and the key, never the value.
///
/// Errors: the Kubernetes API's error (retried by the controller).
pub(super) async fn read_key(
    kube: &kube::Client,
    namespace: &str,
    connection: &AccountConnection,
) -> Result<Result<(SecretString, String), Outcome>, kube::Error> {
    let reference = &connection.credentials.secret_ref;
    let secrets: Api<Secret> = Api::namespaced(kube.clone(), namespace);
    let shown = format!("Secret \"{namespace}/{}\"", reference.name);
    let Some(secret) = secrets.get_opt(&reference.name).await? else {
        return Ok(Err(Outcome::stalled(
            "CredentialsNotFound",
            format!(
                "{shown} not found: create it with the API key under the key \"{}\"",
                reference.key
            ),
        )));
    };
    let Some(bytes) = secret.data.as_ref().and_then(|d| d.get(&reference.key)) else {
        return Ok(Err(Outcome::stalled(
            "CredentialsNotFound",
            format!(
                "{shown} has no key \"{}\": put the API key under it or set spec.credentials.secretRef.key",
                reference.key
            ),
        )));
    };
    let Ok(text) = std::str::from_utf8(&bytes.0) else {
        return Ok(Err(Outcome::stalled(
            "CredentialsInvalid",
            format!("{shown} key \"{}\" is not UTF-8 text", reference.key),
        )));
    };
    let key = text.trim();
    if key.is_empty() {
        return Ok(Err(Outcome::stalled(
            "CredentialsInvalid",
            format!("{shown} key \"{}\" is empty", reference.key),
        )));
    }
    if reqwest::header::HeaderValue::from_str(&format!("Bearer {key}")).is_err() {
        return Ok(Err(Outcome::stalled(
            "CredentialsInvalid",
            format!(
                "{shown} key \"{}\" holds characters not allowed in an HTTP header (a line break inside the key?)",
                reference.key
            ),
        )));
    }
    let version = secret.metadata.resource_version.clone().unwrap_or_default();
    Ok(Ok((SecretString::from(key.to_owned()), version)))
}

/// The digest of what a client is built from: key, addresses and budget. Kept in memory only.
pub(super) fn fingerprint(key: &SecretString, connection: &AccountConnection) -> [u8; 32] {
    let budget = &connection.request_budget;
    let mut input = Vec::new();
    for part in [
        key.expose_secret(),
        &connection.api_url,
        &connection.transmission_url,
        &budget.concurrency.to_string(),
        &format!("{:?}", budget.requests_per_second),
    ] {
        input.extend_from_slice(part.as_bytes());
        input.push(0);
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, &input);
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// A client for `connection` with `key`, other settings (timeout, CA bundle, retries) from
/// `template`, its calls reported by the template's observer under `account` (see
/// [`crate::api::RequestObserver::for_account`]).
///
/// Errors: an `InvalidSpec` outcome when an address is not a usable base URL.
pub(super) fn build_client(
    template: &ClientConfig,
    connection: &AccountConnection,
    key: SecretString,
    account: &str,
) -> Result<ApiClient, Outcome> {
    let invalid = |field: &str, e: &dyn std::fmt::Display| Outcome::Stalled {
        reason: "InvalidSpec",
        message: format!("spec.{field}: {e}"),
    };
    let mut config = template.clone();
    config.observer = template
        .observer
        .as_ref()
        .map(|o| o.for_account(account).unwrap_or_else(|| o.clone()));
    config.api_url = connection
        .api_url
        .parse()
        .map_err(|e| invalid("apiUrl", &e))?;
    config.transmission_url = connection
        .transmission_url
        .parse()
        .map_err(|e| invalid("transmissionUrl", &e))?;
    config.api_key = key;
    config.api_key_file = None;
    config.max_concurrency = connection.request_budget.concurrency.max(1) as usize;
    config.requests_per_second = connection
        .request_budget
        .requests_per_second
        .and_then(std::num::NonZeroU32::new);
    // Its error names the setting at fault (either address, or the key).
    ApiClient::new(config).map_err(|e| Outcome::Stalled {
        reason: "InvalidSpec",
        message: format!("spec: {e}"),
    })
}

/// What the authenticated read learnt about the key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Found {
    /// The scope, when declared or found.
    pub scope: Option<KeyScope>,
    /// How it was learnt.
    pub source: Option<ScopeSource>,
    /// The key's own id, when listed.
    pub key_id: Option<i64>,
    /// Its sub account, for a sub account key found in the list.
    pub sub_account: Option<(i64, String)>,
}

/// Makes the authenticated read with `client` and learns the scope of its key (see
/// the module documentation): `declared` when given, else `listed` (what the key list showed an
/// earlier check of this same key) when given, else from the key list.
///
/// Errors: the service's error for the read.
pub(super) async fn probe(
    client: &ApiClient,
    declared: Option<KeyScope>,
    listed: Option<&Found>,
) -> Result<Found, ApiError> {
    let one_key = || async {
        let one = ListApiKeysQuery {
            page: Some(1),
            size: Some(1),
            ..ListApiKeysQuery::default()
        };
        client.list_api_keys(&one).await.map(|_| ())
    };
    if let Some(scope) = declared {
        one_key().await?;
        return Ok(Found {
            scope: Some(scope),
            source: Some(ScopeSource::Declared),
            ..Found::default()
        });
    }
    if let Some(listed) = listed {
        one_key().await?;
        return Ok(listed.clone());
    }
    let keys = client
        .list_all_api_keys(&ListApiKeysQuery::default())
        .await?;
    if let Some(own) = client.own_entry(&keys) {
        let sub_account = (own.sub_account_id != crate::api::COMPANY_SUB_ACCOUNT_ID)
            .then(|| (own.sub_account_id, own.sub_account_name.clone()));
        return Ok(Found {
            scope: Some(if sub_account.is_some() {
                KeyScope::SubAccount
            } else {
                KeyScope::Company
            }),
            source: Some(ScopeSource::KeyList),
            key_id: Some(own.id),
            sub_account,
        });
    }
    let mut sub_accounts: Vec<i64> = keys.iter().map(|k| k.sub_account_id).collect();
    sub_accounts.sort_unstable();
    sub_accounts.dedup();
    let sees_company = sub_accounts.contains(&crate::api::COMPANY_SUB_ACCOUNT_ID);
    if sees_company || sub_accounts.len() > 1 {
        return Ok(Found {
            scope: Some(KeyScope::Company),
            source: Some(ScopeSource::KeyList),
            ..Found::default()
        });
    }
    Ok(Found::default())
}

/// The outcome of a successful read: `Ready`, with what the scope is and how it is known.
pub(super) fn ready(api_url: &str, found: &Found) -> Outcome {
    let scope = match (&found.scope, &found.source, &found.sub_account) {
        (Some(scope), Some(ScopeSource::Declared), _) => {
            format!("scope {scope:?} as declared in spec.scope")
        }
        (Some(KeyScope::SubAccount), _, Some((id, name))) => format!(
            "a key of sub account \"{}\" (id {id}), found in the key list",
            crate::text::printable(name, crate::text::MAX_VALUE_CHARS)
        ),
        (Some(KeyScope::Company), _, _) if found.key_id.is_some() => {
            "a company key, found in the key list".to_owned()
        }
        (Some(KeyScope::Company), _, _) => {
            "a company key: the key list shows keys outside any one sub account".to_owned()
        }
        _ => "scope unknown: the key is not in the key list the service showed; declare spec.scope"
            .to_owned(),
    };
    Outcome::ready(
        "Authenticated",
        format!("authenticated at {api_url}; {scope}"),
    )
}

/// The outcome of a failed read.
pub(super) fn failed(api_url: &str, shown_secret: &str, e: &ApiError) -> Outcome {
    if e.status() == Some(401) {
        Outcome::stalled(
            "Unauthorized",
            format!(
                "the service at {api_url} refused the API key in {shown_secret}: {e}; put a valid key there"
            ),
        )
    } else if e.is_retryable() {
        Outcome::progressing(
            "Unreachable",
            format!("cannot reach the service at {api_url}: {e}; retrying with backoff"),
        )
    } else {
        Outcome::stalled(
            "ApiRejected",
            format!(
                "the service at {api_url} answered the authenticated read with an error: {e}; check spec.apiUrl"
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{Credentials, RequestBudget, SecretKeyReference};

    fn connection() -> AccountConnection {
        AccountConnection {
            credentials: Credentials {
                secret_ref: SecretKeyReference {
                    name: "mt".into(),
                    key: "apiKey".into(),
                },
            },
            api_url: "http://127.0.0.1:9".into(),
            transmission_url: "http://127.0.0.1:9/v1".into(),
            request_budget: RequestBudget::default(),
            scope: None,
        }
    }

    /// The fingerprint changes with the key, an address or the budget, and only then.
    #[test]
    fn fingerprint_follows_what_builds_the_client() {
        let key = SecretString::from("k1");
        let c = connection();
        let base = fingerprint(&key, &c);
        assert_eq!(base, fingerprint(&SecretString::from("k1"), &c));
        assert_ne!(base, fingerprint(&SecretString::from("k2"), &c));
        let mut other = c.clone();
        other.api_url = "http://127.0.0.1:10".into();
        assert_ne!(base, fingerprint(&key, &other));
        let mut other = c.clone();
        other.request_budget.requests_per_second = Some(5);
        assert_ne!(base, fingerprint(&key, &other));
    }

    /// An address that is not a base URL is an invalid spec naming the field.
    #[test]
    fn bad_addresses_are_invalid_specs() {
        let template = ClientConfig::with_default_urls(SecretString::from("x"));
        let mut c = connection();
        c.transmission_url = "not a url".into();
        match build_client(&template, &c, SecretString::from("k"), "ClusterAccount/x") {
            Err(Outcome::Stalled { reason, message }) => {
                assert_eq!(reason, "InvalidSpec");
                assert!(message.starts_with("spec.transmissionUrl"), "{message}");
            }
            _ => panic!("an invalid URL was accepted"),
        }
        assert!(
            build_client(
                &template,
                &connection(),
                SecretString::from("k"),
                "ClusterAccount/x"
            )
            .is_ok()
        );
    }
}
