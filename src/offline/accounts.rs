//! Accounts other than `default` in `plan`, `apply` and `destroy` (product design, "Accounts and
//! tenancy": the cluster-less front end holds the keys it is given; accounts other than the
//! default need their credentials named on the command line).
//!
//! `--account NAME=@FILE` gives the key of one account: `NAME` is a ClusterAccount's name, or
//! `NAMESPACE/NAME` for an Account, as the resources' `spec.accountRef` reach them; `FILE` holds
//! the key (surrounding whitespace ignored). The account's addresses come from its manifest
//! among the files when there is one (`spec.apiUrl`, `spec.transmissionUrl`), else from
//! `--api-url` and `--transmission-url`. The resources are planned and applied per account,
//! each account with its own client (and, under `--simulate`, its own simulator: another
//! company). `--api-key` stays the key of ClusterAccount `default`, needed only when some
//! resource uses it.

use std::path::PathBuf;
use std::str::FromStr;

use crate::cli::ApiArgs;
use crate::crd::{AccountRefKind, AccountReference};
use crate::engine::validate::{is_dns1123_label, is_dns1123_subdomain};
use crate::manifest::{Loaded, ManifestSet, Resource};

/// The name `plan`/`apply` give the default account (ClusterAccount `default`).
pub const DEFAULT: &str = crate::crd::account::DEFAULT_ACCOUNT;

/// One `--account NAME=@FILE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccountKey {
    /// `NAME` (a ClusterAccount) or `NAMESPACE/NAME` (an Account).
    pub name: String,
    /// The file holding the account's key.
    pub file: PathBuf,
}

impl FromStr for AccountKey {
    type Err = String;

    /// Parses `NAME=@FILE`.
    ///
    /// Errors: no `=@`, an empty file name, a name that is not a DNS-1123 subdomain,
    /// optionally preceded by a namespace and `/`, or `default` (whose key is `--api-key`).
    fn from_str(s: &str) -> Result<Self, String> {
        let Some((name, file)) = s.split_once("=@") else {
            return Err("expected NAME=@FILE (e.g. billing=@billing.key)".into());
        };
        if file.is_empty() {
            return Err("expected a file after =@".into());
        }
        let parts: Vec<&str> = name.split('/').collect();
        let valid = match parts.as_slice() {
            [name] => is_dns1123_subdomain(name),
            [namespace, name] => is_dns1123_label(namespace) && is_dns1123_subdomain(name),
            _ => false,
        };
        if !valid {
            return Err(format!(
                "account name {}: a ClusterAccount's name, or NAMESPACE/NAME for an Account",
                crate::text::quoted(name)
            ));
        }
        if name == DEFAULT {
            return Err(format!(
                "ClusterAccount {DEFAULT}'s key is --api-key or --api-key-file, not --account"
            ));
        }
        Ok(AccountKey {
            name: name.to_string(),
            file: PathBuf::from(file),
        })
    }
}

/// The key of one `--account`, read from its file once, when the manifests are loaded.
pub struct ReadKey {
    /// The account's name, as [`AccountKey::name`].
    pub name: String,
    /// The key.
    pub value: secrecy::SecretString,
}

/// The account a resource of `namespace` with `reference` uses, as `--account` names it.
pub fn account_name(namespace: &str, reference: Option<&AccountReference>) -> String {
    match reference {
        None => DEFAULT.to_string(),
        Some(r) if r.kind == AccountRefKind::ClusterAccount => r.name.clone(),
        Some(r) => format!("{namespace}/{}", r.name),
    }
}

/// The account `resource` uses, as `--account` names it.
pub fn of(resource: &Resource) -> String {
    account_name(resource.namespace(), resource.account_ref())
}

/// The resources of one account, with how to reach it.
pub struct Group {
    /// The account's name (see [`account_name`]).
    pub account: String,
    /// Its resources, in manifest order.
    pub resources: Vec<Loaded>,
    /// How to reach it: the command line's flags, with its key and addresses.
    pub api: ApiArgs,
}

impl Group {
    /// The account's name as entries show it: `None` for the default account.
    pub fn label(&self) -> Option<String> {
        (self.account != DEFAULT).then(|| self.account.clone())
    }
}

/// The resources of `set` grouped by account: the default account first (when some resource
/// uses it, or none uses any: its objects are still listed), then the others in the order
/// `keys` names them; each with the flags to reach it (the key given, in place of a file).
/// A resource whose account has no key is refused by the manifest reader before this (see
/// [`crate::manifest::load_with`]).
///
/// Errors: none beyond the reader's; an account given but used by no resource is ignored.
pub fn groups(set: &ManifestSet, api: &ApiArgs, keys: &[ReadKey]) -> Vec<Group> {
    let mut order = vec![DEFAULT.to_string()];
    // `--account default=@FILE` is refused when parsed: no key names the default.
    order.extend(keys.iter().map(|k| k.name.clone()));
    let none = set.resources.is_empty();
    order
        .into_iter()
        .filter_map(|account| {
            let resources: Vec<Loaded> = (set.resources.iter())
                .filter(|l| of(&l.resource) == account)
                .cloned()
                .collect();
            if resources.is_empty() && !(none && account == DEFAULT) {
                return None;
            }
            let api = flags_of(&account, set, api, keys);
            Some(Group {
                account,
                resources,
                api,
            })
        })
        .collect()
}

/// Checks that no two of `groups` reach one service (`--api-url`) with one key: they would be
/// one company through two accounts, and resources through each could claim one object (a
/// key of one name, a sub account) without either plan seeing the other's claim. A group whose
/// key cannot be had is left to fail when it connects.
///
/// Errors: for people, the two accounts and what to do.
pub fn one_per_company(groups: &[Group]) -> Result<(), String> {
    use secrecy::ExposeSecret;
    let reached: Vec<(&str, String, secrecy::SecretString)> = (groups.iter())
        .filter_map(|g| {
            let config = g.api.service_config().ok()?;
            Some((
                g.account.as_str(),
                config.api_url.to_string(),
                config.api_key,
            ))
        })
        .collect();
    for (i, (first, url, key)) in reached.iter().enumerate() {
        let same = |(_, u, k): &&(&str, String, secrecy::SecretString)| {
            u == url && k.expose_secret() == key.expose_secret()
        };
        if let Some((second, _, _)) = reached[i + 1..].iter().find(same) {
            return Err(format!(
                "accounts {} and {} reach {url} with the same key: one company through two accounts, whose resources could claim one object unseen; give each company one account",
                crate::text::quoted(first),
                crate::text::quoted(second)
            ));
        }
    }
    Ok(())
}

/// The flags reaching `account`: its key from `keys` (else the default's key), its addresses
/// from its manifest in `set` (else the flags').
fn flags_of(account: &str, set: &ManifestSet, api: &ApiArgs, keys: &[ReadKey]) -> ApiArgs {
    use secrecy::ExposeSecret;
    let mut flags = api.clone();
    if let Some(key) = keys.iter().find(|k| k.name == account) {
        flags.api_key = Some(key.value.expose_secret().to_owned());
        flags.api_key_file = None;
    }
    // The default account's addresses are the flags' (the chart's ClusterAccount `default`
    // among the files does not move --api-key elsewhere).
    let manifest = set.accounts.iter().find(|(name, _, _)| name == account);
    if let Some((_, connection, _)) = manifest.filter(|_| account != DEFAULT) {
        if let Ok(url) = connection.api_url.parse() {
            flags.api_url = url;
        }
        if let Ok(url) = connection.transmission_url.parse() {
            flags.transmission_url = url;
        }
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `NAME=@FILE` and `NAMESPACE/NAME=@FILE` parse; anything else says what is expected.
    #[test]
    fn account_keys_parse() {
        let k: AccountKey = "billing=@/run/billing.key".parse().unwrap();
        assert_eq!(k.name, "billing");
        assert_eq!(k.file, PathBuf::from("/run/billing.key"));
        let k: AccountKey = "team-a/billing=@key".parse().unwrap();
        assert_eq!(k.name, "team-a/billing");
        for bad in [
            "billing",
            "billing=key",
            "billing=@",
            "Billing=@k",
            "a/b/c=@k",
            "/b=@k",
            "default=@k",
        ] {
            assert!(bad.parse::<AccountKey>().is_err(), "{bad}");
        }
    }

    /// A resource's account as `--account` names it.
    #[test]
    fn account_names() {
        let cluster = AccountReference {
            kind: AccountRefKind::ClusterAccount,
            name: "billing".into(),
        };
        let namespaced = AccountReference {
            kind: AccountRefKind::Account,
            name: "billing".into(),
        };
        assert_eq!(account_name("team-a", None), "default");
        assert_eq!(account_name("team-a", Some(&cluster)), "billing");
        assert_eq!(account_name("team-a", Some(&namespaced)), "team-a/billing");
    }
}
