//! Server-side printing: `meta.k8s.io/v1` Table answers for `Accept: application/json;as=Table;
//! v=v1;g=meta.k8s.io` (Kubernetes API concepts, "Receiving resources as Tables"). Custom resources
//! get a Name column and their CRD's `additionalPrinterColumns` (or Name and Age when the CRD has
//! none, as kube-apiserver does); built-ins get the columns kubectl users know.

use jsonpath_rust::JsonPath;
use serde_json::{Value, json};

use crate::convert::partial_metadata;
use crate::resources::{Builtin, ResourceType};

fn col(name: &str, ty: &str, format: &str, description: &str) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": description, "priority": 0})
}

fn name_col() -> Value {
    col(
        "Name",
        "string",
        "name",
        "Name must be unique within a namespace. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
    )
}

fn age_col() -> Value {
    col(
        "Age",
        "string",
        "",
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
    )
}

/// The column definitions served for `rt`.
pub fn column_definitions(rt: &ResourceType) -> Vec<Value> {
    match rt.builtin() {
        Some(Builtin::Namespace) => vec![
            name_col(),
            col("Status", "string", "", "The status of the namespace"),
            age_col(),
        ],
        Some(Builtin::Secret) => vec![
            name_col(),
            col("Type", "string", "", "The type of the secret"),
            col("Data", "string", "", "The number of data entries"),
            age_col(),
        ],
        Some(Builtin::ConfigMap) => vec![
            name_col(),
            col("Data", "string", "", "The number of data entries"),
            age_col(),
        ],
        Some(Builtin::Lease) => vec![
            name_col(),
            col("Holder", "string", "", "The holder of the lease"),
            age_col(),
        ],
        Some(Builtin::Crd) => vec![
            name_col(),
            col("Created At", "date", "", "The creation time"),
        ],
        Some(Builtin::Deployment) => vec![
            name_col(),
            col("Ready", "string", "", "Number of the pod with ready state"),
            col(
                "Up-to-date",
                "string",
                "",
                "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
            ),
            col(
                "Available",
                "string",
                "",
                "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
            ),
            age_col(),
        ],
        Some(Builtin::ServiceAccount) => vec![
            name_col(),
            col(
                "Secrets",
                "string",
                "",
                "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
            ),
            age_col(),
        ],
        Some(Builtin::Service) => vec![
            name_col(),
            col("Type", "string", "", "The type of the service"),
            col("Cluster-IP", "string", "", "The cluster IP of the service"),
            col(
                "External-IP",
                "string",
                "",
                "The external IPs of the service",
            ),
            col("Port(s)", "string", "", "The ports of the service"),
            age_col(),
        ],
        Some(Builtin::ClusterRole) | Some(Builtin::Role) => vec![
            name_col(),
            col("Created At", "date", "", "The creation time"),
        ],
        Some(Builtin::ClusterRoleBinding) | Some(Builtin::RoleBinding) => vec![
            name_col(),
            col("Role", "string", "", "The role referenced by the binding"),
            age_col(),
        ],
        Some(Builtin::NetworkPolicy) => vec![
            name_col(),
            col(
                "Pod-Selector",
                "string",
                "",
                "Selects the pods to which this NetworkPolicy object applies.",
            ),
            age_col(),
        ],
        Some(Builtin::PodDisruptionBudget) => vec![
            name_col(),
            col(
                "Min Available",
                "string",
                "",
                "The minimum number of pods that must be available",
            ),
            col(
                "Max Unavailable",
                "string",
                "",
                "The maximum number of pods that may be unavailable",
            ),
            col(
                "Allowed Disruptions",
                "integer",
                "",
                "Calculated number of pods that may be disrupted at this time",
            ),
            age_col(),
        ],
        Some(Builtin::CoreEvent) | Some(Builtin::EventsEvent) => vec![
            col("Last Seen", "string", "", "Time since the last occurrence"),
            col("Type", "string", "", "Event type"),
            col("Reason", "string", "", "Event reason"),
            col("Object", "string", "", "The object this event is about"),
            col("Message", "string", "", "Event message"),
        ],
        None => {
            let cols = rt
                .custom()
                .map(|c| c.printer_columns.clone())
                .unwrap_or_default();
            if cols.is_empty() {
                return vec![name_col(), age_col()];
            }
            let mut out = vec![name_col()];
            for c in cols {
                out.push(json!({
                    "name": c["name"].as_str().unwrap_or_default(),
                    "type": c["type"].as_str().unwrap_or("string"),
                    "format": c["format"].as_str().unwrap_or_default(),
                    "description": c["description"].as_str().unwrap_or_default(),
                    "priority": c["priority"].as_i64().unwrap_or(0),
                }));
            }
            out
        }
    }
}

/// kube's `duration.HumanDuration`: `5s`, `3m20s`, `15m`, `2h5m`, `3d4h`, ...
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{}h", hours / 24, h)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{}d", hours / 24 / 365, dy)
        };
    }
    format!("{}y", hours / 24 / 365)
}

fn age_of(ts: Option<&str>) -> Value {
    let Some(ts) = ts else {
        return json!("<unknown>");
    };
    match chrono::DateTime::parse_from_rfc3339(ts) {
        Ok(t) => json!(human_duration(
            (chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_seconds()
        )),
        Err(_) => json!("<unknown>"),
    }
}

/// Evaluates a CRD printer column `jsonPath` (`.spec.x`, `.status.conditions[?(@.type=="Ready")]
/// .status`) against an object; the first result, if any.
pub fn eval_json_path(obj: &Value, path: &str) -> Option<Value> {
    let p = path.trim();
    let p = p
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .unwrap_or(p)
        .trim();
    let expr = if p.starts_with('$') {
        p.to_string()
    } else if p.starts_with('.') || p.starts_with('[') {
        format!("${p}")
    } else {
        format!("$.{p}")
    };
    let found = obj.query(&expr).ok()?;
    found.first().map(|v| (*v).clone())
}

fn cell_for(ty: &str, v: Option<Value>) -> Value {
    let Some(v) = v else { return Value::Null };
    match ty {
        "integer" => v.as_f64().map(|f| json!(f as i64)).unwrap_or(Value::Null),
        "number" => v.as_f64().map(|f| json!(f)).unwrap_or(Value::Null),
        "boolean" => v.as_bool().map(|b| json!(b)).unwrap_or(Value::Null),
        "date" => match v.as_str() {
            Some(s) => age_of(Some(s)),
            None => Value::Null,
        },
        _ => match v {
            Value::String(s) => json!(s),
            Value::Null => Value::Null,
            other => json!(other.to_string()),
        },
    }
}

/// kubectl's PORT(S) cell: `80/TCP,443/TCP` (`<none>` without ports).
fn service_ports(ports: &Value) -> String {
    let list: Vec<String> = ports
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            format!(
                "{}/{}",
                p["port"].as_i64().unwrap_or(0),
                p["protocol"].as_str().unwrap_or("TCP")
            )
        })
        .collect();
    if list.is_empty() {
        "<none>".into()
    } else {
        list.join(",")
    }
}

/// A label selector as kubectl prints it (apimachinery's `FormatLabelSelector`): requirements
/// sorted by key, `k=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, joined by commas; `<none>`
/// for an empty selector.
fn format_label_selector(selector: &Value) -> String {
    let mut requirements: Vec<(String, String)> = Vec::new();
    for (key, value) in selector["matchLabels"].as_object().into_iter().flatten() {
        let value = value.as_str().unwrap_or_default();
        requirements.push((key.clone(), format!("{key}={value}")));
    }
    for expression in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = expression["key"].as_str().unwrap_or_default().to_string();
        let mut values: Vec<&str> = expression["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        let text = match expression["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.clone(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other}"),
        };
        requirements.push((key, text));
    }
    if requirements.is_empty() {
        return "<none>".to_string();
    }
    requirements.sort();
    requirements
        .into_iter()
        .map(|(_, text)| text)
        .collect::<Vec<_>>()
        .join(",")
}

fn count(v: &Value) -> usize {
    v.as_object().map(|m| m.len()).unwrap_or(0)
}

/// The cells of one row for an object (served form) of `rt`.
pub fn cells(rt: &ResourceType, obj: &Value) -> Vec<Value> {
    let name = json!(obj["metadata"]["name"].as_str().unwrap_or_default());
    let created = obj["metadata"]["creationTimestamp"].as_str();
    match rt.builtin() {
        Some(Builtin::Namespace) => vec![name, obj["status"]["phase"].clone(), age_of(created)],
        Some(Builtin::Secret) => vec![
            name,
            json!(obj["type"].as_str().unwrap_or("Opaque")),
            json!(count(&obj["data"])),
            age_of(created),
        ],
        Some(Builtin::ConfigMap) => vec![
            name,
            json!(count(&obj["data"]) + count(&obj["binaryData"])),
            age_of(created),
        ],
        Some(Builtin::Lease) => vec![name, obj["spec"]["holderIdentity"].clone(), age_of(created)],
        Some(Builtin::Crd) => vec![name, json!(created.unwrap_or_default())],
        Some(Builtin::Deployment) => {
            let n = |v: &Value| v.as_i64().unwrap_or(0);
            let st = &obj["status"];
            vec![
                name,
                json!(format!(
                    "{}/{}",
                    n(&st["readyReplicas"]),
                    obj["spec"]["replicas"].as_i64().unwrap_or(1)
                )),
                json!(n(&st["updatedReplicas"]).to_string()),
                json!(n(&st["availableReplicas"]).to_string()),
                age_of(created),
            ]
        }
        Some(Builtin::ServiceAccount) => vec![
            name,
            json!(
                obj["secrets"]
                    .as_array()
                    .map(Vec::len)
                    .unwrap_or(0)
                    .to_string()
            ),
            age_of(created),
        ],
        Some(Builtin::Service) => vec![
            name,
            json!(obj["spec"]["type"].as_str().unwrap_or("ClusterIP")),
            json!(obj["spec"]["clusterIP"].as_str().unwrap_or("<none>")),
            json!("<none>"),
            json!(service_ports(&obj["spec"]["ports"])),
            age_of(created),
        ],
        Some(Builtin::ClusterRole) | Some(Builtin::Role) => {
            vec![name, json!(created.unwrap_or_default())]
        }
        Some(Builtin::ClusterRoleBinding) | Some(Builtin::RoleBinding) => vec![
            name,
            json!(format!(
                "{}/{}",
                obj["roleRef"]["kind"].as_str().unwrap_or_default(),
                obj["roleRef"]["name"].as_str().unwrap_or_default()
            )),
            age_of(created),
        ],
        Some(Builtin::NetworkPolicy) => vec![
            name,
            json!(format_label_selector(&obj["spec"]["podSelector"])),
            age_of(created),
        ],
        Some(Builtin::PodDisruptionBudget) => {
            let shown = |v: &Value| match v {
                Value::Null => "N/A".to_string(),
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            vec![
                name,
                json!(shown(&obj["spec"]["minAvailable"])),
                json!(shown(&obj["spec"]["maxUnavailable"])),
                json!(obj["status"]["disruptionsAllowed"].as_i64().unwrap_or(0)),
                age_of(created),
            ]
        }
        Some(Builtin::CoreEvent) | Some(Builtin::EventsEvent) => {
            let regarding = if obj.get("regarding").is_some() {
                &obj["regarding"]
            } else {
                &obj["involvedObject"]
            };
            let last = obj["lastTimestamp"]
                .as_str()
                .or(obj["deprecatedLastTimestamp"].as_str())
                .or(obj["eventTime"].as_str())
                .or(created);
            let msg = obj
                .get("note")
                .or(obj.get("message"))
                .cloned()
                .unwrap_or(Value::Null);
            vec![
                age_of(last),
                obj["type"].clone(),
                obj["reason"].clone(),
                json!(format!(
                    "{}/{}",
                    regarding["kind"]
                        .as_str()
                        .unwrap_or_default()
                        .to_lowercase(),
                    regarding["name"].as_str().unwrap_or_default()
                )),
                msg,
            ]
        }
        None => {
            let cols = rt
                .custom()
                .map(|c| c.printer_columns.clone())
                .unwrap_or_default();
            if cols.is_empty() {
                return vec![name, age_of(created)];
            }
            let mut out = vec![name];
            for c in cols {
                let v = eval_json_path(obj, c["jsonPath"].as_str().unwrap_or_default());
                out.push(cell_for(c["type"].as_str().unwrap_or("string"), v));
            }
            out
        }
    }
}

/// A Table for a list of objects (served form). `rv` and `continue_token` go to the Table's
/// `metadata`.
pub fn table(rt: &ResourceType, objs: &[Value], rv: &str, continue_token: Option<&str>) -> Value {
    let rows: Vec<Value> = objs
        .iter()
        .map(|o| json!({"cells": cells(rt, o), "object": partial_metadata(o)}))
        .collect();
    let mut meta = json!({"resourceVersion": rv});
    if let Some(c) = continue_token {
        meta["continue"] = json!(c);
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": column_definitions(rt),
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;

    #[test]
    fn human_durations_match_kubernetes() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(119), "119s");
        assert_eq!(human_duration(200), "3m20s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(3 * 3600 + 300), "3h5m");
        assert_eq!(human_duration(10 * 3600), "10h");
        assert_eq!(human_duration(3 * 86400 + 3600), "3d1h");
        assert_eq!(human_duration(30 * 86400), "30d");
    }

    #[test]
    fn json_path_with_filter() {
        let o = json!({"status": {"conditions": [
            {"type": "Other", "status": "False"}, {"type": "Ready", "status": "True"}]},
            "spec": {"size": 3}});
        assert_eq!(
            eval_json_path(&o, ".status.conditions[?(@.type==\"Ready\")].status"),
            Some(json!("True"))
        );
        assert_eq!(eval_json_path(&o, ".spec.size"), Some(json!(3)));
        assert_eq!(eval_json_path(&o, ".spec.missing"), None);
    }

    #[test]
    fn custom_columns() {
        let mut r = Registry::new();
        r.set_crd(&json!({"metadata": {"name": "widgets.example.com"}, "spec": {
            "group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "additionalPrinterColumns": [
                {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                {"name": "Color", "type": "string", "jsonPath": ".spec.color"}]}]}}));
        let rt = r.lookup("example.com", "v1", "widgets").unwrap();
        let t = table(
            rt,
            &[json!({"metadata": {"name": "w"}, "spec": {"size": 2.0}})],
            "5",
            None,
        );
        let names: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, vec!["Name", "Size", "Color"]);
        assert_eq!(t["rows"][0]["cells"], json!(["w", 2, null]));
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    }
}
