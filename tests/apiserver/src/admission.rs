//! Admission of a candidate object before it is stored: unknown-field handling per
//! `fieldValidation` (Strict → 400 `strict decoding error`, Warn → `Warning` header, Ignore →
//! silently pruned; Kubernetes API concepts, "Field validation"), decoding built-ins through their
//! typed form, CRD schema admission through [`crate::schema::admit`], and metadata checks.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::names;
use crate::resources::{Builtin, ResourceType};
use crate::schema::{self, FieldError};
use crate::status::{ApiError, Cause};

/// The `fieldValidation` query parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValidation {
    /// Unknown fields are an error (400).
    Strict,
    /// Unknown fields are dropped with a warning (the default).
    Warn,
    /// Unknown fields are dropped silently.
    Ignore,
}

impl FieldValidation {
    /// Parses the query value (absent → Warn).
    pub fn parse(v: Option<&str>) -> Result<FieldValidation, ApiError> {
        match v {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation: Unsupported value: \"{other}\": supported values: \"Ignore\", \"Strict\", \"Warn\""
            ))),
        }
    }
}

/// Paths (`spec.x`, `spec.items[0].y`) present with a non-null value in `before` and absent from
/// `after`.
pub fn removed_paths(before: &Value, after: &Value, prefix: &str, out: &mut Vec<String>) {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            for (k, bv) in b {
                if bv.is_null() {
                    continue;
                }
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                match a.get(k) {
                    None => out.push(p),
                    Some(av) => removed_paths(bv, av, &p, out),
                }
            }
        }
        (Value::Array(b), Value::Array(a)) if a.len() == b.len() => {
            for (i, (bv, av)) in b.iter().zip(a).enumerate() {
                removed_paths(bv, av, &format!("{prefix}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn remove_path(obj: &mut Value, path: &str) {
    // Paths come from removed_paths: dot-separated keys with optional [i] suffixes.
    let mut cur = obj;
    let parts: Vec<&str> = path.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        let (key, idxs) = match part.find('[') {
            Some(p) => (&part[..p], &part[p..]),
            None => (*part, ""),
        };
        let last = i + 1 == parts.len() && idxs.is_empty();
        if last {
            if let Some(m) = cur.as_object_mut() {
                m.remove(key);
            }
            return;
        }
        let Some(next) = cur.get_mut(key) else { return };
        cur = next;
        for idx in idxs.split(']').filter(|s| !s.is_empty()) {
            let Ok(n) = idx.trim_start_matches('[').parse::<usize>() else {
                return;
            };
            let Some(next) = cur.get_mut(n) else { return };
            cur = next;
        }
    }
}

fn typed_roundtrip<T: DeserializeOwned + Serialize>(v: &Value) -> Result<Value, String> {
    let t: T = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    serde_json::to_value(t).map_err(|e| e.to_string())
}

fn builtin_roundtrip(b: Builtin, v: &Value) -> Result<Value, String> {
    use k8s_openapi::api::{apps, coordination, core, networking, policy, rbac};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    match b {
        Builtin::Namespace => typed_roundtrip::<core::v1::Namespace>(v),
        Builtin::Secret => typed_roundtrip::<core::v1::Secret>(v),
        Builtin::ConfigMap => typed_roundtrip::<core::v1::ConfigMap>(v),
        Builtin::CoreEvent | Builtin::EventsEvent => typed_roundtrip::<core::v1::Event>(v),
        Builtin::Lease => typed_roundtrip::<coordination::v1::Lease>(v),
        Builtin::Crd => typed_roundtrip::<CustomResourceDefinition>(v),
        Builtin::Deployment => typed_roundtrip::<apps::v1::Deployment>(v),
        Builtin::ServiceAccount => typed_roundtrip::<core::v1::ServiceAccount>(v),
        Builtin::Service => typed_roundtrip::<core::v1::Service>(v),
        Builtin::ClusterRole => typed_roundtrip::<rbac::v1::ClusterRole>(v),
        Builtin::ClusterRoleBinding => typed_roundtrip::<rbac::v1::ClusterRoleBinding>(v),
        Builtin::Role => typed_roundtrip::<rbac::v1::Role>(v),
        Builtin::RoleBinding => typed_roundtrip::<rbac::v1::RoleBinding>(v),
        Builtin::PodDisruptionBudget => typed_roundtrip::<policy::v1::PodDisruptionBudget>(v),
        Builtin::NetworkPolicy => typed_roundtrip::<networking::v1::NetworkPolicy>(v),
    }
}

fn unknown_field_outcome(
    unknown: &[String],
    validation: FieldValidation,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    if unknown.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = unknown
        .iter()
        .map(|p| format!("unknown field {}", names::json_quote(p)))
        .collect();
    match validation {
        FieldValidation::Strict => Err(ApiError::bad_request(format!(
            "strict decoding error: {}",
            list.join(", ")
        ))),
        FieldValidation::Warn => {
            warnings.extend(list);
            Ok(())
        }
        FieldValidation::Ignore => Ok(()),
    }
}

const BODY_PREFIXES: [&str; 8] = [
    "Invalid value",
    "Required value",
    "Unsupported value",
    "Too long",
    "Forbidden",
    "Duplicate value",
    "Invalid type",
    "Too many",
];

/// A schema field error as a Status cause (message = error body without the field path).
pub fn cause_from_field_error(e: &FieldError) -> Cause {
    let msg = if BODY_PREFIXES.iter().any(|p| e.message.starts_with(p)) {
        e.message.clone()
    } else {
        let prefix = match e.reason_str() {
            "FieldValueRequired" => "Required value",
            "FieldValueNotSupported" => "Unsupported value",
            "FieldValueTooLong" => "Too long",
            "FieldValueForbidden" => "Forbidden",
            "FieldValueDuplicate" => "Duplicate value",
            "FieldValueTypeInvalid" => "Invalid value",
            _ => "Invalid value",
        };
        if e.message.is_empty() {
            prefix.to_string()
        } else {
            format!("{prefix}: {}", e.message)
        }
    };
    Cause {
        reason: e.reason_str().to_string(),
        message: msg,
        field: e.path.clone(),
    }
}

/// Admits `obj` (stored form, `apiVersion`/`kind` set) of `rt`: prunes unknown fields (per
/// `validation`), defaults and validates. `old` is the stored object for updates. Returns the
/// warnings to send back.
///
/// # Errors
/// 400 BadRequest for strict unknown fields or undecodable built-ins; 422 Invalid for schema,
/// CEL, metadata or CRD-definition violations.
pub fn admit(
    rt: &ResourceType,
    obj: &mut Value,
    old: Option<&Value>,
    validation: FieldValidation,
) -> Result<Vec<String>, ApiError> {
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut warnings = Vec::new();
    let mut unknown = Vec::new();

    // metadata: keep ObjectMeta fields only.
    let meta = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let typed_meta =
        typed_roundtrip::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>(&meta)
            .map_err(|e| ApiError::bad_request(format!("metadata: {e}")))?;
    removed_paths(&meta, &typed_meta, "metadata", &mut unknown);

    let mut schema_result: Option<Result<Value, Vec<FieldError>>> = None;
    match rt.builtin() {
        Some(b) => {
            let typed = builtin_roundtrip(b, obj).map_err(|e| {
                ApiError::bad_request(format!(
                    "{} in body is invalid: {e}",
                    crate::status::qualified_kind(rt)
                ))
            })?;
            let mut removed = Vec::new();
            removed_paths(obj, &typed, "", &mut removed);
            unknown.extend(removed.into_iter().filter(|p| !p.starts_with("metadata.")));
        }
        None => {
            if let Some(s) = rt.custom().and_then(|c| c.schema.as_ref()) {
                let mut pruned_unknown = schema::unknown_fields(s, obj);
                pruned_unknown.retain(|p| !p.starts_with("metadata"));
                unknown.extend(pruned_unknown);
                let mut candidate = obj.clone();
                let r = schema::admit(s, &mut candidate, old);
                // The root's apiVersion, kind and metadata are never the schema's business.
                for k in ["apiVersion", "kind", "metadata"] {
                    if let Some(v) = obj.get(k) {
                        candidate[k] = v.clone();
                    }
                }
                schema_result = Some(r.map(|_| candidate));
            }
        }
    }
    unknown.sort();
    unknown.dedup();
    unknown_field_outcome(&unknown, validation, &mut warnings)?;
    for p in &unknown {
        remove_path(obj, p);
    }

    let mut causes: Vec<Cause> = names::validate_labels_and_annotations(obj);
    match schema_result {
        Some(Ok(admitted)) => {
            let meta = obj["metadata"].clone();
            *obj = admitted;
            obj["metadata"] = meta;
        }
        Some(Err(errs)) => causes.extend(errs.iter().map(cause_from_field_error)),
        None => {}
    }
    if rt.builtin() == Some(Builtin::Crd) {
        causes.extend(crate::crd::validate(obj, old));
    }
    if matches!(
        rt.builtin(),
        Some(Builtin::CoreEvent | Builtin::EventsEvent)
    ) {
        causes.extend(event_limits(obj));
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(rt, &name, causes));
    }
    Ok(warnings)
}

/// kube-apiserver's length limits of an Event that has `eventTime` (every events.k8s.io/v1
/// Event, and a core/v1 Event written with one): `reportingInstance`, `action` and `reason` at
/// most 128 bytes, the note at most 1024 bytes, each violation a `FieldValueInvalid` cause
/// `Invalid value: "": can have at most N characters` on the internal field name (`message` for
/// the note), as `legacyValidateEvent` in k8s.io/kubernetes `pkg/apis/core/validation/events.go`
/// reports them (`ReportingInstanceLengthLimit`, `ActionLengthLimit`, `ReasonLengthLimit`,
/// `NoteLengthLimit`; Go's `len`, so bytes). `obj` is the stored core/v1 form.
fn event_limits(obj: &Value) -> Vec<Cause> {
    if obj.get("eventTime").is_none_or(Value::is_null) {
        return Vec::new();
    }
    [
        ("reportingInstance", 128),
        ("action", 128),
        ("reason", 128),
        ("message", 1024),
    ]
    .into_iter()
    .filter(|(field, limit)| obj[*field].as_str().is_some_and(|v| v.len() > *limit))
    .map(|(field, limit)| Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: \"\": can have at most {limit} characters"),
        field: field.into(),
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;

    #[test]
    fn removed_paths_reports_dropped_keys() {
        let before = json!({"spec": {"a": 1, "b": {"c": 2}, "l": [{"x": 1, "y": 2}]}, "n": null});
        let after = json!({"spec": {"a": 1, "b": {}, "l": [{"x": 1}]}});
        let mut out = Vec::new();
        removed_paths(&before, &after, "", &mut out);
        assert_eq!(out, vec!["spec.b.c", "spec.l[0].y"]);
        let mut v = before.clone();
        remove_path(&mut v, "spec.l[0].y");
        remove_path(&mut v, "spec.b.c");
        assert_eq!(v["spec"]["l"], json!([{"x": 1}]));
        assert_eq!(v["spec"]["b"], json!({}));
    }

    #[test]
    fn strict_rejects_unknown_builtin_fields() {
        let r = Registry::new();
        let cm = r.lookup("", "v1", "configmaps").unwrap();
        let mut o = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "bogus": 1}, "data": {"k": "v"}, "extra": true});
        let e = admit(cm, &mut o.clone(), None, FieldValidation::Strict).unwrap_err();
        assert_eq!(e.code, 400);
        assert!(
            e.message.contains("unknown field \"extra\""),
            "{}",
            e.message
        );
        assert!(
            e.message.contains("unknown field \"metadata.bogus\""),
            "{}",
            e.message
        );
        let w = admit(cm, &mut o, None, FieldValidation::Warn).unwrap();
        assert_eq!(w.len(), 2);
        assert!(o.get("extra").is_none());
        assert_eq!(o["data"]["k"], "v");
    }

    #[test]
    fn bad_labels_are_invalid() {
        let r = Registry::new();
        let cm = r.lookup("", "v1", "configmaps").unwrap();
        let mut o = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "labels": {"k": "not valid"}}});
        let e = admit(cm, &mut o, None, FieldValidation::Strict).unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            e.message
                .starts_with("ConfigMap \"a\" is invalid: metadata.labels: Invalid value")
        );
    }
}
