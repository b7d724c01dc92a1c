//! Resources placed inside a sub account (`spec.subAccountRef`; product design, "Accounts and
//! tenancy"): both front ends call for them with the sub account's own key, the operator's
//! credential there, found among the sub account's keys by name.

use crate::crd::{SubAccount, SubAccountReference};
use crate::engine::{ManagedKind, natural_key};

/// Reason of a resource that names the operator's credential inside its sub account.
pub const REASON_CREDENTIAL_RESERVED: &str = "CredentialReserved";

/// Reason of a SubAccount whose sub account has no usable operator credential ([`credential`]
/// finds none, or several), and of the resources placed inside it.
pub const REASON_CREDENTIAL_MISSING: &str = "CredentialMissing";

/// Name of the key the operator creates with a sub account as its own credential there, when
/// the spec names none (product design, "Accounts and tenancy").
pub const OPERATOR_KEY_NAME: &str = "mailtarget-operator";

/// The sub account id a front end places an object in while its sub account is still to be
/// created (the cluster-less `plan`): no object carries it, so lookups find nothing of the
/// object inside, and a natural key unique at the service that exists elsewhere is reported.
pub const NOT_CREATED_YET: i64 = -1;

/// The sub account of the key `client` calls with, from its own entry in the key list `keys`:
/// what a sub account's key creates lands in its sub account, and its lists show only that sub
/// account (interface document, "API keys"; product design, "Scope of a key"). `None` for a
/// company key, or a key the list does not show. A resource not placed inside a sub account
/// lives where its account's key does: front ends place it there
/// ([`ManagedKind::in_sub_account`]), so that its lookups compare names among that sub
/// account's objects, as they compare a company key's among the company's.
pub fn own_sub_account(
    keys: &[crate::api::ApiKeyListItem],
    client: &crate::api::Client,
) -> Option<i64> {
    let own = client.own_entry(keys)?;
    (own.sub_account_id != crate::api::COMPANY_SUB_ACCOUNT_ID).then_some(own.sub_account_id)
}

/// The namespace of the SubAccount that hosts a resource of namespace `own` in its account, for
/// both front ends (product design, "Accounts and tenancy"): the namespace of the SubAccount
/// its `spec.subAccountRef` (`reference`) names in another namespace, when that SubAccount
/// lets `own` place objects inside (`lets_in(namespace, name)`: its `spec.allowedNamespaces`
/// selects `own`). `None` otherwise: not placed in another namespace, or not let in.
///
/// A resource so hosted calls only inside the sub account, with that sub account's credential,
/// so the service itself keeps it there: an account's `spec.namespaceSelector` lets it through
/// when it selects `own` or the host. So a platform namespace alone may use a company account
/// while the teams' objects live inside their sub accounts; a team's own use of the account
/// (an object outside any sub account, or through a SubAccount that does not let it in) stays
/// its own namespace's, refused without telling it anything of the host. Adoption is still
/// asked of `own`.
pub fn host_namespace<'a>(
    own: &str,
    reference: Option<&'a SubAccountReference>,
    lets_in: impl FnOnce(&str, &str) -> bool,
) -> Option<&'a str> {
    let reference = reference?;
    let namespace = reference.namespace.as_deref()?;
    (namespace != own && lets_in(namespace, &reference.name)).then_some(namespace)
}

/// The name of the key the operator calls with inside `r`'s sub account:
/// `spec.credentialKeyName`, else the first key's (`spec.apiKey.name`, else the sub account
/// name, when `spec.apiKey` is set), else [`OPERATOR_KEY_NAME`].
pub fn credential_key_name(r: &SubAccount) -> String {
    if let Some(name) = &r.spec.credential_key_name {
        return name.clone();
    }
    match &r.spec.api_key {
        Some(key) => key
            .name
            .clone()
            .unwrap_or_else(|| r.service_name().to_string()),
        None => OPERATOR_KEY_NAME.to_string(),
    }
}

/// How many names of the keys left in a sub account a missing credential's message lists.
const MISSING_NAMES_SHOWN: usize = 5;

/// The key called `name` among the keys of sub account `id` in `keys` (a list of the company's
/// keys, which carries their values): the operator's credential there.
///
/// Errors: for people, when no key or several keys of that name exist in the sub account;
/// with none, what to do given the keys left there (their names, at most
/// [`MISSING_NAMES_SHOWN`] and how many more; never their values).
pub fn credential<'a>(
    name: &str,
    id: i64,
    keys: &'a [crate::api::ApiKeyListItem],
) -> Result<&'a crate::api::ApiKeyListItem, String> {
    let found: Vec<_> = keys
        .iter()
        .filter(|k| k.sub_account_id == id && natural_key::same_key_name(&k.name, name))
        .collect();
    match found.as_slice() {
        [one] => Ok(one),
        [] => {
            let all: Vec<_> = (keys.iter()).filter(|k| k.sub_account_id == id).collect();
            let mut left: Vec<String> = (all.iter())
                .take(MISSING_NAMES_SHOWN)
                .map(|k| crate::text::quoted(&k.name))
                .collect();
            if all.len() > MISSING_NAMES_SHOWN {
                left.push(format!("and {} more", all.len() - MISSING_NAMES_SHOWN));
            }
            let what = if left.is_empty() {
                "it has no key left, and the company key cannot make one there (a key it creates is a company key): create a key in the sub account at the service, then name it in spec.credentialKeyName".to_string()
            } else {
                format!(
                    "set spec.credentialKeyName to the name of one of its keys ({}), or create a key named \"{name}\" in the sub account with one of them (a key the company key creates is a company key)",
                    left.join(", ")
                )
            };
            Err(format!(
                "sub account {id} has no API key named \"{name}\", the operator's credential for the objects inside it; {what}"
            ))
        }
        many => Err(format!(
            "sub account {id} has {} API keys named \"{name}\" (ids {}); the operator's credential must be unique: rename or delete the extra ones, or set spec.credentialKeyName to another key's name",
            many.len(),
            many.iter()
                .map(|k| k.id.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// What a 401 answered to the operator's credential inside a sub account says, for both front
/// ends (product design, "Accounts and tenancy": a refused credential is a matter of its
/// SubAccount, never of the company account): API key `name` (with its `id` when known), the
/// credential inside the sub account of `shown` (`SubAccount "namespace/name"`), deleted or
/// with allowed IPs that exclude `caller` (who called: "the operator", "this machine"). Front
/// ends add what to do. Names only: the key's value is never part of it.
pub fn credential_refused(id: Option<i64>, name: &str, shown: &str, caller: &str) -> String {
    let id = id.map(|id| format!(" {id}")).unwrap_or_default();
    format!(
        "the service refused API key{id} \"{name}\", the operator's credential inside the sub account of {shown} (deleted, or its allowed IPs exclude {caller})"
    )
}

/// The operator's credential inside `sub`'s sub account (its id, when known, and its name) as
/// reserved for a resource of namespace `own` (product design, "Accounts and tenancy": the
/// credential is no tenant's): `None` when that resource may manage it, which only a resource
/// of the SubAccount's own namespace (`sub_namespace`) may, and only when the SubAccount names
/// its credential (`spec.credentialKeyName`, or `spec.apiKey`).
pub fn reserved_for(
    sub: &SubAccount,
    sub_namespace: &str,
    own: &str,
    credential: (Option<i64>, String),
) -> Option<(Option<i64>, String)> {
    let named = sub.spec.api_key.is_some() || sub.spec.credential_key_name.is_some();
    (!named || sub_namespace != own).then_some(credential)
}

/// Why a resource of kind `K` may not manage the API key it names by `name` or found as `found`,
/// when that key is the reserved credential of its sub account (`reserved`, see
/// [`reserved_for`]); `None` when it may (or `K` is no API key).
pub fn refuse_credential<K: ManagedKind>(
    reserved: Option<&(Option<i64>, String)>,
    name: &str,
    found: Option<i64>,
) -> Option<String> {
    let (id, credential) = reserved.filter(|_| K::API_KEY)?;
    let named = natural_key::same_key_name(name, credential);
    (named || (found.is_some() && found == *id)).then(|| {
        let id = id.map(|id| format!(" {id}")).unwrap_or_default();
        format!(
            "API key{id} \"{credential}\" is the operator's credential inside its sub account and no resource may manage it; nothing is called. Give this key another name (or remove the {} annotation)",
            crate::crd::ANNOTATION_EXTERNAL_ID
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::InitialApiKey;

    /// The credential's name: `spec.credentialKeyName`, else `spec.apiKey`'s (its name, else
    /// the sub account's), else the operator's own key.
    #[test]
    fn credential_key_names() {
        let mut r = SubAccount::new("team-a", Default::default());
        assert_eq!(credential_key_name(&r), OPERATOR_KEY_NAME);
        r.spec.api_key = Some(InitialApiKey::default());
        assert_eq!(credential_key_name(&r), "team-a");
        r.spec.api_key.as_mut().unwrap().name = Some("first".into());
        assert_eq!(credential_key_name(&r), "first");
        r.spec.credential_key_name = Some("ops".into());
        assert_eq!(credential_key_name(&r), "ops");
    }

    /// The credential is the one key of its name inside the sub account: not a company key or
    /// another sub account's key of that name; none or several is an error saying what to do.
    #[test]
    fn credential_is_found_inside_its_sub_account_only() {
        let key = |id, name: &str, sub| crate::api::ApiKeyListItem {
            id,
            key: secrecy::SecretString::from(format!("value-{id}")),
            name: name.into(),
            permission_type: "full".into(),
            sub_account_id: sub,
            sub_account_name: String::new(),
            created_at: 0,
        };
        let keys = [
            key(1, "ops", 0),
            key(2, "ops", 8),
            key(3, "ops", 7),
            key(4, "app", 7),
        ];
        assert_eq!(credential("ops", 7, &keys).unwrap().id, 3);
        // What to do depends on what is left: another key to name, or none at all, which the
        // company key cannot make (its creates are company keys).
        let missing = credential("gone", 7, &keys).unwrap_err();
        assert!(missing.contains("spec.credentialKeyName"), "{missing}");
        assert!(
            missing.contains("\"app\""),
            "names the keys left: {missing}"
        );
        let none_left = credential("ops", 9, &keys).unwrap_err();
        assert!(none_left.contains("no key left"), "{none_left}");
        assert!(none_left.contains("company key cannot"), "{none_left}");
        let twice = [key(3, "ops", 7), key(5, "ops", 7)];
        let ambiguous = credential("ops", 7, &twice).unwrap_err();
        assert!(ambiguous.contains("ids 3, 5"), "{ambiguous}");
        // At most five names are listed, and how many more there are.
        let many: Vec<_> = (1..=8).map(|i| key(i, &format!("k{i}"), 7)).collect();
        let missing = credential("gone", 7, &many).unwrap_err();
        assert!(missing.contains("\"k5\", and 3 more)"), "{missing}");
        assert!(!missing.contains("\"k6\""), "{missing}");
    }
}
