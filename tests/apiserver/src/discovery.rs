//! Legacy (unaggregated) discovery documents: `/version`, `/api`, `/api/v1`, `/apis`,
//! `/apis/GROUP`, `/apis/GROUP/VERSION` (Kubernetes API concepts, "Discovery API"). Aggregated
//! discovery is not offered: the server answers plain `application/json`, which kubectl and
//! kube-rs read as the legacy format.

use serde_json::{Value, json};

use crate::resources::{Registry, verbs};

/// The reported server version: 1.32, so kubectl's version dispatcher runs kubectl 1.32.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.0",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2024-12-11T00:00:00Z",
        "goVersion": "go1.23.4",
        "compiler": "gc",
        "platform": "linux/amd64",
        "emulatedBy": "mailtarget-test-apiserver"
    })
}

/// `/api`: APIVersions.
pub fn api_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]
    })
}

fn group_json(group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({
        "name": group,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/apis`: APIGroupList.
pub fn api_group_list(reg: &Registry) -> Value {
    let groups: Vec<Value> = reg
        .groups()
        .iter()
        .map(|(g, vs)| group_json(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/GROUP`: APIGroup, or `None` when the group is not served.
pub fn api_group(reg: &Registry, group: &str) -> Option<Value> {
    let (g, vs) = reg.groups().into_iter().find(|(g, _)| g == group)?;
    let mut v = group_json(&g, &vs);
    v["kind"] = json!("APIGroup");
    v["apiVersion"] = json!("v1");
    Some(v)
}

/// `/api/v1` or `/apis/GROUP/VERSION`: APIResourceList, or `None` when nothing is served there.
pub fn api_resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let types = reg.in_group_version(group, version);
    if types.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for rt in types {
        let mut r = json!({
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": verbs(),
        });
        if !rt.short_names.is_empty() {
            r["shortNames"] = json!(rt.short_names);
        }
        if !rt.categories.is_empty() {
            r["categories"] = json!(rt.categories);
        }
        resources.push(r);
        if rt.status_subresource() {
            resources.push(json!({
                "name": format!("{}/status", rt.plural),
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_resources_listed_with_short_names() {
        let r = Registry::new();
        let l = api_resource_list(&r, "", "v1").unwrap();
        let cm = l["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == "configmaps")
            .unwrap();
        assert_eq!(cm["shortNames"], json!(["cm"]));
        assert_eq!(cm["namespaced"], true);
        assert!(
            l["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x["name"] == "namespaces/status")
        );
        assert!(api_resource_list(&r, "nope.io", "v1").is_none());
    }

    #[test]
    fn groups_have_preferred_versions() {
        let r = Registry::new();
        let l = api_group_list(&r);
        let ext = l["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == "apiextensions.k8s.io")
            .unwrap();
        assert_eq!(
            ext["preferredVersion"]["groupVersion"],
            "apiextensions.k8s.io/v1"
        );
    }
}
