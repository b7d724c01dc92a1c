//! The checks kube-apiserver makes of an object's `metadata` (`ValidateObjectMeta` in
//! k8s.io/apimachinery), made before any call so that a manifest the API server would refuse
//! is refused here too, every problem at once: `name` (required, a DNS-1123 subdomain),
//! `namespace` (a DNS-1123 label), `labels` (qualified-name keys, label values), `annotations`
//! (qualified-name keys, string values), and no field ObjectMeta lacks, as `kubectl apply`
//! refuses one under its default `--validate=strict` (a field of `spec` indented under
//! `metadata` by mistake would otherwise be dropped without a word).

use serde_json::Value;

use super::read::{quoted, shown};
use super::schema_check::Violation;
use crate::engine::validate::{
    is_dns1123_label, is_dns1123_subdomain, is_label_value, is_qualified_name, not_a_key,
    not_a_label_value,
};
use crate::text::{MAX_VALUE_CHARS, printable};

/// The fields of ObjectMeta (k8s.io/apimachinery `meta/v1`).
const FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Every problem of `doc`'s `metadata` (field path and message).
pub(super) fn problems(doc: &Value) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut problem = |field: String, message: String| out.push(Violation { field, message });
    let metadata = doc.get("metadata").and_then(Value::as_object);
    match metadata.and_then(|m| m.get("name")).and_then(Value::as_str) {
        None => problem(
            "metadata.name".into(),
            "required: give the resource a name".into(),
        ),
        Some(name) if !is_dns1123_subdomain(name) => problem(
            "metadata.name".into(),
            format!(
                "{} is not a valid name: use at most 253 lowercase letters, digits, '-' and '.', starting and ending with a letter or digit",
                quoted(name)
            ),
        ),
        Some(_) => {}
    }
    let Some(metadata) = metadata else {
        return out;
    };
    if let Some(ns) = metadata.get("namespace") {
        let ns = ns.as_str().unwrap_or_default();
        if !is_dns1123_label(ns) {
            problem(
                "metadata.namespace".into(),
                format!(
                    "{} is not a valid namespace: use at most 63 lowercase letters, digits and '-'",
                    quoted(ns)
                ),
            );
        }
    }
    for field in metadata.keys().filter(|f| !FIELDS.contains(&f.as_str())) {
        problem(
            format!("metadata.{}", printable(field, MAX_VALUE_CHARS)),
            format!(
                "unknown field {} (metadata holds name, namespace, labels and annotations; is a field of spec indented under metadata?)",
                quoted(field)
            ),
        );
    }
    for (map, is_label) in [("labels", true), ("annotations", false)] {
        let Some(entries) = metadata.get(map).filter(|v| !v.is_null()) else {
            continue;
        };
        let Some(entries) = entries.as_object() else {
            problem(
                format!("metadata.{map}"),
                "must be a mapping of strings to strings".into(),
            );
            continue;
        };
        let kind = if is_label { "label" } else { "annotation" };
        for (key, value) in entries {
            // kube-apiserver checks an annotation key in lower case (`ValidateAnnotations`).
            let checked = if is_label {
                key.clone()
            } else {
                key.to_lowercase()
            };
            if !is_qualified_name(&checked) {
                problem(format!("metadata.{map}"), not_a_key(key, kind));
            }
            let field = format!("metadata.{map}[{}]", printable(key, MAX_VALUE_CHARS));
            match value.as_str() {
                None => {
                    let value = shown(&value.to_string());
                    problem(field, format!("{value} is not a string: quote it"));
                }
                Some(v) if is_label && !is_label_value(v) => problem(field, not_a_label_value(v)),
                Some(_) => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    /// An annotation key is checked in lower case, as kube-apiserver checks it: an upper-case
    /// prefix is refused in a label key only.
    #[test]
    fn an_annotation_key_is_checked_in_lower_case() {
        let doc = |map: &str| serde_json::json!({"metadata": {"name": "x", map: {"Example.com/foo": "v"}}});
        assert!(super::problems(&doc("annotations")).is_empty());
        let refused = super::problems(&doc("labels"));
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].field, "metadata.labels");
    }
}
