//! Label selectors (`=`, `==`, `!=`, `in`, `notin`, `key`, `!key`) and field selectors
//! (`metadata.name`, `metadata.namespace`, and a few per-kind fields) as in Kubernetes "Labels and
//! Selectors" and "Field Selectors". Parse errors become 400 BadRequest answers.

use serde_json::Value;

use crate::resources::{Builtin, ResourceType};
use crate::status::ApiError;

#[derive(Clone, Debug, PartialEq)]
enum Requirement {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LabelSelector {
    reqs: Vec<Requirement>,
}

fn split_top_level(s: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c)
            }
            ')' => {
                depth -= 1;
                cur.push(c)
            }
            ',' if depth == 0 => parts.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    parts.push(cur);
    parts
}

fn parse_set(s: &str) -> Option<Vec<String>> {
    let inner = s.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

fn check_key(k: &str, whole: &str) -> Result<String, ApiError> {
    let k = k.trim();
    if k.is_empty() || !crate::names::is_qualified_name(k) {
        return Err(ApiError::bad_request(format!(
            "unable to parse requirement: invalid label key \"{k}\" in selector \"{whole}\""
        )));
    }
    Ok(k.to_string())
}

impl LabelSelector {
    /// Parses the `labelSelector` query parameter.
    pub fn parse(s: &str) -> Result<LabelSelector, ApiError> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(LabelSelector { reqs });
        }
        for part in split_top_level(s) {
            let p = part.trim();
            if p.is_empty() {
                continue;
            }
            let r = if let Some(k) = p.strip_prefix('!') {
                Requirement::NotExists(check_key(k, s)?)
            } else if let Some((k, v)) = p.split_once("!=") {
                Requirement::NotEq(check_key(k, s)?, v.trim().to_string())
            } else if let Some((k, v)) = p.split_once("==") {
                Requirement::Eq(check_key(k, s)?, v.trim().to_string())
            } else if let Some((k, v)) = p.split_once('=') {
                Requirement::Eq(check_key(k, s)?, v.trim().to_string())
            } else if let Some(idx) = p.find(" notin ") {
                let set = parse_set(&p[idx + 7..]).ok_or_else(|| bad_set(s))?;
                Requirement::NotIn(check_key(&p[..idx], s)?, set)
            } else if let Some(idx) = p.find(" in ") {
                let set = parse_set(&p[idx + 4..]).ok_or_else(|| bad_set(s))?;
                Requirement::In(check_key(&p[..idx], s)?, set)
            } else if p.contains(['(', ')', '<', '>', ' ']) {
                return Err(ApiError::bad_request(format!(
                    "unable to parse requirement: not implemented by the test API server or invalid selector \"{s}\""
                )));
            } else {
                Requirement::Exists(check_key(p, s)?)
            };
            reqs.push(r);
        }
        Ok(LabelSelector { reqs })
    }

    /// Whether an object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj["metadata"]["labels"].as_object();
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(|v| v.as_str());
        self.reqs.iter().all(|r| match r {
            Requirement::Eq(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEq(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::NotExists(k) => get(k).is_none(),
        })
    }
}

fn bad_set(s: &str) -> ApiError {
    ApiError::bad_request(format!(
        "unable to parse requirement: found '', expected: '(' in selector \"{s}\""
    ))
}

/// A parsed field selector (`field=value`, `field==value`, `field!=value`, comma-separated).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldSelector {
    reqs: Vec<(String, bool, String)>,
}

fn supported_fields(rt: &ResourceType) -> &'static [&'static str] {
    match rt.builtin() {
        Some(Builtin::Secret) => &["metadata.name", "metadata.namespace", "type"],
        Some(Builtin::Namespace) => &["metadata.name", "metadata.namespace", "status.phase"],
        Some(Builtin::CoreEvent) => &[
            "metadata.name",
            "metadata.namespace",
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        _ => &["metadata.name", "metadata.namespace"],
    }
}

fn field_value(obj: &Value, field: &str) -> String {
    if field == "source" {
        return obj["source"]["component"]
            .as_str()
            .unwrap_or_default()
            .to_string();
    }
    let mut cur = obj;
    for part in field.split('.') {
        cur = &cur[part];
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

impl FieldSelector {
    /// Parses the `fieldSelector` query parameter for resource `rt`; fields the resource does not
    /// support are refused as kube-apiserver refuses them (`field label not supported`).
    pub fn parse(s: &str, rt: &ResourceType) -> Result<FieldSelector, ApiError> {
        let mut reqs = Vec::new();
        for part in s.split(',') {
            let p = part.trim();
            if p.is_empty() {
                continue;
            }
            let (f, eq, v) = if let Some((f, v)) = p.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = p.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = p.split_once('=') {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{p}'"
                )));
            };
            let f = f.trim();
            if !supported_fields(rt).contains(&f) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {f}"
                )));
            }
            reqs.push((f.to_string(), eq, v.trim().to_string()));
        }
        Ok(FieldSelector { reqs })
    }

    /// Whether the object satisfies every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        self.reqs
            .iter()
            .all(|(f, eq, v)| (field_value(obj, f) == *v) == *eq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns", "labels": labels}})
    }

    #[test]
    fn label_operators() {
        let o = obj(json!({"app": "web", "tier": "front"}));
        for (sel, want) in [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app in (web,api)", true),
            ("app notin (web)", false),
            ("tier", true),
            ("!tier", false),
            ("missing", false),
            ("!missing", true),
            ("app=web,tier in (back)", false),
            ("", true),
        ] {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&o),
                want,
                "{sel}"
            );
        }
        assert!(LabelSelector::parse("a b c").is_err());
    }

    #[test]
    fn field_selectors() {
        let r = Registry::new();
        let cm = r.lookup("", "v1", "configmaps").unwrap();
        let o = obj(json!({}));
        assert!(
            FieldSelector::parse("metadata.name=a", cm)
                .unwrap()
                .matches(&o)
        );
        assert!(
            !FieldSelector::parse("metadata.name!=a", cm)
                .unwrap()
                .matches(&o)
        );
        assert!(
            FieldSelector::parse("metadata.namespace==ns", cm)
                .unwrap()
                .matches(&o)
        );
        let err = FieldSelector::parse("spec.x=1", cm).unwrap_err();
        assert_eq!(err.code, 400);
        assert!(err.message.contains("field label not supported: spec.x"));
    }
}
