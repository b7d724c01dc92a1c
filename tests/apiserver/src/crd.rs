//! CustomResourceDefinition handling (apiextensions.k8s.io/v1): defaults, the subset of
//! validation kube-apiserver applies that tests rely on, and the status the server maintains
//! (`NamesAccepted` and `Established` conditions, `acceptedNames`, `storedVersions`).

use serde_json::{Value, json};

use crate::status::Cause;
use crate::store::now_rfc3339;

/// Finalizer kube-apiserver puts on every CRD so its objects are deleted before the CRD goes.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// Fills defaults: `names.singular` (lowercase kind), `names.listKind` (`<Kind>List`),
/// `conversion.strategy` (`None`).
pub fn apply_defaults(crd: &mut Value) {
    let kind = crd["spec"]["names"]["kind"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if !crd["spec"]["names"].is_object() {
        return;
    }
    if crd["spec"]["names"]["singular"]
        .as_str()
        .unwrap_or_default()
        .is_empty()
    {
        crd["spec"]["names"]["singular"] = json!(kind.to_lowercase());
    }
    if crd["spec"]["names"]["listKind"]
        .as_str()
        .unwrap_or_default()
        .is_empty()
    {
        crd["spec"]["names"]["listKind"] = json!(format!("{kind}List"));
    }
    if crd["spec"].get("conversion").is_none() {
        crd["spec"]["conversion"] = json!({"strategy": "None"});
    }
}

fn required(field: &str) -> Cause {
    Cause {
        reason: "FieldValueRequired".into(),
        message: "Required value".into(),
        field: field.into(),
    }
}

fn invalid(field: &str, value: &Value, msg: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {value}: {msg}"),
        field: field.into(),
    }
}

/// Validates a CRD (and, for updates, the immutable parts against `old`).
pub fn validate(crd: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut out = Vec::new();
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let plural = spec["names"]["plural"].as_str().unwrap_or_default();
    if group.is_empty() {
        out.push(required("spec.group"));
    } else if !group.contains('.') {
        out.push(invalid(
            "spec.group",
            &spec["group"],
            "should be a domain with at least one dot",
        ));
    }
    if plural.is_empty() {
        out.push(required("spec.names.plural"));
    }
    if spec["names"]["kind"]
        .as_str()
        .unwrap_or_default()
        .is_empty()
    {
        out.push(required("spec.names.kind"));
    }
    let name = crd["metadata"]["name"].as_str().unwrap_or_default();
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        out.push(invalid(
            "metadata.name",
            &json!(name),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    match spec["scope"].as_str() {
        Some("Namespaced") | Some("Cluster") => {}
        Some(_) => out.push(Cause {
            reason: "FieldValueNotSupported".into(),
            message: format!(
                "Unsupported value: {}: supported values: \"Cluster\", \"Namespaced\"",
                spec["scope"]
            ),
            field: "spec.scope".into(),
        }),
        None => out.push(required("spec.scope")),
    }
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    if versions.is_empty() {
        out.push(Cause {
            reason: "FieldValueInvalid".into(),
            message:
                "Invalid value: \"null\": must have exactly one version marked as storage version"
                    .into(),
            field: "spec.versions".into(),
        });
    } else {
        let storage = versions
            .iter()
            .filter(|v| v["storage"].as_bool() == Some(true))
            .count();
        if storage != 1 {
            out.push(invalid(
                "spec.versions",
                &json!(
                    versions
                        .iter()
                        .map(|v| v["name"].clone())
                        .collect::<Vec<_>>()
                ),
                "must have exactly one version marked as storage version",
            ));
        }
        for (i, v) in versions.iter().enumerate() {
            if v["name"].as_str().unwrap_or_default().is_empty() {
                out.push(required(&format!("spec.versions[{i}].name")));
            }
            if v["schema"].get("openAPIV3Schema").is_none() {
                out.push(Cause {
                    reason: "FieldValueRequired".into(),
                    message: "Required value: schemas are required".into(),
                    field: format!("spec.versions[{i}].schema.openAPIV3Schema"),
                });
            }
        }
    }
    if let Some(old) = old {
        if old["spec"]["group"] != spec["group"] {
            out.push(invalid("spec.group", &spec["group"], "field is immutable"));
        }
        if old["spec"]["scope"] != spec["scope"] {
            out.push(invalid("spec.scope", &spec["scope"], "field is immutable"));
        }
    }
    out
}

/// The status the server reports for an accepted, established CRD.
pub fn established_status(crd: &Value, previous: Option<&Value>) -> Value {
    let now = now_rfc3339();
    let since = |t: &str| -> String {
        previous
            .and_then(|p| p["status"]["conditions"].as_array())
            .and_then(|cs| cs.iter().find(|c| c["type"] == t))
            .and_then(|c| c["lastTransitionTime"].as_str())
            .map(str::to_string)
            .unwrap_or_else(|| now.clone())
    };
    let mut stored: Vec<Value> = previous
        .and_then(|p| p["status"]["storedVersions"].as_array().cloned())
        .unwrap_or_default();
    for v in crd["spec"]["versions"].as_array().into_iter().flatten() {
        if v["storage"].as_bool() == Some(true) && !stored.contains(&v["name"]) {
            stored.push(v["name"].clone());
        }
    }
    json!({
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": since("NamesAccepted")},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": since("Established")},
        ],
        "acceptedNames": crd["spec"]["names"].clone(),
        "storedVersions": stored,
    })
}

/// Adds the Terminating condition while the CRD waits for its objects to go.
pub fn mark_terminating(crd: &mut Value) {
    let cond = json!({"type": "Terminating", "status": "True", "reason": "InstanceDeletionInProgress",
        "message": "CustomResource deletion is in progress", "lastTransitionTime": now_rfc3339()});
    if let Some(cs) = crd["status"]["conditions"].as_array_mut() {
        if !cs.iter().any(|c| c["type"] == "Terminating") {
            cs.push(cond);
        }
    } else {
        crd["status"]["conditions"] = json!([cond]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({"metadata": {"name": "widgets.example.com"}, "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object"}}}]}})
    }

    #[test]
    fn valid_crd_passes_and_gets_defaults() {
        let mut c = crd();
        apply_defaults(&mut c);
        assert!(validate(&c, None).is_empty());
        assert_eq!(c["spec"]["names"]["singular"], "widget");
        assert_eq!(c["spec"]["names"]["listKind"], "WidgetList");
        let s = established_status(&c, None);
        assert_eq!(s["conditions"][1]["type"], "Established");
        assert_eq!(s["storedVersions"], json!(["v1"]));
    }

    #[test]
    fn wrong_name_and_storage_are_rejected() {
        let mut c = crd();
        c["metadata"]["name"] = json!("other.example.com");
        c["spec"]["versions"][0]["storage"] = json!(false);
        let errs = validate(&c, None);
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, vec!["metadata.name", "spec.versions"]);
    }
}
