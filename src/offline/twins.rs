//! Twins made by concurrent applies. Where the service lets several objects share a natural key
//! (API key names: [`ManagedKind::NATURAL_KEY_UNIQUE`]), two `apply` runs at the same moment
//! may both find no key named `ci` and both create one; so may one run through two accounts
//! (`--account`) that reach one company, each planned alone. Neither create can see the other, so
//! after each create the run lists the natural key again: another object with it is reported
//! (the run fails, exit 1) while both ids are known, instead of leaving every later run to stop
//! on an ambiguous name.

use crate::api::{ApiObject, Client};
use crate::crd::ANNOTATION_EXTERNAL_ID;
use crate::engine::Lookup;
use crate::engine::ManagedKind;

/// Lists the natural key of `d` again after this run created object `created` (`stored`: its
/// value was written under `--secrets-dir`).
///
/// Errors, for people: another object with the natural key (naming both ids, the likely causes,
/// what to do and how to avoid it), or the list call's failure (the twin could not be ruled out).
pub(crate) async fn check<K: ManagedKind>(
    client: &Client,
    d: &K::Desired,
    created: i64,
    stored: bool,
) -> Result<(), String> {
    let key = K::natural_key(d);
    let noun = K::NOUN;
    let items = K::Detail::search(client, key).await.map_err(|e| {
        format!(
            "created {noun} {created}, but listing \"{key}\" again to rule out a twin made by a concurrent apply failed: {e}"
        )
    })?;
    let others: Vec<String> = match K::lookup(d, None, None, &items) {
        Lookup::Ambiguous(ids) => ids
            .into_iter()
            .filter(|id| *id != created)
            .map(|id| id.to_string())
            .collect(),
        Lookup::Found(_, found) if found.id != created => vec![found.id.to_string()],
        _ => Vec::new(),
    };
    if others.is_empty() {
        return Ok(());
    }
    let keep = if stored {
        format!(" (this run stored the value of {created})")
    } else {
        String::new()
    };
    Err(format!(
        "this run created {noun} {created} and another {noun} named \"{key}\" (id {}) was created at the same time, by another apply against the account \
         or by this run through another account that reaches the same company; delete one of them{keep}, then apply again, which adopts the one left \
         (or set the {ANNOTATION_EXTERNAL_ID} annotation to the id to keep); run applies against one account one at a time (a CI concurrency group), \
         and give each company one account",
        others.join(", ")
    ))
}
