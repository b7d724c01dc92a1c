//! `x-kubernetes-validations` rules of a CRD schema, evaluated with the `cel` crate the way
//! kube-apiserver evaluates them (Kubernetes docs, "Custom Resource Definitions", section
//! "Validation rules"):
//!
//! - each rule runs on every node of the object that has a schema carrying it and a non-null
//!   value, with `self` bound to that node;
//! - a rule using `oldSelf` is a transition rule: it runs only on update, and only where the node
//!   existed before (correlated through properties, map keys and `x-kubernetes-list-type: map`
//!   keys; items of atomic lists have no old value). With `optionalOldSelf: true` it runs on create
//!   too, `oldSelf` then being `optional.none()`;
//! - on update, a rule not using `oldSelf` is skipped where the node is unchanged (validation
//!   ratcheting);
//! - a failing rule gives `Invalid value: "<schema type>": <message>` at the node's path plus the
//!   rule's `fieldPath`; the message is the result of `messageExpression` when it is a non-empty
//!   string, else `message`, else `failed rule: <rule>`; `reason` picks `FieldValueForbidden`
//!   (`Forbidden: <message>`), `FieldValueRequired` (`Required value: <message>`),
//!   `FieldValueDuplicate` (`Duplicate value: "<schema type>"`) or `FieldValueInvalid` (default);
//! - an evaluation error gives `Invalid value: "<schema type>": <error> evaluating rule: <rule>`.
//!
//! Values are typed by the schema: `integer` → int, `number` → double, objects → maps of their
//! present fields; at the root and in embedded resources `metadata` offers only `name` and
//! `generateName`. String formats (`date-time`, `duration`, `byte`) stay strings.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use cel::common::types::CelOptional;
use cel::common::value::Val;
use cel::objects::{Key, Map};
use cel::{Context, Env, ExecutionError, Program};
use serde_json::Value;

use super::cel_library;
use super::error::{FieldError, render_value};
use super::node::{Node, child_path, correlate_map_item, index_path};

/// The CEL environment: the standard library with the `strings` and `lists` extensions.
static ENV: LazyLock<Option<Arc<Env>>> = LazyLock::new(|| {
    let mut env = Env::stdlib();
    env.add_extension(cel::extensions::strings).ok()?;
    env.add_extension(cel::extensions::lists).ok()?;
    Some(Arc::new(env))
});

/// Evaluates every rule below `value` (inclusive) and appends failures to `errs`. `old` is the
/// correlated old value (`None` on create or where the node did not exist).
pub(crate) fn validate_rules(
    schema: Node<'_>,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    resource_root: bool,
    errs: &mut Vec<FieldError>,
) {
    if value.is_null() {
        return;
    }
    if let Some(rules) = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    {
        for rule in rules {
            evaluate_rule(schema, rule, value, old, path, resource_root, errs);
        }
    }
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if resource_root && (key == "metadata" || key == "apiVersion" || key == "kind") {
                    continue;
                }
                if let Some(child_schema) = schema.child(key) {
                    let old_child = old.and_then(|o| o.get(key));
                    validate_rules(
                        child_schema,
                        child,
                        old_child,
                        &child_path(path, key),
                        child_schema.embedded_resource(),
                        errs,
                    );
                }
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = schema.items() else {
                return;
            };
            let old_items = old
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            let keys = schema.list_map_keys();
            for (i, item) in items.iter().enumerate() {
                let old_item = match schema.list_type() {
                    Some("map") => correlate_map_item(&keys, item, old_items),
                    Some("set") => old_items.iter().find(|o| *o == item),
                    _ => None,
                };
                validate_rules(
                    item_schema,
                    item,
                    old_item,
                    &index_path(path, i),
                    item_schema.embedded_resource(),
                    errs,
                );
            }
        }
        _ => {}
    }
}

fn evaluate_rule(
    schema: Node<'_>,
    rule: &Value,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    resource_root: bool,
    errs: &mut Vec<FieldError>,
) {
    let Some(source) = rule.get("rule").and_then(Value::as_str) else {
        return;
    };
    let source_trimmed = source.trim();
    let type_value = render_value(&Value::String(schema.type_name().unwrap_or("").to_string()));
    let Some(env) = ENV.as_ref() else {
        errs.push(FieldError::invalid(
            path,
            &type_value,
            "the CEL environment could not be built",
        ));
        return;
    };
    let program = match env.compile(source) {
        Ok(program) => program,
        Err(e) => {
            errs.push(FieldError::invalid(
                path,
                &type_value,
                &format!("compilation failed: {e} in rule: {source_trimmed}"),
            ));
            return;
        }
    };
    let uses_old_self = program.references().has_variable("oldSelf");
    let optional_old_self = rule
        .get("optionalOldSelf")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if uses_old_self && old.is_none() && !optional_old_self {
        return;
    }
    if !uses_old_self && old == Some(value) {
        return;
    }
    let self_value = to_cel(Some(schema), value, resource_root);
    let old_value = old.map(|o| to_cel(Some(schema), o, resource_root));
    let outcome = run(
        env,
        &program,
        &self_value,
        old_value.as_ref(),
        optional_old_self,
    );
    match outcome {
        Ok(cel::Value::Bool(true)) => return,
        Ok(cel::Value::Bool(false)) => {}
        Ok(_) => {
            errs.push(FieldError::invalid(
                path,
                &type_value,
                &format!("rule did not evaluate to a bool: {source_trimmed}"),
            ));
            return;
        }
        Err(e) => {
            errs.push(FieldError::invalid(
                path,
                &type_value,
                &format!("{} evaluating rule: {source_trimmed}", describe_error(&e)),
            ));
            return;
        }
    }
    let message = rule_message(
        env,
        rule,
        source_trimmed,
        &self_value,
        old_value.as_ref(),
        optional_old_self,
    );
    let error_path = match rule.get("fieldPath").and_then(Value::as_str) {
        Some(field_path) => append_field_path(path, field_path),
        None => path.to_string(),
    };
    let error = match rule.get("reason").and_then(Value::as_str) {
        Some("FieldValueForbidden") => FieldError::forbidden(&error_path, &message),
        Some("FieldValueRequired") => FieldError::required(&error_path, &message),
        Some("FieldValueDuplicate") => FieldError::duplicate(&error_path, &type_value),
        _ => FieldError::invalid(&error_path, &type_value, &message),
    };
    errs.push(error);
}

/// Runs `program` with `self` and `oldSelf` bound.
fn run(
    env: &Arc<Env>,
    program: &Program,
    self_value: &cel::Value,
    old_value: Option<&cel::Value>,
    optional_old_self: bool,
) -> Result<cel::Value, ExecutionError> {
    let mut ctx = Context::with_env(Arc::clone(env));
    cel_library::register(&mut ctx);
    ctx.add_variable_from_value("self", self_value.clone());
    if optional_old_self {
        let optional = match old_value {
            Some(old) => {
                let boxed: Box<dyn Val> = old.clone().try_into().map_err(|_| {
                    ExecutionError::function_error("oldSelf", "value cannot be bound")
                })?;
                CelOptional::of(boxed)
            }
            None => CelOptional::none(),
        };
        ctx.add_variable_as_val("oldSelf", Box::new(optional));
    } else if let Some(old) = old_value {
        ctx.add_variable_from_value("oldSelf", old.clone());
    }
    program.execute(&ctx)
}

/// The message of a failed rule: `messageExpression`'s result when it is a non-empty string
/// without line breaks, else `message`, else `failed rule: <rule>`.
fn rule_message(
    env: &Arc<Env>,
    rule: &Value,
    source: &str,
    self_value: &cel::Value,
    old_value: Option<&cel::Value>,
    optional_old_self: bool,
) -> String {
    if let Some(expression) = rule.get("messageExpression").and_then(Value::as_str)
        && let Ok(program) = env.compile(expression)
        && let Ok(cel::Value::String(s)) =
            run(env, &program, self_value, old_value, optional_old_self)
        && !s.trim().is_empty()
        && !s.contains('\n')
    {
        return s.to_string();
    }
    match rule.get("message").and_then(Value::as_str) {
        Some(message) if !message.is_empty() => message.to_string(),
        _ => format!("failed rule: {source}"),
    }
}

/// An evaluation error worded like cel-go's (`no such key: foo`).
fn describe_error(error: &ExecutionError) -> String {
    match error {
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        other => other.to_string(),
    }
}

/// Appends a rule's `fieldPath` (`.a.b`, `['key']`, `[0]`) to `path`, as kube-apiserver does:
/// properties as `.name`, quoted keys and indexes in brackets.
fn append_field_path(path: &str, field_path: &str) -> String {
    let mut out = path.to_string();
    let chars: Vec<char> = field_path.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '.' => {
                let start = i + 1;
                let mut end = start;
                while end < chars.len() && chars[end] != '.' && chars[end] != '[' {
                    end += 1;
                }
                let name: String = chars[start..end].iter().collect();
                out = child_path(&out, &name);
                i = end;
            }
            '[' => {
                let close = chars[i..]
                    .iter()
                    .position(|c| *c == ']')
                    .map(|p| p + i)
                    .unwrap_or(chars.len());
                let inner: String = chars[i + 1..close.min(chars.len())].iter().collect();
                let inner = inner.trim_matches(|c| c == '\'' || c == '"');
                out.push('[');
                out.push_str(inner);
                out.push(']');
                i = close + 1;
            }
            _ => {
                let mut end = i;
                while end < chars.len() && chars[end] != '.' && chars[end] != '[' {
                    end += 1;
                }
                let name: String = chars[i..end].iter().collect();
                out = child_path(&out, &name);
                i = end;
            }
        }
    }
    out
}

/// Converts a JSON value to a CEL value typed by `schema` (see the module documentation).
pub(crate) fn to_cel(schema: Option<Node<'_>>, value: &Value, resource_root: bool) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => {
            let wants_double = schema.and_then(|s| s.type_name()) == Some("number");
            if wants_double {
                cel::Value::Float(n.as_f64().unwrap_or(0.0))
            } else if let Some(i) = n.as_i64() {
                cel::Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                cel::Value::UInt(u)
            } else {
                let f = n.as_f64().unwrap_or(0.0);
                let wants_int =
                    schema.is_some_and(|s| s.type_name() == Some("integer") || s.int_or_string());
                if wants_int && f.fract() == 0.0 && f.abs() < 9.0e18 {
                    cel::Value::Int(f as i64)
                } else {
                    cel::Value::Float(f)
                }
            }
        }
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(items) => {
            let item_schema = schema.and_then(|s| s.items());
            let converted: Vec<cel::Value> = items
                .iter()
                .map(|item| {
                    to_cel(
                        item_schema,
                        item,
                        item_schema.is_some_and(|s| s.embedded_resource()),
                    )
                })
                .collect();
            cel::Value::List(Arc::new(converted))
        }
        Value::Object(map) => {
            let mut out: HashMap<Key, cel::Value> = HashMap::new();
            for (key, child) in map {
                if resource_root && key == "metadata" {
                    let mut meta: HashMap<Key, cel::Value> = HashMap::new();
                    for field in ["name", "generateName"] {
                        if let Some(Value::String(s)) = child.get(field) {
                            meta.insert(Key::from(field), cel::Value::String(Arc::new(s.clone())));
                        }
                    }
                    out.insert(
                        Key::from("metadata"),
                        cel::Value::Map(Map {
                            map: Arc::new(meta),
                        }),
                    );
                    continue;
                }
                let child_schema = schema.and_then(|s| s.child(key));
                let embedded = child_schema.is_some_and(|s| s.embedded_resource());
                out.insert(
                    Key::from(key.as_str()),
                    to_cel(child_schema, child, embedded),
                );
            }
            cel::Value::Map(Map { map: Arc::new(out) })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_paths_append_like_kube() {
        assert_eq!(append_field_path("spec", ".domain"), "spec.domain");
        assert_eq!(append_field_path("", ".spec.a"), "spec.a");
        assert_eq!(
            append_field_path("spec", ".labels['a.b']"),
            "spec.labels[a.b]"
        );
        assert_eq!(append_field_path("spec", ".list[0].x"), "spec.list[0].x");
    }
}
