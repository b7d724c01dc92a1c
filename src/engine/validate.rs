//! Checks on a resource's spec that go beyond the CRD schema, shared by the manifest reader and
//! the controllers (which report them in the `Ready` condition with reason `InvalidSpec`).

use std::net::IpAddr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::crd::{
    ANNOTATION_ADOPTION_POLICY, ANNOTATION_EXTERNAL_ID, AdoptionPolicy, ApiKey, ClusterAccountSpec,
    SendingDomain, SubAccount,
};
use crate::manifest::Resource;

use super::natural_key;
use crate::text::{MAX_VALUE_CHARS, printable};

/// One problem in a spec: the field path and what to fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Field path, e.g. `spec.allowedIps[1]`.
    pub field: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl Problem {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Most problems [`describe`] spells out; the rest are counted.
pub const MAX_DESCRIBED_PROBLEMS: usize = 5;

/// Problems as one sentence for a condition message or a plan entry: `field: message; ...`, the
/// first [`MAX_DESCRIBED_PROBLEMS`] spelled out and the rest counted (`; and 95 more problems`),
/// so that a spec with hundreds of bad values gives a message of bounded length.
pub fn describe(problems: &[Problem]) -> String {
    let mut text = problems
        .iter()
        .take(MAX_DESCRIBED_PROBLEMS)
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    match problems.len().saturating_sub(MAX_DESCRIBED_PROBLEMS) {
        0 => {}
        1 => text.push_str("; and 1 more problem"),
        n => text.push_str(&format!("; and {n} more problems")),
    }
    text
}

/// Every problem of one resource (empty when valid).
pub fn problems(resource: &Resource) -> Vec<Problem> {
    match resource {
        Resource::SubAccount(r) => sub_account(r),
        Resource::ApiKey(r) => api_key(r),
        Resource::SendingDomain(r) => sending_domain(r),
    }
}

/// The natural key of a resource (the field that names it in the service and its value):
/// sub account name, key name, or domain. Two resources with the same kind and natural key
/// would manage the same API object.
pub fn natural_key(resource: &Resource) -> (&'static str, String) {
    match resource {
        Resource::SubAccount(r) => ("spec.name", natural_key::sub_account(r.service_name())),
        Resource::ApiKey(r) => {
            let scope = r
                .spec
                .sub_account_ref
                .as_ref()
                .map(|s| s.name.as_str())
                .unwrap_or("");
            (
                "spec.name",
                format!(
                    "{}{}{}",
                    scope,
                    if scope.is_empty() { "" } else { "/" },
                    natural_key::api_key(r.service_name())
                ),
            )
        }
        Resource::SendingDomain(r) => ("spec.domain", natural_key::domain(&r.spec.domain)),
    }
}

/// The id in the `mailtarget.co/external-id` annotation, if any.
///
/// Errors: a problem when the annotation is not a positive integer.
pub fn external_id(
    annotations: Option<&std::collections::BTreeMap<String, String>>,
) -> Result<Option<i64>, Problem> {
    let Some(raw) = annotations.and_then(|a| a.get(ANNOTATION_EXTERNAL_ID)) else {
        return Ok(None);
    };
    match raw.trim().parse::<i64>() {
        Ok(id) if id > 0 => Ok(Some(id)),
        _ => Err(Problem::new(
            format!("metadata.annotations[{ANNOTATION_EXTERNAL_ID}]"),
            format!(
                "\"{raw}\" is not an id: write the positive integer id of the API object to adopt"
            ),
        )),
    }
}

/// The problem of a `mailtarget.co/paused` value other than `true` or `false` (see
/// [`crate::crd::paused`]), if any.
pub fn paused(annotations: &std::collections::BTreeMap<String, String>) -> Option<Problem> {
    let message = crate::crd::paused(annotations).err()?;
    let field = format!("metadata.annotations[{}]", crate::crd::ANNOTATION_PAUSED);
    Some(Problem::new(field, message))
}

/// Problems of the annotations every kind reads: `external-id`, `adoption-policy` and `paused`.
fn annotations(
    annotations: Option<&std::collections::BTreeMap<String, String>>,
    out: &mut Vec<Problem>,
) {
    if let Err(p) = external_id(annotations) {
        out.push(p);
    }
    if let Some(a) = annotations
        && let Err(message) = AdoptionPolicy::from_annotations(a)
    {
        out.push(Problem::new(
            format!("metadata.annotations[{ANNOTATION_ADOPTION_POLICY}]"),
            message,
        ));
    }
    out.extend(annotations.and_then(paused));
}

/// Problems of a SubAccount spec.
pub fn sub_account(r: &SubAccount) -> Vec<Problem> {
    let mut out = Vec::new();
    annotations(r.metadata.annotations.as_ref(), &mut out);
    if r.service_name().trim().is_empty() {
        out.push(Problem::new("spec.name", "the sub account name is empty"));
    }
    if let Some(key) = &r.spec.api_key {
        ip_list(&key.allowed_ips, "spec.apiKey.allowedIps", &mut out);
        secret_name(&key.secret_name, "spec.apiKey.secretName", &mut out);
        unique_ids(&key.permission_ids, "spec.apiKey.permissionIds", &mut out);
        let first = key.name.as_deref().unwrap_or(r.service_name());
        if let Some(named) = &r.spec.credential_key_name
            && !crate::engine::natural_key::same_key_name(named, first)
        {
            out.push(Problem::new(
                "spec.credentialKeyName",
                format!(
                    "names key \"{named}\" but spec.apiKey creates key \"{first}\" with the sub account, which is then the operator's credential; leave spec.credentialKeyName unset, or remove spec.apiKey and declare that key as an ApiKey with subAccountRef"
                ),
            ));
        }
    }
    if let Some(selector) = &r.spec.allowed_namespaces {
        label_selector(selector, "spec.allowedNamespaces", &mut out);
    }
    out
}

/// Problems of an ApiKey spec.
pub fn api_key(r: &ApiKey) -> Vec<Problem> {
    let mut out = Vec::new();
    annotations(r.metadata.annotations.as_ref(), &mut out);
    if r.service_name().trim().is_empty() {
        out.push(Problem::new("spec.name", "the key name is empty"));
    }
    ip_list(&r.spec.allowed_ips, "spec.allowedIps", &mut out);
    secret_name(&r.spec.secret_name, "spec.secretName", &mut out);
    unique_ids(&r.spec.permission_ids, "spec.permissionIds", &mut out);
    out
}

/// Problems of a SendingDomain spec.
pub fn sending_domain(r: &SendingDomain) -> Vec<Problem> {
    let mut out = Vec::new();
    annotations(r.metadata.annotations.as_ref(), &mut out);
    if let Err(message) = check_domain(&r.spec.domain) {
        out.push(Problem::new("spec.domain", message));
    }
    if let Some(name) = &r.spec.dkim_private_key_secret_name {
        secret_name(name, "spec.dkimPrivateKeySecretName", &mut out);
    }
    out
}

/// Problems of a ClusterAccount spec: its namespace selectors (the schema cannot check them).
/// Shared by the accounts controller (reason `InvalidSpec`) and the manifest reader.
pub fn cluster_account(spec: &ClusterAccountSpec) -> Vec<Problem> {
    let mut out = Vec::new();
    for (field, selector) in [
        ("spec.namespaceSelector", &spec.namespace_selector),
        (
            "spec.adoptionNamespaceSelector",
            &spec.adoption_namespace_selector,
        ),
    ] {
        if let Some(selector) = selector {
            label_selector(selector, field, &mut out);
        }
    }
    out
}

/// Problems of a label selector, as kube-apiserver checks a selector of its own types
/// (apimachinery `ValidateLabelSelector`; it leaves a custom resource's selector unchecked, so
/// the operator checks it): `matchLabels` keys and values, and in `matchExpressions` the key,
/// the values, a known operator, values with `In` and `NotIn`, none with `Exists` and
/// `DoesNotExist`. A selector without problems converts to a [`kube::core::Selector`], and
/// matches the labels it names (an invalid key would match no namespace, without a word).
fn label_selector(selector: &LabelSelector, field: &str, out: &mut Vec<Problem>) {
    for (key, value) in selector.match_labels.iter().flatten() {
        if !is_qualified_name(key) {
            out.push(Problem::new(
                format!("{field}.matchLabels"),
                not_a_key(key, "label"),
            ));
        }
        if !is_label_value(value) {
            out.push(Problem::new(
                format!("{field}.matchLabels[{}]", printable(key, MAX_VALUE_CHARS)),
                not_a_label_value(value),
            ));
        }
    }
    let requirements = selector.match_expressions.as_deref().unwrap_or_default();
    for (i, requirement) in requirements.iter().enumerate() {
        let at = format!("{field}.matchExpressions[{i}]");
        if !is_qualified_name(&requirement.key) {
            out.push(Problem::new(
                format!("{at}.key"),
                not_a_key(&requirement.key, "label"),
            ));
        }
        let values = requirement.values.iter().flatten().enumerate();
        for (j, value) in values.filter(|(_, v)| !is_label_value(v)) {
            out.push(Problem::new(
                format!("{at}.values[{j}]"),
                not_a_label_value(value),
            ));
        }
        let has_values = requirement.values.as_ref().is_some_and(|v| !v.is_empty());
        match requirement.operator.as_str() {
            "In" | "NotIn" if !has_values => out.push(Problem::new(
                format!("{at}.values"),
                format!(
                    "required with operator {}: list at least one value",
                    requirement.operator
                ),
            )),
            "Exists" | "DoesNotExist" if has_values => out.push(Problem::new(
                format!("{at}.values"),
                format!("must be empty with operator {}", requirement.operator),
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => out.push(Problem::new(
                format!("{at}.operator"),
                format!(
                    "\"{}\" is not an operator: use In, NotIn, Exists or DoesNotExist",
                    crate::text::printable(other, crate::text::MAX_VALUE_CHARS)
                ),
            )),
        }
    }
}

/// Checks a sending domain name: lowercase DNS hostname of at least two labels, at most 253
/// characters, labels of 1 to 63 characters without leading or trailing hyphens, not an IP
/// address; internationalised names must be written in their `xn--` form.
pub fn check_domain(domain: &str) -> Result<(), String> {
    let fix = "write a lowercase domain such as mail.example.com (internationalised names in their xn-- form)";
    if domain.is_empty() {
        return Err(format!("required: {fix}"));
    }
    if domain.len() > 253 {
        return Err(format!(
            "is {} characters long; a domain has at most 253",
            domain.len()
        ));
    }
    if domain.parse::<IpAddr>().is_ok() {
        return Err(format!(
            "\"{domain}\" is an IP address, not a domain: {fix}"
        ));
    }
    if !domain.is_ascii() {
        return Err(format!("\"{domain}\" has non-ASCII characters: {fix}"));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    if labels.len() < 2 {
        return Err(format!("\"{domain}\" has a single label: {fix}"));
    }
    if let Some(label) = labels.iter().find(|l| !is_dns1123_label(l)) {
        return Err(format!(
            "\"{domain}\" has an invalid label \"{label}\": {fix}"
        ));
    }
    if labels
        .last()
        .is_some_and(|tld| tld.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(format!("\"{domain}\" ends in a numeric label: {fix}"));
    }
    Ok(())
}

fn ip_list(ips: &[String], field: &str, out: &mut Vec<Problem>) {
    let mut seen = std::collections::HashSet::new();
    for (i, ip) in ips.iter().enumerate() {
        match ip.parse::<IpAddr>() {
            Ok(parsed) => {
                if !seen.insert(parsed) {
                    out.push(Problem::new(format!("{field}[{i}]"), format!("\"{ip}\" is listed twice")));
                }
            }
            Err(_) => out.push(Problem::new(
                format!("{field}[{i}]"),
                format!("\"{ip}\" is not an IP address (write one IPv4 or IPv6 address per entry; ranges and CIDR prefixes are not accepted)"),
            )),
        }
    }
}

fn unique_ids(ids: &[i64], field: &str, out: &mut Vec<Problem>) {
    let mut seen = std::collections::HashSet::new();
    for (i, id) in ids.iter().enumerate() {
        if *id < 0 {
            out.push(Problem::new(
                format!("{field}[{i}]"),
                format!("{id} is negative; permission ids are positive integers"),
            ));
        } else if !seen.insert(id) {
            out.push(Problem::new(
                format!("{field}[{i}]"),
                format!("{id} is listed twice"),
            ));
        }
    }
}

/// The rule a label value, and the name part of a label or annotation key, follows
/// (apimachinery `IsQualifiedName`, `IsValidLabelValue`), as messages state it.
const NAME_RULE: &str =
    "at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit";

/// A qualified name, as kube-apiserver checks label and annotation keys (`IsQualifiedName` in
/// k8s.io/apimachinery): an optional DNS-1123 subdomain prefix and `/`, then a name of
/// [`NAME_RULE`].
pub fn is_qualified_name(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => is_dns1123_subdomain(prefix) && is_name_part(name),
        None => is_name_part(key),
    }
}

/// A label value (`IsValidLabelValue` in k8s.io/apimachinery): empty, or a name of
/// [`NAME_RULE`].
pub fn is_label_value(value: &str) -> bool {
    value.is_empty() || is_name_part(value)
}

/// The message for `key`, which is no qualified name ([`is_qualified_name`]); `kind` says
/// what it keys ("label", "annotation"). The key is shown printable and capped.
pub fn not_a_key(key: &str, kind: &str) -> String {
    format!(
        "\"{}\" is not a valid {kind} key: an optional DNS subdomain and '/', then {NAME_RULE}",
        printable(key, MAX_VALUE_CHARS)
    )
}

/// The message for `value`, which is no label value ([`is_label_value`]), shown printable and
/// capped.
pub fn not_a_label_value(value: &str) -> String {
    format!(
        "\"{}\" is not a valid label value: empty, or {NAME_RULE}",
        printable(value, MAX_VALUE_CHARS)
    )
}

fn is_name_part(s: &str) -> bool {
    let alphanumeric = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    (1..=63).contains(&s.len())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && alphanumeric(s.chars().next())
        && alphanumeric(s.chars().last())
}

/// A DNS-1123 label, as kube-apiserver checks a namespace's name (`IsDNS1123Label` in
/// k8s.io/apimachinery): 1 to 63 lowercase letters, digits and '-', starting and ending with a
/// letter or digit.
pub fn is_dns1123_label(s: &str) -> bool {
    s.len() <= 63 && is_dns1123_part(s)
}

/// A DNS-1123 subdomain, as kube-apiserver checks most object names (`IsDNS1123Subdomain` in
/// k8s.io/apimachinery): at most 253 characters in all, dot-separated parts each of the label
/// pattern, with no limit per part.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns1123_part)
}

fn is_dns1123_part(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn secret_name(name: &str, field: &str, out: &mut Vec<Problem>) {
    let valid = is_dns1123_subdomain(name);
    if !valid {
        out.push(Problem::new(
            field,
            format!(
                "\"{name}\" is not a valid Secret name: use lowercase letters, digits, '-' and '.'"
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each selector requirement is checked as kube-apiserver checks it, with the field path;
    /// a selector without problems converts to the `Selector` the controller matches with.
    #[test]
    fn cluster_account_selectors() {
        let spec = |selectors: serde_json::Value| -> ClusterAccountSpec {
            let mut spec = selectors;
            spec["credentials"] = serde_json::json!({"secretRef": {"name": "mt"}});
            serde_json::from_value(spec).unwrap()
        };
        let expression = |op: &str, values: Option<&[&str]>| {
            let mut e = serde_json::json!({"key": "team", "operator": op});
            if let Some(v) = values {
                e["values"] = serde_json::json!(v);
            }
            e
        };
        let fields = |s: &ClusterAccountSpec| -> Vec<String> {
            cluster_account(s).into_iter().map(|p| p.field).collect()
        };
        let valid = spec(serde_json::json!({
            "namespaceSelector": {"matchLabels": {"tenant": "true"}, "matchExpressions": [
                expression("In", Some(&["a"])), expression("NotIn", Some(&["b"])),
                expression("Exists", None), expression("DoesNotExist", Some(&[])),
            ]},
        }));
        assert_eq!(fields(&valid), Vec::<String>::new());
        let selector = valid.namespace_selector.clone().unwrap();
        assert!(kube::core::Selector::try_from(selector).is_ok());

        let invalid = spec(serde_json::json!({
            "namespaceSelector": {"matchExpressions": [
                expression("In", Some(&["a"])), expression("Near", Some(&["a"])),
            ]},
            "adoptionNamespaceSelector": {"matchExpressions": [
                expression("NotIn", Some(&[])), expression("Exists", Some(&["a"])),
            ]},
        }));
        let problems = cluster_account(&invalid);
        assert_eq!(
            fields(&invalid),
            [
                "spec.namespaceSelector.matchExpressions[1].operator",
                "spec.adoptionNamespaceSelector.matchExpressions[0].values",
                "spec.adoptionNamespaceSelector.matchExpressions[1].values",
            ]
        );
        assert!(problems[0].message.contains("\"Near\""), "{}", problems[0]);
        assert!(problems[1].message.contains("NotIn"), "{}", problems[1]);
    }

    /// Keys and values as kube-apiserver accepts and refuses them.
    #[test]
    fn keys_and_values_follow_the_api_server() {
        for ok in [
            "app",
            "app.kubernetes.io/name",
            "a_b.c-d",
            "mailtarget.co/external-id",
        ] {
            assert!(is_qualified_name(ok), "{ok}");
        }
        for bad in [
            "",
            "bad key!",
            "a/b/c",
            "-a",
            "a-",
            "/a",
            "Upper.Case/x",
            &"n".repeat(64),
        ] {
            assert!(!is_qualified_name(bad), "{bad}");
        }
        assert!(is_label_value("") && is_label_value("v1.2_x"));
        assert!(!is_label_value("v a l") && !is_label_value(&"v".repeat(64)));
    }

    /// The first problems are spelled out and the rest counted.
    #[test]
    fn describe_counts_what_it_leaves_out() {
        let problems = |n: usize| -> Vec<Problem> {
            (0..n)
                .map(|i| Problem::new(format!("spec.allowedIps[{i}]"), "not an IP address"))
                .collect()
        };
        assert_eq!(
            describe(&problems(2)),
            "spec.allowedIps[0]: not an IP address; spec.allowedIps[1]: not an IP address"
        );
        let five = describe(&problems(5));
        assert_eq!(
            describe(&problems(6)),
            format!("{five}; and 1 more problem")
        );
        let many = describe(&problems(100));
        assert_eq!(many, format!("{five}; and 95 more problems"));
    }

    /// Domains that the service would reject, or that are not what the user meant, are refused.
    #[test]
    fn domain_table() {
        for ok in [
            "example.com",
            "mail.example.co.id",
            "xn--bcher-kva.example",
            "a-b.example.com",
        ] {
            assert!(check_domain(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "localhost",
            "Example.com",
            "bücher.example",
            "-a.example.com",
            "a..example.com",
            "example.com.",
            "10.0.0.1",
            "example.123",
            &format!("{}.com", "a".repeat(64)),
        ] {
            assert!(check_domain(bad).is_err(), "{bad}");
        }
    }

    /// An external-id annotation must be a positive integer.
    #[test]
    fn external_id_must_be_positive_integer() {
        let mut a = std::collections::BTreeMap::new();
        assert_eq!(external_id(Some(&a)), Ok(None));
        a.insert(ANNOTATION_EXTERNAL_ID.to_string(), "42".to_string());
        assert_eq!(external_id(Some(&a)), Ok(Some(42)));
        for bad in ["-1", "0", "abc", ""] {
            a.insert(ANNOTATION_EXTERNAL_ID.to_string(), bad.to_string());
            assert!(external_id(Some(&a)).is_err(), "{bad}");
        }
    }
}
