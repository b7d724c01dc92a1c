//! The simulator's own model of the service's objects, and the store that holds them.
//!
//! These types are deliberately independent of the crate's API client types: the simulator
//! is a separate check of the client. JSON views are built from them in the resource
//! modules.

use std::collections::HashSet;
use std::fmt;

use super::record::Transmission;

use rand::Rng;
use rand::distr::Alphanumeric;

/// `companyId` of the one simulated company.
pub const COMPANY_ID: i64 = 1;
/// `companyName` of the one simulated company.
pub const COMPANY_NAME: &str = "Simulated Company";
/// `subAccountId` of objects that belong to the company itself rather than a sub account.
pub const COMPANY_SUB_ACCOUNT_ID: i64 = 0;
/// Length of generated API key values (URL-safe alphanumeric characters).
pub const API_KEY_LENGTH: usize = 40;

/// A copy of every object the simulator holds, for assertions in tests.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SimulatorState {
    /// Sub accounts in creation order.
    pub sub_accounts: Vec<SubAccount>,
    /// API keys that exist (deleted keys are removed), in creation order. The company key of
    /// the configuration is not among them.
    pub api_keys: Vec<ApiKey>,
    /// Sending domains that exist, in creation order.
    pub sending_domains: Vec<SendingDomain>,
    /// Accepted transmissions with their recorded events, in creation order.
    pub transmissions: Vec<Transmission>,
}

/// A sub account (the interface document, section "Sub account").
#[derive(Clone, Debug, PartialEq)]
pub struct SubAccount {
    /// Integer id from a counter starting at 1.
    pub id: i64,
    /// Unique name (case-insensitive); `name` in list items, `subAccountName` in the detail.
    pub name: String,
    /// Free string; default `active`. Has no effect on behaviour in the simulator.
    pub status: String,
    /// IP pool id; 0 is the default pool.
    pub ip_pool_id: i64,
    /// `allowedIps` given at creation (comma separated), copied to the first key.
    pub allowed_ips: String,
    /// Unix milliseconds.
    pub created_at: i64,
    /// Unix milliseconds.
    pub updated_at: i64,
}

impl SubAccount {
    /// `ipPoolName`: `default` for pool 0, otherwise `pool-<id>`.
    pub fn ip_pool_name(&self) -> String {
        ip_pool_name(self.ip_pool_id)
    }
}

/// The derived IP pool name: `default` for 0, otherwise `pool-<id>`.
pub fn ip_pool_name(ip_pool_id: i64) -> String {
    if ip_pool_id == 0 {
        "default".to_string()
    } else {
        format!("pool-{ip_pool_id}")
    }
}

/// An API key (the interface document, section "API key"). `Debug` hides the key value.
#[derive(Clone, PartialEq)]
pub struct ApiKey {
    /// Integer id from a counter starting at 1.
    pub id: i64,
    /// The secret key value: 40 random URL-safe characters.
    pub key: String,
    /// `name`; duplicates are allowed.
    pub name: String,
    /// Comma separated IP addresses; empty means any address.
    pub allowed_ip: String,
    /// Free string; default `custom` when permission ids were given, else `full`.
    pub permission_type: String,
    /// Ids from the permission catalogue, as given.
    pub permission_ids: Vec<i64>,
    /// Owning sub account, or [`COMPANY_SUB_ACCOUNT_ID`] for company keys.
    pub sub_account_id: i64,
    /// Unix milliseconds.
    pub created_at: i64,
    /// Unix milliseconds of the last PUT.
    pub updated_at: i64,
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKey")
            .field("id", &self.id)
            .field("key", &"<redacted>")
            .field("name", &self.name)
            .field("allowed_ip", &self.allowed_ip)
            .field("permission_type", &self.permission_type)
            .field("permission_ids", &self.permission_ids)
            .field("sub_account_id", &self.sub_account_id)
            .field("created_at", &self.created_at)
            .finish()
    }
}

/// A sending domain (the interface document, section "Sending domain"). `Debug` hides the
/// DKIM private key.
#[derive(Clone, PartialEq)]
pub struct SendingDomain {
    /// Integer id from a counter starting at 1.
    pub id: i64,
    /// Lower-case host name.
    pub domain: String,
    /// Default `company`; `shared` after `PUT .../share`.
    pub assignment: String,
    /// `note` given at creation (not part of any response shape).
    pub note: String,
    /// Owning sub account, or [`COMPANY_SUB_ACCOUNT_ID`].
    pub sub_account_id: i64,
    /// Unix milliseconds.
    pub created_at: i64,
    /// Unix milliseconds of the last change (share, verification).
    pub updated_at: i64,
    /// Number of verify-txt calls that checked this domain.
    pub verify_calls: u32,
    /// True once `verify_calls` reached the configured threshold: all three flags true.
    pub verified: bool,
    /// DKIM selector, `mt1`.
    pub dkim_selector: String,
    /// Base64 of the raw 32-byte Ed25519 public key.
    pub dkim_public_key: String,
    /// PKCS#8 PEM of the Ed25519 private key. Secret.
    pub dkim_private_key: String,
    /// Id of the tracking domain (equal to the domain id).
    pub tracking_domain_id: i64,
}

impl fmt::Debug for SendingDomain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendingDomain")
            .field("id", &self.id)
            .field("domain", &self.domain)
            .field("assignment", &self.assignment)
            .field("sub_account_id", &self.sub_account_id)
            .field("verify_calls", &self.verify_calls)
            .field("verified", &self.verified)
            .field("dkim_selector", &self.dkim_selector)
            .field("dkim_public_key", &self.dkim_public_key)
            .field("dkim_private_key", &"<redacted>")
            .finish()
    }
}

/// Who is calling: the company or one sub account (decided by the key used).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    Company,
    SubAccount(i64),
}

impl Scope {
    /// The `subAccountId` new objects get.
    pub fn owner_id(self) -> i64 {
        match self {
            Scope::Company => COMPANY_SUB_ACCOUNT_ID,
            Scope::SubAccount(id) => id,
        }
    }

    /// Whether an object owned by `sub_account_id` is visible.
    pub fn sees(self, sub_account_id: i64) -> bool {
        match self {
            Scope::Company => true,
            Scope::SubAccount(id) => id == sub_account_id,
        }
    }
}

/// All objects plus id counters and the fixed behaviour settings.
pub(crate) struct Store {
    pub state: SimulatorState,
    next_sub_account_id: i64,
    next_api_key_id: i64,
    next_domain_id: i64,
    next_transmission: u64,
    /// Lower-cased suppression list.
    pub suppress: HashSet<String>,
    pub verify_after_calls: u32,
}

impl Store {
    pub fn new(suppress: &[String], verify_after_calls: u32) -> Self {
        Self {
            state: SimulatorState::default(),
            next_sub_account_id: 1,
            next_api_key_id: 1,
            next_domain_id: 1,
            next_transmission: 1,
            suppress: suppress.iter().map(|s| s.trim().to_lowercase()).collect(),
            verify_after_calls,
        }
    }

    pub fn take_sub_account_id(&mut self) -> i64 {
        take(&mut self.next_sub_account_id)
    }

    pub fn take_api_key_id(&mut self) -> i64 {
        take(&mut self.next_api_key_id)
    }

    pub fn take_domain_id(&mut self) -> i64 {
        take(&mut self.next_domain_id)
    }

    pub fn take_transmission_id(&mut self) -> String {
        let n = self.next_transmission;
        self.next_transmission += 1;
        format!("tx-{n}")
    }

    /// The name shown as `subAccountName`: empty for company objects.
    pub fn sub_account_name(&self, sub_account_id: i64) -> String {
        self.state
            .sub_accounts
            .iter()
            .find(|s| s.id == sub_account_id)
            .map(|s| s.name.clone())
            .unwrap_or_default()
    }

    pub fn sub_account(&self, id: i64) -> Option<&SubAccount> {
        self.state.sub_accounts.iter().find(|s| s.id == id)
    }

    pub fn api_key(&self, id: i64) -> Option<&ApiKey> {
        self.state.api_keys.iter().find(|k| k.id == id)
    }

    pub fn domain(&self, id: i64) -> Option<&SendingDomain> {
        self.state.sending_domains.iter().find(|d| d.id == id)
    }

    /// A fresh key value that no existing key has.
    pub fn new_key_value(&self) -> String {
        loop {
            let value: String = rand::rng()
                .sample_iter(&Alphanumeric)
                .take(API_KEY_LENGTH)
                .map(char::from)
                .collect();
            if !self.state.api_keys.iter().any(|k| k.key == value) {
                return value;
            }
        }
    }
}

fn take(counter: &mut i64) -> i64 {
    let id = *counter;
    *counter += 1;
    id
}

/// Current time in Unix milliseconds (the simulator's timestamp unit).
pub(crate) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ids of each kind count from 1 independently.
    #[test]
    fn counters_start_at_one_per_kind() {
        let mut store = Store::new(&[], 1);
        assert_eq!(store.take_api_key_id(), 1);
        assert_eq!(store.take_api_key_id(), 2);
        assert_eq!(store.take_sub_account_id(), 1);
        assert_eq!(store.take_domain_id(), 1);
        assert_eq!(store.take_transmission_id(), "tx-1");
    }

    /// Generated key values are 40 URL-safe characters.
    #[test]
    fn key_values_are_url_safe() {
        let store = Store::new(&[], 1);
        let value = store.new_key_value();
        assert_eq!(value.len(), API_KEY_LENGTH);
        assert!(value.chars().all(|c| c.is_ascii_alphanumeric()));
    }

    /// The pool name is derived from the id.
    #[test]
    fn pool_names() {
        assert_eq!(ip_pool_name(0), "default");
        assert_eq!(ip_pool_name(7), "pool-7");
    }

    /// A sub account key sees only its own objects; the company sees all.
    #[test]
    fn scope_visibility() {
        assert!(Scope::Company.sees(3));
        assert!(Scope::SubAccount(3).sees(3));
        assert!(!Scope::SubAccount(3).sees(0));
        assert_eq!(Scope::Company.owner_id(), 0);
    }

    /// Debug output hides key values and DKIM private keys.
    #[test]
    fn debug_hides_secrets() {
        let key = ApiKey {
            id: 1,
            key: "secret-value".into(),
            name: "n".into(),
            allowed_ip: String::new(),
            permission_type: "full".into(),
            permission_ids: vec![],
            sub_account_id: 0,
            created_at: 0,
            updated_at: 0,
        };
        assert!(!format!("{key:?}").contains("secret-value"));
    }
}
