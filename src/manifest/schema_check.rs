//! Validation of a manifest document against the CRD's `openAPIV3Schema`, as the API server
//! would do with `fieldValidation=Strict`: types, patterns, lengths, enums, ranges, and unknown
//! fields. The CRD schema is turned into JSON Schema once (OpenAPI's `nullable` becomes a `null`
//! type; objects with declared properties reject others) and checked with the `jsonschema` crate.

use std::collections::HashMap;
use std::sync::OnceLock;

use jsonschema::error::ValidationErrorKind;
use serde_json::{Value, json};

use crate::crd::generate::all_crds;
use crate::crd::schema::{HOSTNAME_PATTERN, IP_PATTERN, NAME_PATTERN};

/// One schema violation: the field path (`spec.allowedIps[0]`) and a message for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Violation {
    pub field: String,
    pub message: String,
}

fn validators() -> &'static HashMap<String, jsonschema::Validator> {
    static VALIDATORS: OnceLock<HashMap<String, jsonschema::Validator>> = OnceLock::new();
    VALIDATORS.get_or_init(|| {
        let mut map = HashMap::new();
        for crd in all_crds() {
            let kind = crd.spec.names.kind.clone();
            let Some(schema) = crd
                .spec
                .versions
                .first()
                .and_then(|v| v.schema.as_ref())
                .and_then(|s| s.open_api_v3_schema.as_ref())
            else {
                continue;
            };
            let Ok(mut schema) = serde_json::to_value(schema) else {
                continue;
            };
            to_json_schema(&mut schema);
            if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
                props.insert("apiVersion".into(), json!({"type": "string"}));
                props.insert("kind".into(), json!({"type": "string"}));
                props.insert("metadata".into(), json!({"type": "object"}));
            }
            // The generated schema is ours and valid; a failure here is a programming error that
            // the crate's tests catch, so the kind simply has no validator.
            if let Ok(v) = jsonschema::validator_for(&schema) {
                map.insert(kind, v);
            }
        }
        map
    })
}

/// Rewrites OpenAPI v3 schema keywords into JSON Schema ones, recursively.
fn to_json_schema(node: &mut Value) {
    let Some(obj) = node.as_object_mut() else {
        return;
    };
    if obj.remove("nullable") == Some(Value::Bool(true))
        && let Some(Value::String(t)) = obj.get("type").cloned()
    {
        obj.insert("type".into(), json!([t, "null"]));
    }
    // An integer's bounds are numbers in the CRD type (`minimum: 0.0`); whole ones are written
    // back as integers, so that messages say "minimum of 0".
    let integer =
        |t: &Value| t == "integer" || t.as_array().is_some_and(|a| a.contains(&json!("integer")));
    if obj.get("type").is_some_and(integer) {
        for bound in ["minimum", "maximum"] {
            if let Some(Value::Number(n)) = obj.get_mut(bound)
                && let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
            {
                *n = serde_json::Number::from(f as i64);
            }
        }
    }
    let preserve = obj.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if obj.contains_key("properties") && !obj.contains_key("additionalProperties") && !preserve {
        obj.insert("additionalProperties".into(), Value::Bool(false));
    }
    for (key, child) in obj.iter_mut() {
        match key.as_str() {
            "properties" => {
                if let Some(props) = child.as_object_mut() {
                    props.values_mut().for_each(to_json_schema);
                }
            }
            "items" | "additionalProperties" => to_json_schema(child),
            "allOf" | "anyOf" | "oneOf" => {
                if let Some(list) = child.as_array_mut() {
                    list.iter_mut().for_each(to_json_schema);
                }
            }
            _ => {}
        }
    }
}

/// JSON pointer `/spec/allowedIps/0` as a field path `spec.allowedIps[0]`.
pub(crate) fn field_path(pointer: &str) -> String {
    let mut out = String::new();
    for part in pointer.split('/').filter(|p| !p.is_empty()) {
        let part = part.replace("~1", "/").replace("~0", "~");
        if part.chars().all(|c| c.is_ascii_digit()) {
            out.push_str(&format!("[{part}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&part);
        }
    }
    out
}

fn describe(
    kind: &ValidationErrorKind,
    instance: &Value,
    fallback: String,
) -> (Option<String>, String) {
    match kind {
        ValidationErrorKind::Pattern { pattern } if pattern == IP_PATTERN => (
            None,
            format!(
                "{instance} is not an IP address (write one IPv4 or IPv6 address per entry; ranges and CIDR prefixes are not accepted)"
            ),
        ),
        ValidationErrorKind::Pattern { pattern } if pattern == HOSTNAME_PATTERN => (
            None,
            format!(
                "{instance} is not a valid domain name (lowercase labels of letters, digits and hyphens separated by dots, e.g. mail.example.com; write internationalised names in their xn-- form)"
            ),
        ),
        ValidationErrorKind::Pattern { pattern } if pattern == NAME_PATTERN => (
            None,
            format!(
                "{instance} has leading or trailing whitespace, which the service trims (the value would never match its object again), or a line break: remove it"
            ),
        ),
        ValidationErrorKind::AdditionalProperties { unexpected } => (
            unexpected.first().cloned(),
            format!(
                "unknown field{} {} (check the spelling against `kubectl explain` or the CRD reference)",
                if unexpected.len() == 1 { "" } else { "s" },
                unexpected
                    .iter()
                    .map(|u| format!("\"{u}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        _ => (None, fallback),
    }
}

/// Checks `doc` (a whole manifest document) against the schema of `kind`.
///
/// Returns every violation found; an empty list means the document is valid. A kind without a
/// validator returns no violations.
pub(crate) fn check(kind: &str, doc: &Value) -> Vec<Violation> {
    let Some(validator) = validators().get(kind) else {
        return Vec::new();
    };
    let mut out: Vec<Violation> = validator
        .iter_errors(doc)
        .map(|e| {
            let base = field_path(e.instance_path().as_str());
            let (child, message) = describe(e.kind(), e.instance(), e.to_string());
            let field = match child {
                Some(c) if base.is_empty() => c,
                Some(c) => format!("{base}.{c}"),
                None => base,
            };
            Violation { field, message }
        })
        .collect();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pointers become the field paths kubectl users know.
    #[test]
    fn pointer_to_field_path() {
        assert_eq!(field_path("/spec/allowedIps/0"), "spec.allowedIps[0]");
        assert_eq!(field_path(""), "");
    }

    /// Every kind has a validator built from its CRD.
    #[test]
    fn every_kind_has_a_validator() {
        for kind in ["SubAccount", "ApiKey", "SendingDomain"] {
            assert!(validators().contains_key(kind), "{kind}");
        }
    }

    /// A bad IP, an unknown field and a wrong type are each reported at their path.
    #[test]
    fn violations_name_the_field() {
        let doc = json!({
            "apiVersion": "mailtarget.co/v1alpha1", "kind": "ApiKey", "metadata": {"name": "k"},
            "spec": {"secretName": "s", "allowedIps": ["10.0.0.300"], "permisionIds": [1], "permissionIds": "x"}
        });
        let v = check("ApiKey", &doc);
        let fields: Vec<&str> = v.iter().map(|v| v.field.as_str()).collect();
        assert!(fields.contains(&"spec.allowedIps[0]"), "{v:?}");
        assert!(fields.contains(&"spec.permisionIds"), "{v:?}");
        assert!(fields.contains(&"spec.permissionIds"), "{v:?}");
        assert!(v.iter().any(|v| v.message.contains("not an IP address")));
    }
}
