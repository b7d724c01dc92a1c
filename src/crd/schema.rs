//! Schema fragments that schemars cannot express with attributes alone.
//!
//! They follow the Kubernetes structural-schema rules for CRDs (Kubernetes documentation,
//! "CustomResourceDefinition validation").

use schemars::{Schema, SchemaGenerator, json_schema};

/// Pattern accepted for a DNS hostname: lowercase labels of 1 to 63 letters, digits or hyphens,
/// not starting or ending with a hyphen, at least two labels, top-level label not all digits.
pub const HOSTNAME_PATTERN: &str =
    r"^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]([a-z0-9-]{0,61}[a-z0-9])?$";

/// Pattern of a Kubernetes object name (a DNS-1123 subdomain: lowercase letters, digits, `-`
/// and `.`, starting and ending with a letter or digit; Kubernetes API conventions, "Names").
pub const DNS_SUBDOMAIN_PATTERN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// Pattern of a namespace name (a DNS-1123 label: lowercase letters, digits and `-`, starting
/// and ending with a letter or digit; Kubernetes API conventions, "Names").
pub const DNS_LABEL_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// Pattern of a name at the service (sub account, API key), and of the other free strings it
/// stores (a sub account's status, a key's permission type): no leading or trailing whitespace.
/// The service trims names before storing them, so a name with surrounding spaces would never
/// match its own object by name again (design decision "Names"). Read the same way by RE2
/// (kube-apiserver) and ECMA-262 (JSON Schema).
pub const NAME_PATTERN: &str = r"^\S(.*\S)?$";

/// Pattern for one IPv4 address in dotted decimal, or one IPv6 address (hex groups and colons,
/// optionally ending in an IPv4 address). Ranges and CIDR prefixes are not accepted: the interface
/// documents `allowedIp` as a list of IP addresses. The operator parses every entry again.
pub const IP_PATTERN: &str = r"^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$|^[0-9a-fA-F:]*:[0-9a-fA-F:.]*$";

/// Schema of a list of IP addresses (`allowedIps`): unique strings matching [`IP_PATTERN`].
pub fn ip_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "maxItems": 100,
        "x-kubernetes-list-type": "set",
        "items": { "type": "string", "pattern": IP_PATTERN, "maxLength": 45 }
    })
}

/// Schema of a list of permission ids: unique non-negative integers.
pub fn permission_ids(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "maxItems": 100,
        "x-kubernetes-list-type": "set",
        "items": { "type": "integer", "format": "int64", "minimum": 0 }
    })
}

/// Schema of `status.conditions`: a list map keyed by `type`, as Kubernetes API conventions ask.
pub fn conditions(generator: &mut SchemaGenerator) -> Schema {
    let mut item = generator.subschema_for::<crate::crd::Condition>();
    // As controller-gen writes metav1.Condition into CRDs: `status` is one of three words.
    if let Some(status) = item
        .get_mut("properties")
        .and_then(|p| p.get_mut("status"))
        .and_then(|s| s.as_object_mut())
    {
        status.insert(
            "enum".into(),
            serde_json::json!(["True", "False", "Unknown"]),
        );
    }
    json_schema!({
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": item
    })
}

/// Schema of `SendingDomain.spec.domain`: a lowercase hostname (internationalised names in their
/// `xn--` form), at most 253 characters, immutable once set (a CEL transition rule, evaluated by
/// the API server on updates).
pub fn domain(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "minLength": 3,
        "maxLength": 253,
        "pattern": HOSTNAME_PATTERN,
        "x-kubernetes-validations": [{
            "rule": "self == oldSelf",
            "message": "spec.domain is immutable: create a new SendingDomain for another domain"
        }]
    })
}

/// CEL transition rule of every managed kind's spec: `spec.accountRef` cannot change (unset
/// equals `{kind: ClusterAccount, name: default}`, so writing the default out is no change). A
/// resource moved to another account would leave its object behind in the first one, and the
/// second could adopt what another tenant owns; create a new resource instead (product design,
/// "Accounts and tenancy": `accountRef` is immutable).
pub const ACCOUNT_REF_IMMUTABLE: &str = "(has(self.accountRef) ? self.accountRef.name : 'default') == (has(oldSelf.accountRef) ? oldSelf.accountRef.name : 'default') && (has(self.accountRef) && has(self.accountRef.kind) ? self.accountRef.kind : 'ClusterAccount') == (has(oldSelf.accountRef) && has(oldSelf.accountRef.kind) ? oldSelf.accountRef.kind : 'ClusterAccount')";

/// Message of [`ACCOUNT_REF_IMMUTABLE`].
pub const ACCOUNT_REF_IMMUTABLE_MESSAGE: &str = "spec.accountRef is immutable: create a new resource to manage an object through another account";

/// CEL transition rule keeping `spec.subAccountRef` as it was created (set or unset, name and
/// namespace): an object moved to another sub account would be left behind in the first one
/// (product design, "Accounts and tenancy": `subAccountRef` is immutable). Spelling out the
/// namespace that was left to default counts as a change.
pub const SUB_ACCOUNT_REF_IMMUTABLE: &str = "has(self.subAccountRef) == has(oldSelf.subAccountRef) && (!has(self.subAccountRef) || (self.subAccountRef.name == oldSelf.subAccountRef.name && (has(self.subAccountRef.namespace) ? self.subAccountRef.namespace : '') == (has(oldSelf.subAccountRef.namespace) ? oldSelf.subAccountRef.namespace : '')))";

/// Message of [`SUB_ACCOUNT_REF_IMMUTABLE`].
pub const SUB_ACCOUNT_REF_IMMUTABLE_MESSAGE: &str = "spec.subAccountRef is immutable: create a new resource to manage an object in another sub account";

/// Schema of `spec.accountRef`: the [`super::account::AccountReference`] object, not nullable
/// (kube-apiserver then drops an explicit `null` before validation, as it does for every
/// non-nullable field without a default: apiextensions-apiserver's `PruneNonNullableNulls`),
/// so the transition rule [`ACCOUNT_REF_IMMUTABLE`] never meets a null value.
pub fn account_ref(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<super::account::AccountReference>()
}
