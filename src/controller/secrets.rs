//! Secrets that receive key values and DKIM private keys, owned by the custom resource that
//! asked for them so that Kubernetes garbage collection removes them with it.
//!
//! The operator watches the Secrets it manages ([`Context::secret_cache`]): a Secret found
//! intact in that cache is left alone without any request, so a resync reads no Secret. A
//! Secret missing or different in the cache is read from the API before anything is written
//! (the cache may lag behind), and a change that leaves a managed Secret other than the
//! operator wrote it ([`as_written`]), or deletes it, triggers a reconcile of its owner, which
//! restores it.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;

use kube::runtime::reflector::ObjectRef;

use super::context::{Context, FIELD_MANAGER};

/// Annotation on a written Secret holding the keyed digest of the value ([`ValueDigest`]), so
/// that an altered Secret is noticed without reading the value from the service again.
pub const DIGEST_ANNOTATION: &str = "mailtarget.co/data-digest";

/// The operator's digest of Secret values: HMAC-SHA256 keyed with a key derived from the
/// operator's own credential. Unlike a plain hash, it gives whoever may read a Secret's
/// metadata nothing to test guessed values against.
pub struct ValueDigest(ring::hmac::Key);

impl ValueDigest {
    /// A digest keyed with `key`.
    pub fn new(key: &[u8]) -> Self {
        ValueDigest(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key))
    }

    /// True when `hex` is the digest of `bytes`, compared in constant time
    /// (`ring::hmac::verify`).
    pub fn verifies(&self, bytes: &[u8], hex: &str) -> bool {
        let Some(tag) = (0..hex.len())
            .step_by(2)
            .map(|i| {
                hex.get(i..i + 2)
                    .and_then(|b| u8::from_str_radix(b, 16).ok())
            })
            .collect::<Option<Vec<u8>>>()
        else {
            return false;
        };
        ring::hmac::verify(&self.0, bytes, &tag).is_ok()
    }

    /// The digest of `bytes`, hex.
    pub fn of(&self, bytes: &[u8]) -> String {
        ring::hmac::sign(&self.0, bytes)
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

impl std::fmt::Debug for ValueDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ValueDigest([REDACTED])")
    }
}

/// True when `secret` is owned by the object with `uid` and its `key` still matches the
/// digest written with it (nobody altered or emptied it).
fn intact(digest: &ValueDigest, secret: &Secret, uid: &str, key: &str) -> bool {
    let owned = secret.owner_references().iter().any(|r| r.uid == uid);
    let data = secret.data.as_ref().and_then(|d| d.get(key));
    let expected = secret.annotations().get(DIGEST_ANNOTATION);
    owned && data.is_some_and(|d| Some(&digest.of(&d.0)) == expected)
}

/// True when some value of `secret` matches its digest annotation: the Secret is as the
/// operator last wrote it (the operator's own write, or a change that left the value alone), so
/// its watch event starts no reconcile of its owner. A deleted, emptied or altered value, or a
/// removed annotation, does. A value moved under another key is restored at the next resync.
pub fn as_written(digest: &ValueDigest, secret: &Secret) -> bool {
    let Some(expected) = secret.annotations().get(DIGEST_ANNOTATION) else {
        return false;
    };
    secret
        .data
        .iter()
        .flat_map(|d| d.values())
        .any(|v| digest.verifies(&v.0, expected))
}

/// Secret `name` of `owner`'s namespace as the watch last saw it (`None` when not cached or
/// before the operator runs).
fn cached<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    owner: &K,
    name: &str,
) -> Option<std::sync::Arc<Secret>> {
    let namespace = owner.namespace().unwrap_or_default();
    ctx.secret_cache
        .get()?
        .get(&ObjectRef::new(name).within(&namespace))
}

/// What [`check`] found.
#[derive(Debug)]
pub enum Integrity {
    /// The Secret exists, is owned by the owner, and its key matches the keyed digest written with
    /// it.
    Intact,
    /// Missing, altered or not owned; `current` is the Secret as the GET just returned it
    /// (`None`: it does not exist), for [`ensure_over`] to write without reading it again.
    Broken {
        /// The Secret as read from the API.
        current: Option<Box<Secret>>,
    },
}

/// Whether Secret `name` exists, is owned by `owner`, and its `key` still matches the keyed digest
/// written with it (nobody altered or emptied it). Answered from the watch cache when it shows
/// the Secret intact, else with one GET.
///
/// Errors: Kubernetes API errors.
pub async fn check<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    owner: &K,
    name: &str,
    key: &str,
) -> Result<Integrity, kube::Error> {
    let uid = owner.uid().unwrap_or_default();
    if cached(ctx, owner, name).is_some_and(|s| intact(&ctx.digest, &s, &uid, key)) {
        return Ok(Integrity::Intact);
    }
    let api: Api<Secret> =
        Api::namespaced(ctx.kube.clone(), &owner.namespace().unwrap_or_default());
    let current = api.get_opt(name).await?;
    Ok(match current {
        Some(secret) if intact(&ctx.digest, &secret, &uid, key) => Integrity::Intact,
        current => Integrity::Broken {
            current: current.map(Box::new),
        },
    })
}

/// What [`ensure`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretWrite {
    /// The Secret already held the value.
    Unchanged,
    /// The Secret was created or its value restored.
    Written,
}

/// Why a Secret could not be written.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The Kubernetes API failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// Another object controls a Secret of that name.
    #[error("Secret \"{name}\" is controlled by {owner}; choose another secret name")]
    OwnedByOther {
        /// Secret name.
        name: String,
        /// `Kind/name` of its controller.
        owner: String,
    },
    /// A Secret of that name exists and the operator did not write it for this resource: it is
    /// not taken over (its data would be merged with the value and, owned by the resource,
    /// garbage-collected with it) unless the resource's adoption policy says so.
    #[error(
        "Secret \"{name}\" already exists and was not written by the operator for this resource; choose another secret name, remove the Secret, or set the annotation {annotation}: Adopt to take it over (where the resource's account lets its namespace adopt)",
        annotation = crate::crd::ANNOTATION_ADOPTION_POLICY
    )]
    NotOurs {
        /// Secret name.
        name: String,
    },
}

/// Why the resource with UID `uid` may not write Secret `name` as it is now (`current`):
/// another object controls it (`OwnedByOther`), or the operator did not write it for that
/// resource (it has no owner reference to it) and `takes_over` is false (`NotOurs`).
/// `takes_over` is true only under an adoption policy in force where the account lets the
/// namespace adopt (product design, "The managed-resource model": a pre-existing Secret is
/// not taken over unless the policy says so). `None`: it may. Decided before any write to the
/// service, on the Secret as the integrity check read it; [`ensure`], which reads the Secret
/// itself, decides it again on what it read.
pub fn refusal(uid: &str, name: &str, current: &Secret, takes_over: bool) -> Option<SecretError> {
    let refs = current.owner_references();
    if let Some(other) = refs
        .iter()
        .find(|r| r.controller == Some(true) && r.uid != uid)
    {
        return Some(SecretError::OwnedByOther {
            name: name.into(),
            owner: format!("{}/{}", other.kind, other.name),
        });
    }
    let ours = refs.iter().any(|r| r.uid == uid);
    (!ours && !takes_over).then(|| SecretError::NotOurs { name: name.into() })
}

/// True when `secret` is controlled by nobody but the owner with `uid`, is owned by it, and
/// holds `value` under `key` with the matching digest annotation.
fn holds(
    digest: &ValueDigest,
    secret: &Secret,
    uid: &str,
    key: &str,
    value: &SecretString,
) -> bool {
    let refs = secret.owner_references();
    let foreign = refs
        .iter()
        .any(|r| r.controller == Some(true) && r.uid != uid);
    let owned = refs.iter().any(|r| r.uid == uid);
    let annotated = secret.annotations().get(DIGEST_ANNOTATION)
        == Some(&digest.of(value.expose_secret().as_bytes()));
    let current = secret.data.as_ref().and_then(|d| d.get(key));
    !foreign
        && owned
        && annotated
        && current.is_some_and(|v| v.0 == value.expose_secret().as_bytes())
}

/// Makes Secret `name` (in `owner`'s namespace) hold `value` under `key`, with `owner` as its
/// controller. A missing or altered Secret is written again; an identical one is left alone
/// (no request when the watch cache shows it intact, else one GET; no write). The value never
/// reaches logs or errors.
///
/// Errors: Kubernetes API errors; a Secret the owner may not write ([`refusal`], with
/// `takes_over`).
pub async fn ensure<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    owner: &K,
    name: &str,
    key: &str,
    value: &SecretString,
    takes_over: bool,
) -> Result<SecretWrite, SecretError> {
    let uid = owner.uid().unwrap_or_default();
    if cached(ctx, owner, name).is_some_and(|s| holds(&ctx.digest, &s, &uid, key, value)) {
        return Ok(SecretWrite::Unchanged);
    }
    let api: Api<Secret> =
        Api::namespaced(ctx.kube.clone(), &owner.namespace().unwrap_or_default());
    let current = api.get_opt(name).await?;
    ensure_over(ctx, owner, name, key, value, current.as_ref(), takes_over).await
}

/// [`ensure`] for a caller that has just read the Secret (`current`, `None` when it does not
/// exist, e.g. from [`check`]): no further read before the write.
///
/// Errors: Kubernetes API errors; a Secret the owner may not write ([`refusal`]).
pub async fn ensure_over<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    owner: &K,
    name: &str,
    key: &str,
    value: &SecretString,
    current: Option<&Secret>,
    takes_over: bool,
) -> Result<SecretWrite, SecretError> {
    let namespace = owner.namespace().unwrap_or_default();
    let api: Api<Secret> = Api::namespaced(ctx.kube.clone(), &namespace);
    let owner_ref = owner
        .controller_owner_ref(&())
        .ok_or_else(|| SecretError::OwnedByOther {
            name: name.into(),
            owner: "nobody (the owner has no uid)".into(),
        })?;
    if let Some(existing) = current {
        if holds(&ctx.digest, existing, &owner_ref.uid, key, value) {
            return Ok(SecretWrite::Unchanged);
        }
        if let Some(refused) = refusal(&owner_ref.uid, name, existing, takes_over) {
            return Err(refused);
        }
    }
    let mut data = BTreeMap::new();
    data.insert(
        key.to_string(),
        ByteString(value.expose_secret().as_bytes().to_vec()),
    );
    let secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": { "app.kubernetes.io/managed-by": FIELD_MANAGER },
            "annotations": { DIGEST_ANNOTATION: ctx.digest.of(value.expose_secret().as_bytes()) },
            "ownerReferences": [owner_ref],
        },
        "type": "Opaque",
        "data": data,
    });
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&secret),
    )
    .await?;
    Ok(SecretWrite::Written)
}

#[cfg(test)]
mod tests {
    use super::{DIGEST_ANNOTATION, ValueDigest, as_written};
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::Secret;

    /// A digest verifies for its own bytes only; a changed or malformed digest does not.
    #[test]
    fn a_digest_verifies_its_own_bytes_only() {
        let digest = ValueDigest::new(b"key");
        let hex = digest.of(b"value");
        assert!(digest.verifies(b"value", &hex));
        assert!(!digest.verifies(b"other", &hex));
        assert!(!digest.verifies(b"value", &hex[..hex.len() - 2]));
        assert!(!digest.verifies(b"value", "zz"));
        assert!(!ValueDigest::new(b"another key").verifies(b"value", &hex));
    }

    /// Only a Secret whose value still matches its digest annotation is "as written" (its
    /// event starts no reconcile): an altered or emptied value, or a removed annotation, is not.
    #[test]
    fn a_secret_is_as_written_only_while_its_value_matches_the_digest() {
        let digest = ValueDigest::new(b"key");
        let secret = |value: Option<&[u8]>, annotated: bool| {
            let mut s = Secret::default();
            if annotated {
                s.metadata.annotations =
                    Some([(DIGEST_ANNOTATION.to_string(), digest.of(b"value"))].into());
            }
            s.data = value.map(|v| {
                [
                    ("other".to_string(), ByteString(b"x".to_vec())),
                    ("apiKey".to_string(), ByteString(v.to_vec())),
                ]
                .into()
            });
            s
        };
        assert!(as_written(&digest, &secret(Some(b"value"), true)));
        assert!(!as_written(&digest, &secret(Some(b"tampered"), true)));
        assert!(!as_written(&digest, &secret(None, true)), "emptied");
        assert!(!as_written(&digest, &secret(Some(b"value"), false)));
    }
}
