//! The Argo CD health check (`deploy/argocd/health.lua`), run by a Lua 5.1 interpreter (the
//! dialect of gopher-lua, Argo CD's interpreter) over a table of objects and expected health,
//! and kept identical to the copy shown in docs/gitops.md.

use mailtarget_operator::controller::status::{Outcome, set_conditions};
use mailtarget_operator::crd::{Account, AccountStatus, ClusterAccount, KeyScope, ScopeSource};
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
        (
            "paused annotation in another case (the operator ignores ASCII case)",
            object(
                2,
                json!({"mailtarget.co/paused": "True"}),
                Some(
                    json!({"conditions": outcome("True", "False", "False", "Available", "ok", 1)}),
                ),
            ),
            "Suspended",
            "paused",
        ),
    ]
}

/// A ClusterAccount (cluster-scoped: no namespace) or an Account (namespaced) as the operator
/// leaves it after a check with `outcome` computed for generation `observed` (conditions and
/// `status.observedGeneration` written by the accounts controller's own functions), read back
/// through the operator's types, so the objects have the shape the operator writes.
fn account(
    kind: &str,
    generation: i64,
    observed: i64,
    annotations: Value,
    outcome: Option<Outcome>,
) -> Value {
    let mut obj = json!({
        "apiVersion": "mailtarget.co/v1alpha1",
        "kind": kind,
        "metadata": {"name": "billing", "generation": generation, "annotations": annotations},
        "spec": {"credentials": {"secretRef": {"name": "billing-key"}}, "scope": "Company"},
    });
    if kind == "Account" {
        obj["metadata"]["namespace"] = json!("team-a");
    }
    if let Some(outcome) = outcome {
        let mut conditions = Vec::new();
        set_conditions(&mut conditions, &outcome, Some(observed));
        let status = AccountStatus {
            observed_generation: Some(observed),
            conditions,
            scope: Some(KeyScope::Company),
            scope_source: Some(ScopeSource::Declared),
            ..AccountStatus::default()
        };
        obj["status"] = serde_json::to_value(status).expect("AccountStatus serializes");
    }
    let typed = match kind {
        "ClusterAccount" => serde_json::from_value::<ClusterAccount>(obj)
            .map(|a| serde_json::to_value(a).expect("ClusterAccount serializes")),
        "Account" => serde_json::from_value::<Account>(obj)
            .map(|a| serde_json::to_value(a).expect("Account serializes")),
        other => panic!("not an account kind: {other}"),
    };
    typed.unwrap_or_else(|e| panic!("not a valid {kind}: {e}"))
}

fn ready(reason: &'static str, message: &str) -> Option<Outcome> {
    Some(Outcome::Ready {
        reason,
        message: message.into(),
    })
}

fn progressing(reason: &'static str, message: &str) -> Option<Outcome> {
    Some(Outcome::Progressing {
        reason,
        message: message.into(),
    })
}

fn stalled(reason: &'static str, message: &str) -> Option<Outcome> {
    Some(Outcome::Stalled {
        reason,
        message: message.into(),
    })
}

/// The account kinds through the same script: their checks' outcomes, a spec change not yet
/// checked, and the paused annotation, which does not pause an account's check.
fn account_cases() -> Vec<(&'static str, Value, &'static str, &'static str)> {
    vec![
        (
            "ClusterAccount whose key authenticated",
            account(
                "ClusterAccount",
                1,
                1,
                json!({}),
                ready("Authenticated", "The key authenticates (a company key)"),
            ),
            "Healthy",
            "authenticates",
        ),
        (
            "ClusterAccount whose Secret is missing",
            account(
                "ClusterAccount",
                1,
                1,
                json!({}),
                stalled(
                    "CredentialsNotFound",
                    "Secret \"mailtarget-system/billing-key\" not found",
                ),
            ),
            "Degraded",
            "not found",
        ),
        (
            "ClusterAccount changed since its last check",
            account(
                "ClusterAccount",
                3,
                2,
                json!({}),
                ready("Authenticated", "The key authenticates"),
            ),
            "Progressing",
            "generation 3",
        ),
        (
            "ClusterAccount annotated paused: still checked, so its conditions decide",
            account(
                "ClusterAccount",
                1,
                1,
                json!({"mailtarget.co/paused": "true"}),
                stalled("Unauthorized", "The service refused the key (401)"),
            ),
            "Degraded",
            "refused",
        ),
        (
            "Account whose service cannot be reached (retried)",
            account(
                "Account",
                1,
                1,
                json!({}),
                progressing("Unreachable", "Timed out reaching the service; retried"),
            ),
            "Progressing",
            "timed out",
        ),
        (
            "Account whose key the service refused",
            account(
                "Account",
                2,
                2,
                json!({}),
                stalled("Unauthorized", "The service refused the key (401)"),
            ),
            "Degraded",
            "refused",
        ),
        (
            "Account annotated paused and Ready",
            account(
                "Account",
                1,
                1,
                json!({"mailtarget.co/paused": "true"}),
                ready("Authenticated", "The key authenticates"),
            ),
            "Healthy",
            "authenticates",
        ),
        (
            "Account not checked yet",
            account("Account", 1, 1, json!({}), None),
            "Progressing",
            "Waiting",
        ),
    ]
}

/// The health check maps every case of the tables (managed kinds, account kinds) to the expected
/// health.
#[test]
fn argocd_health_check_table() {
    let source = script();
    for (what, obj, expected, mention) in cases().into_iter().chain(account_cases()) {
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

/// docs/gitops.md shows an argocd-cm ConfigMap whose health keys, one per kind (the three
/// managed kinds and the two account kinds), hold exactly this script.
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
    for kind in [
        "SubAccount",
        "ApiKey",
        "SendingDomain",
        "ClusterAccount",
        "Account",
    ] {
        let key = format!("resource.customizations.health.mailtarget.co_{kind}");
        assert_eq!(
            cm["data"][&key].as_str().map(str::trim_end),
            Some(source.trim_end()),
            "docs/gitops.md: {key} differs from deploy/argocd/health.lua"
        );
    }
}
