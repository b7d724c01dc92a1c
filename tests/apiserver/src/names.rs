//! Object name and label validation as kube-apiserver applies it (Kubernetes "Object Names and
//! IDs": DNS-1123 subdomain and label names; "Labels and Selectors": syntax and character set).
//! Each function returns the error body (`Invalid value: ...: ...`) or `None` when valid.

use crate::status::Cause;

const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

fn is_label(s: &str) -> bool {
    s.len() <= 63 && is_part(s)
}

/// The pattern of one dot-separated part, `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, without the
/// label's 63-character limit: `IsDNS1123Subdomain` (k8s.io/apimachinery) limits only the
/// whole name.
fn is_part(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Whether `s` is a DNS-1123 subdomain (at most 253 characters in all, dot-separated parts
/// of the label pattern, no limit per part).
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_part)
}

/// Whether `s` is a DNS-1123 label (at most 63 characters, no dots).
pub fn is_dns1123_label(s: &str) -> bool {
    is_label(s)
}

fn invalid(field: &str, value: &str, msg: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {}: {}", json_quote(value), msg),
        field: field.into(),
    }
}

/// Quotes a string as Go's `%q` would for plain text.
pub fn json_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// Validates `metadata.name`: DNS-1123 label for namespaces, subdomain otherwise.
pub fn validate_name(name: &str, label_only: bool) -> Option<Cause> {
    if label_only {
        if !is_dns1123_label(name) {
            let mut msg = DNS1123_LABEL_MSG.to_string();
            if name.len() > 63 {
                msg = "must be no more than 63 characters".into();
            }
            return Some(invalid("metadata.name", name, &msg));
        }
    } else if !is_dns1123_subdomain(name) {
        let msg = if name.len() > 253 {
            "must be no more than 253 characters"
        } else {
            DNS1123_SUBDOMAIN_MSG
        };
        return Some(invalid("metadata.name", name, msg));
    }
    None
}

fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !s.is_empty()
        && s.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_' || *c == b'.')
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// Validates a label or annotation key: optional DNS-1123 subdomain prefix and `/`, then a name
/// of at most 63 alphanumerics, `-`, `_`, `.` starting and ending alphanumeric.
pub fn is_qualified_name(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => is_dns1123_subdomain(prefix) && is_qualified_name_part(name),
        None => is_qualified_name_part(key),
    }
}

/// Whether `v` is a valid label value (empty, or a qualified name part).
pub fn is_label_value(v: &str) -> bool {
    v.is_empty() || is_qualified_name_part(v)
}

/// Validates `metadata.labels` and annotation keys of an object; returns every violation.
pub fn validate_labels_and_annotations(obj: &serde_json::Value) -> Vec<Cause> {
    let mut out = Vec::new();
    if let Some(labels) = obj["metadata"]["labels"].as_object() {
        for (k, v) in labels {
            if !is_qualified_name(k) {
                out.push(invalid("metadata.labels", k, "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"));
            }
            match v.as_str() {
                Some(s) if is_label_value(s) => {}
                Some(s) => out.push(invalid("metadata.labels", s, "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")),
                None => out.push(invalid("metadata.labels", k, "label values must be strings")),
            }
        }
    }
    if let Some(ann) = obj["metadata"]["annotations"].as_object() {
        for (k, v) in ann {
            if !is_qualified_name(&k.to_ascii_lowercase()) {
                out.push(invalid("metadata.annotations", k, "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"));
            }
            if !v.is_string() {
                out.push(invalid(
                    "metadata.annotations",
                    k,
                    "annotation values must be strings",
                ));
            }
        }
    }
    out
}

/// Appends 5 random characters to a `generateName` prefix, like kube-apiserver (alphabet without
/// vowels and look-alike characters, prefix cut to keep the name within 63 characters).
pub fn generate_name(prefix: &str) -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut p = prefix.to_string();
    if p.len() > 58 {
        p.truncate(58);
    }
    let mut rng = rand::rng();
    for _ in 0..5 {
        let i = rng.random_range(0..ALPHABET.len());
        p.push(ALPHABET[i] as char);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(validate_name("web-1.example", false).is_none());
        assert!(validate_name("Bad_Name", false).is_some());
        assert!(validate_name("-x", false).is_some());
        assert!(validate_name("a.b", true).is_some());
        assert!(validate_name("ns-1", true).is_none());
        // IsDNS1123Subdomain (k8s.io/apimachinery) limits the whole name to 253 characters
        // and each part by its pattern only: a 100-character name without dots is valid.
        assert!(validate_name(&"n".repeat(100), false).is_none());
        assert!(validate_name(&"n".repeat(254), false).is_some());
        assert!(validate_name(&"n".repeat(64), true).is_some());
        let c = validate_name("Bad", false).unwrap();
        assert_eq!(c.field, "metadata.name");
        assert!(
            c.message
                .starts_with("Invalid value: \"Bad\": a lowercase RFC 1123 subdomain")
        );
    }

    #[test]
    fn labels() {
        assert!(is_qualified_name("app.kubernetes.io/name"));
        assert!(!is_qualified_name("-bad"));
        assert!(is_label_value(""));
        assert!(!is_label_value("has space"));
        let bad = serde_json::json!({"metadata": {"labels": {"ok": "fine", "k": "bad value"}}});
        assert_eq!(validate_labels_and_annotations(&bad).len(), 1);
    }

    #[test]
    fn generated_names_keep_prefix() {
        let n = generate_name("job-");
        assert!(n.starts_with("job-"));
        assert_eq!(n.len(), 9);
        assert!(is_dns1123_subdomain(&n));
    }
}
