//! OpenAPI v3 documents, as far as kubectl needs them: the `/openapi/v3` index and one document
//! per group-version whose object paths have `patch`/`post` operations marked with
//! `x-kubernetes-group-version-kind` and a `fieldValidation` query parameter (so kubectl asks the
//! server to validate with `fieldValidation=Strict`). Strategic merge patch is never listed as a
//! request type, so kubectl falls back to its compiled-in types for built-ins and to JSON merge
//! patch for custom resources, as on a real cluster. `/openapi/v2` is not served (404).

use serde_json::{Map, Value, json};

use crate::resources::{Registry, ResourceType};

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: the index of per-group-version documents.
pub fn index(reg: &Registry) -> Value {
    let mut paths = Map::new();
    let mut seen: Vec<String> = Vec::new();
    for rt in reg.all() {
        let p = gv_path(&rt.group, &rt.version);
        if seen.contains(&p) {
            continue;
        }
        seen.push(p.clone());
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}")}),
        );
    }
    json!({ "paths": paths })
}

fn schema_name(rt: &ResourceType) -> String {
    let mut parts: Vec<&str> = if rt.group.is_empty() {
        vec!["io", "k8s", "api", "core"]
    } else {
        rt.group.split('.').rev().collect()
    };
    parts.push(&rt.version);
    parts.push(&rt.kind);
    parts.join(".")
}

fn operation(rt: &ResourceType, action: &str, with_body: bool) -> Value {
    let gvk = json!({"group": rt.group, "version": rt.version, "kind": rt.kind});
    let reference = json!({"$ref": format!("#/components/schemas/{}", schema_name(rt))});
    let q = |name: &str, desc: &str| json!({"name": name, "in": "query", "description": desc, "schema": {"type": "string", "uniqueItems": true}});
    let mut op = json!({
        "operationId": format!("{}{}", action, rt.kind),
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk,
        "parameters": [
            q("dryRun", "When present, indicates that modifications should not be persisted."),
            q("fieldManager", "fieldManager is a name associated with the actor or entity that is making these changes."),
            q("fieldValidation", "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values: Ignore, Warn, Strict."),
        ],
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": reference.clone()}}}},
    });
    if action == "patch" {
        op["parameters"]
            .as_array_mut()
            .expect("built above as an array")
            .push(json!({"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}}));
        op["requestBody"] = json!({"content": {
            "application/apply-patch+yaml": {"schema": {"type": "object"}},
            "application/json-patch+json": {"schema": {"type": "object"}},
            "application/merge-patch+json": {"schema": {"type": "object"}},
        }, "required": true});
    } else if with_body {
        op["requestBody"] =
            json!({"content": {"application/json": {"schema": reference}}, "required": true});
    }
    op
}

/// The document for one group-version (`api/v1` or `apis/G/V`), or `None` if not served.
pub fn group_version_doc(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let types = reg.in_group_version(group, version);
    if types.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let mut schemas = Map::new();
    let prefix = format!("/{}", gv_path(group, version));
    for rt in types {
        let collection = if rt.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", rt.plural)
        } else {
            format!("{prefix}/{}", rt.plural)
        };
        paths.insert(
            collection.clone(),
            json!({"post": operation(rt, "post", true), "get": operation(rt, "list", false)}),
        );
        paths.insert(
            format!("{collection}/{{name}}"),
            json!({
                "get": operation(rt, "get", false),
                "put": operation(rt, "put", true),
                "patch": operation(rt, "patch", true),
                "delete": operation(rt, "delete", false),
            }),
        );
        if rt.status_subresource() {
            paths.insert(
                format!("{collection}/{{name}}/status"),
                json!({
                    "get": operation(rt, "get", false),
                    "put": operation(rt, "put", true),
                    "patch": operation(rt, "patch", true),
                }),
            );
        }
        let mut schema = rt.custom().and_then(|c| c.schema.clone()).unwrap_or_else(
            || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        );
        schema["x-kubernetes-group-version-kind"] =
            json!([{"group": rt.group, "version": rt.version, "kind": rt.kind}]);
        schemas.insert(schema_name(rt), schema);
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_lists_builtin_group_versions() {
        let r = Registry::new();
        let i = index(&r);
        assert_eq!(
            i["paths"]["apis/apiextensions.k8s.io/v1"]["serverRelativeURL"],
            "/openapi/v3/apis/apiextensions.k8s.io/v1"
        );
        assert!(i["paths"].get("api/v1").is_some());
    }

    #[test]
    fn patch_operation_has_gvk_and_field_validation_but_no_smp() {
        let r = Registry::new();
        let d = group_version_doc(&r, "", "v1").unwrap();
        let op = &d["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
        assert_eq!(op["x-kubernetes-group-version-kind"]["kind"], "ConfigMap");
        assert!(
            op["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "fieldValidation")
        );
        assert!(
            op["requestBody"]["content"]
                .get("application/strategic-merge-patch+json")
                .is_none()
        );
    }
}
