//! The Argo CD health check (`deploy/argocd/health.lua`), run by a Lua 5.1 interpreter (the
//! dialect of gopher-lua, Argo CD's interpreter) over a table of objects and expected health,
//! and kept identical to the copy shown in docs/gitops.md.

use mlua::serde::SerializeOptions;
use mlua::{Lua, LuaSerdeExt};
use serde_json::{Value, json};

use super::helm::root;

fn script() -> String {
    let path = root().join("deploy/argocd/health.lua");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs the health check on `obj` as Argo CD does (global `obj`, the chunk returns a table
/// with `status` and `message`); JSON null becomes nil, as in Argo CD.
fn health(source: &str, obj: &Value) -> (String, String) {
    let lua = Lua::new();
    let options = SerializeOptions::new()
        .serialize_none_to_null(false)
        .serialize_unit_to_null(false);
    let value = lua
        .to_value_with(obj, options)
        .unwrap_or_else(|e| panic!("cannot convert {obj}: {e}"));
    lua.globals()
        .set("obj", value)
        .unwrap_or_else(|e| panic!("cannot set obj: {e}"));
    let table: mlua::Table = lua
        .load(source)
        .set_name("health.lua")
        .eval()
        .unwrap_or_else(|e| panic!("the health check failed on {obj}: {e}"));
    let get = |k: &str| {
        table
            .get::<Option<String>>(k)
            .ok()
            .flatten()
            .unwrap_or_default()
    };
    (get("status"), get("message"))
}

fn cond(kind: &str, status: &str, reason: &str, message: &str, generation: i64) -> Value {
    json!({
        "type": kind, "status": status, "reason": reason, "message": message,
        "lastTransitionTime": "2025-01-01T00:00:00Z", "observedGeneration": generation
    })
}

/// The three conditions as the operator writes them for one outcome.
fn outcome(
    ready: &str,
    reconciling: &str,
    stalled: &str,
    reason: &str,
    message: &str,
    generation: i64,
) -> Vec<Value> {
    vec![
        cond("Ready", ready, reason, message, generation),
        cond(
            "Reconciling",
            reconciling,
            reason,
            if reconciling == "True" { message } else { "" },
            generation,
        ),
        cond(
            "Stalled",
            stalled,
            reason,
            if stalled == "True" { message } else { "" },
            generation,
        ),
    ]
}

fn object(generation: i64, annotations: Value, status: Option<Value>) -> Value {
    let mut o = json!({
        "apiVersion": "mailtarget.co/v1alpha1",
        "kind": "SendingDomain",
        "metadata": {"name": "mail", "namespace": "default", "generation": generation, "annotations": annotations},
        "spec": {"domain": "mail.example.com"},
    });
    if let Some(s) = status {
        o["status"] = s;
    }
    o
}

fn with_conditions(generation: i64, observed: Option<i64>, conditions: Vec<Value>) -> Value {
    let mut status = json!({"conditions": conditions});
    if let Some(g) = observed {
        status["observedGeneration"] = json!(g);
    }
    object(generation, json!({}), Some(status))
}

/// The test table: object, expected health, a word the message must contain.
fn cases() -> Vec<(&'static str, Value, &'static str, &'static str)> {
    vec![
        (
            "Ready=True for the current generation",
            with_conditions(
                2,
                Some(2),
                outcome(
                    "True",
                    "False",
                    "False",
                    "Verified",
                    "All DNS records are verified",
                    2,
                ),
            ),
            "Healthy",
            "verified",
        ),
        (
            "Stalled=True",
            with_conditions(
                1,
                Some(1),
                outcome(
                    "False",
                    "False",
                    "True",
                    "Unauthorized",
                    "The API key was refused (401)",
                    1,
                ),
            ),
            "Degraded",
            "refused",
        ),
        (
            "Reconciling=True (waiting for DNS)",
            with_conditions(
                1,
                Some(1),
                outcome(
                    "False",
                    "True",
                    "False",
                    "VerifyingDns",
                    "Missing records: DKIM TXT",
                    1,
                ),
            ),
            "Progressing",
            "Missing records",
        ),
        (
            "Ready=False without Reconciling or Stalled",
            with_conditions(
                1,
                Some(1),
                vec![cond("Ready", "False", "Creating", "Creating the domain", 1)],
            ),
            "Progressing",
            "Creating",
        ),
        (
            "Ready=Unknown",
            with_conditions(1, None, vec![cond("Ready", "Unknown", "Pending", "", 1)]),
            "Progressing",
            "Pending",
        ),
        (
            "Ready=True but computed for an older generation",
            with_conditions(
                3,
                Some(3),
                outcome("True", "False", "False", "Verified", "ok", 2),
            ),
            "Progressing",
            "generation 3",
        ),
        (
            "Stalled=True but for an older generation (the user fixed the spec)",
            with_conditions(
                4,
                Some(3),
                outcome("False", "False", "True", "InvalidSpec", "bad", 3),
            ),
            "Progressing",
            "generation 4",
        ),
        (
            "status.observedGeneration behind metadata.generation",
            with_conditions(
                5,
                Some(4),
                vec![cond("Ready", "True", "Available", "ok", 5)],
            ),
            "Progressing",
            "generation 5",
        ),
        (
            "conditions without observedGeneration",
            with_conditions(
                2,
                None,
                vec![
                    json!({"type": "Ready", "status": "True", "reason": "Available", "message": "ok", "lastTransitionTime": "2025-01-01T00:00:00Z"}),
                ],
            ),
            "Healthy",
            "ok",
        ),
        (
            "no status",
            object(1, json!({}), None),
            "Progressing",
            "Waiting",
        ),
        (
            "empty status",
            object(1, json!({}), Some(json!({}))),
            "Progressing",
            "Waiting",
        ),
        (
            "no conditions yet",
            object(1, json!({}), Some(json!({"conditions": []}))),
            "Progressing",
            "Waiting",
        ),
        (
            "null message and reason",
            with_conditions(
                1,
                Some(1),
                vec![
                    json!({"type": "Ready", "status": "True", "reason": null, "message": null, "observedGeneration": 1}),
                ],
            ),
            "Healthy",
            "Ready",
        ),
        (
            "paused",
            object(
                2,
                json!({"mailtarget.co/paused": "true"}),
                Some(
                    json!({"conditions": outcome("True", "False", "False", "Available", "ok", 1)}),
                ),
            ),
            "Suspended",
            "paused",
        ),
        (
            "paused annotation set to false",
            object(
                1,
                json!({"mailtarget.co/paused": "false"}),
                Some(
                    json!({"conditions": outcome("True", "False", "False", "Available", "ok", 1)}),
                ),
            ),
            "Healthy",
            "ok",
        ),
        (
            "Stalled wins over Reconciling",
            with_conditions(
                1,
                Some(1),
                vec![
                    cond("Ready", "False", "ApiRejected", "rejected", 1),
                    cond("Reconciling", "True", "Retrying", "retrying", 1),
                    cond("Stalled", "True", "ApiRejected", "rejected", 1),
                ],
            ),
            "Degraded",
            "rejected",
        ),
    ]
}

/// The health check maps every case of the table to the expected health.
#[test]
fn argocd_health_check_table() {
    let source = script();
    for (what, obj, expected, mention) in cases() {
        let (status, message) = health(&source, &obj);
        assert_eq!(status, expected, "{what}: message {message:?}");
        assert!(
            message.to_lowercase().contains(&mention.to_lowercase()),
            "{what}: message {message:?} should mention {mention:?}"
        );
    }
}

/// The script uses only what Lua 5.1 offers (it would not load otherwise) and returns one of
/// Argo CD's health statuses for any object, even a malformed one.
#[test]
fn argocd_health_check_is_total() {
    let source = script();
    let odd = [
        json!({}),
        json!({"metadata": {}}),
        json!({"metadata": {"generation": 1}, "status": {"conditions": [{}]}}),
        json!({"metadata": {"generation": 1}, "status": {"conditions": [{"type": "Ready"}]}}),
    ];
    for obj in odd {
        let (status, _) = health(&source, &obj);
        assert!(
            [
                "Healthy",
                "Progressing",
                "Degraded",
                "Suspended",
                "Missing",
                "Unknown"
            ]
            .contains(&status.as_str()),
            "{obj}: {status}"
        );
    }
}

/// docs/gitops.md shows an argocd-cm ConfigMap whose three health keys hold exactly this script.
#[test]
fn docs_show_the_tested_script() {
    let doc_path = root().join("docs/gitops.md");
    let doc = std::fs::read_to_string(&doc_path)
        .unwrap_or_else(|e| panic!("{}: {e}", doc_path.display()));
    let block = doc
        .split("```yaml\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .find(|b| b.contains("name: argocd-cm"))
        .expect("docs/gitops.md shows the argocd-cm ConfigMap in a yaml block");
    let cm: Value = serde_yaml::from_str(block)
        .unwrap_or_else(|e| panic!("the argocd-cm block does not parse: {e}"));
    let source = script();
    for kind in ["SubAccount", "ApiKey", "SendingDomain"] {
        let key = format!("resource.customizations.health.mailtarget.co_{kind}");
        assert_eq!(
            cm["data"][&key].as_str().map(str::trim_end),
            Some(source.trim_end()),
            "docs/gitops.md: {key} differs from deploy/argocd/health.lua"
        );
    }
}
