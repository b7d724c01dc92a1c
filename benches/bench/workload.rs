//! The benchmark's objects: N manifests, one third of each kind, and the 1% of them whose spec
//! changes in the last phase.
//!
//! - SubAccount `sub-i` (service name `bench-sub-i`, status `active`) created with its first key
//!   `key-i` (`spec.apiKey`), whose value goes to Secret `sub-i-key`;
//! - ApiKey `key-i` managing that first key (`subAccountRef: sub-i`, the same permissions): the
//!   interface creates keys inside a sub account only with the sub account, so every key that
//!   references a sub account is that sub account's first key;
//! - SendingDomain `dom-i` for `dom-i.bench.example.com`, its DKIM private key in Secret
//!   `dom-i-dkim`.

use serde_json::{Value, json};

/// Namespace of every benchmark object.
pub const NAMESPACE: &str = "bench";
/// Label on every benchmark object (the benchmark's own watches select it, which tells its
/// requests apart from the operator's in the test API server's log).
pub const RUN_LABEL: &str = "bench.mailtarget.co/run";

/// How many objects of each kind a run of `n` objects has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts {
    /// SubAccounts.
    pub sub_accounts: usize,
    /// ApiKeys (each the first key of the sub account with the same index).
    pub api_keys: usize,
    /// SendingDomains.
    pub sending_domains: usize,
}

impl Counts {
    /// Splits `n` into thirds; the remainder goes to sub accounts first, then keys, so that
    /// every key has its sub account.
    pub fn of(n: usize) -> Counts {
        let sub_accounts = n.div_ceil(3);
        let api_keys = (n - sub_accounts).div_ceil(2);
        Counts {
            sub_accounts,
            api_keys,
            sending_domains: n - sub_accounts - api_keys,
        }
    }

    /// The three counts, in the order sub accounts, keys, domains.
    pub fn per_kind(&self) -> [usize; 3] {
        [self.sub_accounts, self.api_keys, self.sending_domains]
    }

    /// List page calls (pages of 100) needed to read every object of every kind once.
    pub fn list_pages(&self) -> usize {
        self.per_kind().iter().map(|n| n.div_ceil(100).max(1)).sum()
    }
}

/// The sub account manifest `i`.
pub fn sub_account(i: usize) -> Value {
    json!({
        "apiVersion": "mailtarget.co/v1alpha1",
        "kind": "SubAccount",
        "metadata": {"name": format!("sub-{i}"), "namespace": NAMESPACE, "labels": {RUN_LABEL: "true"}},
        "spec": {
            "name": format!("bench-sub-{i}"),
            "status": "active",
            "apiKey": {
                "name": format!("key-{i}"),
                "permissionIds": [1, 2],
                "secretName": format!("sub-{i}-key"),
            },
        },
    })
}

/// The API key manifest `i` (the first key of sub account `i`).
pub fn api_key(i: usize) -> Value {
    json!({
        "apiVersion": "mailtarget.co/v1alpha1",
        "kind": "ApiKey",
        "metadata": {"name": format!("key-{i}"), "namespace": NAMESPACE, "labels": {RUN_LABEL: "true"}},
        "spec": {
            "name": format!("key-{i}"),
            "subAccountRef": {"name": format!("sub-{i}")},
            "permissionIds": [1, 2],
            "secretName": format!("key-{i}-secret"),
            "deletionPolicy": "Orphan",
        },
    })
}

/// The sending domain manifest `i`.
pub fn sending_domain(i: usize) -> Value {
    json!({
        "apiVersion": "mailtarget.co/v1alpha1",
        "kind": "SendingDomain",
        "metadata": {"name": format!("dom-{i}"), "namespace": NAMESPACE, "labels": {RUN_LABEL: "true"}},
        "spec": {
            "domain": format!("dom-{i}.bench.example.com"),
            "dkimPrivateKeySecretName": format!("dom-{i}-dkim"),
        },
    })
}

/// Every manifest of a run of `n` objects: sub accounts, then keys, then domains.
pub fn manifests(n: usize) -> Vec<Value> {
    let c = Counts::of(n);
    (0..c.sub_accounts)
        .map(sub_account)
        .chain((0..c.api_keys).map(api_key))
        .chain((0..c.sending_domains).map(sending_domain))
        .collect()
}

/// The manifests as one YAML stream (documents separated by `---`).
pub fn yaml_stream(manifests: &[Value]) -> String {
    manifests
        .iter()
        .map(|m| serde_yaml::to_string(m).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("---\n")
}

/// One spec change of the last phase: a merge patch of one object.
#[derive(Clone, Debug)]
pub struct Change {
    /// `SubAccount`, `ApiKey` or `SendingDomain`.
    pub kind: &'static str,
    /// `metadata.name`.
    pub name: String,
    /// Merge patch of the spec.
    pub patch: Value,
}

/// `ceil(n / 100)` changes (at least one), taken in turn from the three kinds: a sub account's
/// `status`, a key's `permissionIds`, a domain's `shared` flag. Each needs exactly one PUT.
pub fn changes(n: usize) -> Vec<Change> {
    let c = Counts::of(n);
    let wanted = n.div_ceil(100).max(1);
    let mut out = Vec::with_capacity(wanted);
    let mut index = [0usize; 3];
    let mut kind = 0;
    while out.len() < wanted {
        let available = c.per_kind()[kind];
        let i = index[kind];
        if i < available {
            index[kind] += 1;
            out.push(match kind {
                0 => Change {
                    kind: "SubAccount",
                    name: format!("sub-{i}"),
                    patch: json!({"spec": {"status": "paused"}}),
                },
                1 => Change {
                    kind: "ApiKey",
                    name: format!("key-{i}"),
                    patch: json!({"spec": {"permissionIds": [1, 3]}}),
                },
                _ => Change {
                    kind: "SendingDomain",
                    name: format!("dom-{i}"),
                    patch: json!({"spec": {"shared": true}}),
                },
            });
        } else if index.iter().zip(c.per_kind()).all(|(i, n)| *i >= n) {
            break;
        }
        kind = (kind + 1) % 3;
    }
    out
}
