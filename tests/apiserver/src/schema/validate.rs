//! OpenAPI v3 value validation of a custom resource against its CRD's structural schema, worded
//! as kube-apiserver words it (kube-openapi's validator, whose results kube-apiserver converts to
//! field errors in `apiextensions-apiserver/pkg/apiserver/validation`).
//!
//! Checked keywords: `type` (with `integer` accepting integral numbers only, and
//! `x-kubernetes-int-or-string`), `nullable`, `required`, `enum`, `pattern`, `format`,
//! `minLength`/`maxLength` (in characters), `minimum`/`maximum`/`exclusiveMinimum`/
//! `exclusiveMaximum`, `multipleOf`, `minItems`/`maxItems`, `uniqueItems`,
//! `minProperties`/`maxProperties`, `properties`, `additionalProperties`, `items`, `allOf`,
//! `anyOf`, `oneOf`, `not`, and `apiVersion`/`kind` of `x-kubernetes-embedded-resource` objects.
//!
//! Validation ratcheting (Kubernetes docs, "Custom Resource Definitions", section "Validation
//! ratcheting", on by default since 1.30): on update, a node equal to its correlated old value
//! (same property, same list-map key, same set element) is not validated again.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use regex::Regex;
use serde_json::Value;

use super::error::{FieldError, json_type_name, render_value};
use super::formats::check_format;
use super::node::{Node, child_path, correlate_map_item, index_path};

/// Validates `value` at `path` against `schema`, appending failures to `errs`. `old` is the
/// correlated old value on update (for ratcheting), `None` on create.
pub(crate) fn validate(
    schema: Node<'_>,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if old == Some(value) {
        return;
    }
    if value.is_null() {
        if !schema.nullable() && (schema.type_name().is_some() || schema.int_or_string()) {
            errs.push(type_error(schema, path, "null"));
        }
        return;
    }
    if !type_matches(schema, value) {
        errs.push(type_error(schema, path, json_type_name(value)));
        return;
    }
    validate_enum(schema, value, path, errs);
    match value {
        Value::String(s) => validate_string(schema, s, path, errs),
        Value::Number(_) => validate_number(schema, value, path, errs),
        Value::Array(items) => validate_array(schema, items, old, path, errs),
        Value::Object(_) => validate_object(schema, value, old, path, errs),
        Value::Bool(_) | Value::Null => {}
    }
    validate_composition(schema, value, path, errs);
}

/// Whether `value` has the JSON type `schema` asks for. A number with no fractional part counts
/// as an `integer`, as in kube-openapi.
fn type_matches(schema: Node<'_>, value: &Value) -> bool {
    if schema.int_or_string() {
        return value.is_string() || is_integer(value);
    }
    match schema.type_name() {
        None => true,
        Some("integer") => is_integer(value),
        Some("number") => value.is_number(),
        Some("string") => value.is_string(),
        Some("boolean") => value.is_boolean(),
        Some("object") => value.is_object(),
        Some("array") => value.is_array(),
        Some(_) => true,
    }
}

fn is_integer(value: &Value) -> bool {
    match value {
        Value::Number(n) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

/// kube-openapi's `InvalidType`: `Invalid value: "<actual>": <path> in body must be of type
/// <type>: "<actual>"`, reason `FieldValueTypeInvalid`.
fn type_error(schema: Node<'_>, path: &str, actual: &str) -> FieldError {
    let wanted = if schema.int_or_string() {
        "integer,string"
    } else {
        schema.type_name().unwrap_or("")
    };
    let quoted = render_value(&Value::String(actual.to_string()));
    FieldError::type_invalid(
        path,
        &quoted,
        &format!("{path} in body must be of type {wanted}: {quoted}"),
    )
}

fn validate_enum(schema: Node<'_>, value: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let Some(allowed) = schema.get("enum").and_then(Value::as_array) else {
        return;
    };
    if allowed.iter().any(|candidate| json_equal(candidate, value)) {
        return;
    }
    let names: Vec<String> = allowed
        .iter()
        .map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect();
    errs.push(FieldError::not_supported(
        path,
        &render_value(value),
        &names,
    ));
}

fn validate_string(schema: Node<'_>, s: &str, path: &str, errs: &mut Vec<FieldError>) {
    let bad = render_value(&Value::String(s.to_string()));
    let chars = s.chars().count() as i64;
    if let Some(max) = schema.get("maxLength").and_then(Value::as_i64)
        && chars > max
    {
        errs.push(FieldError::too_long(path, max));
    }
    if let Some(min) = schema.get("minLength").and_then(Value::as_i64)
        && chars < min
    {
        errs.push(FieldError::invalid(
            path,
            &bad,
            &format!("{path} in body should be at least {min} chars long"),
        ));
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
        && pattern_matches(pattern, s) == Some(false)
    {
        errs.push(FieldError::invalid(
            path,
            &bad,
            &format!("{path} in body should match '{pattern}'"),
        ));
    }
    if let Some(format) = schema.get("format").and_then(Value::as_str)
        && !check_format(format, s)
    {
        errs.push(FieldError::type_invalid(
            path,
            &bad,
            &format!("{path} in body must be of type {format}: {bad}"),
        ));
    }
}

/// Whether `s` matches `pattern` (an unanchored search, like Go's `regexp.MatchString`), or `None`
/// when the pattern does not compile (kube-apiserver refuses such CRDs; here it is not enforced).
fn pattern_matches(pattern: &str, s: &str) -> Option<bool> {
    static CACHE: LazyLock<Mutex<HashMap<String, Option<Regex>>>> =
        LazyLock::new(|| Mutex::new(HashMap::new()));
    let mut cache = CACHE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let regex = cache
        .entry(pattern.to_string())
        .or_insert_with(|| Regex::new(pattern).ok());
    regex.as_ref().map(|r| r.is_match(s))
}

fn validate_number(schema: Node<'_>, value: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let Some(n) = value.as_f64() else { return };
    let bad = render_value(value);
    if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
        if schema.flag("exclusiveMaximum") && n >= max {
            errs.push(FieldError::invalid(
                path,
                &bad,
                &format!("{path} in body should be less than {}", go_float(max)),
            ));
        } else if n > max {
            errs.push(FieldError::invalid(
                path,
                &bad,
                &format!(
                    "{path} in body should be less than or equal to {}",
                    go_float(max)
                ),
            ));
        }
    }
    if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
        if schema.flag("exclusiveMinimum") && n <= min {
            errs.push(FieldError::invalid(
                path,
                &bad,
                &format!("{path} in body should be greater than {}", go_float(min)),
            ));
        } else if n < min {
            errs.push(FieldError::invalid(
                path,
                &bad,
                &format!(
                    "{path} in body should be greater than or equal to {}",
                    go_float(min)
                ),
            ));
        }
    }
    if let Some(factor) = schema.get("multipleOf").and_then(Value::as_f64)
        && factor > 0.0
    {
        let quotient = n / factor;
        if (quotient - quotient.round()).abs() > 1e-9 {
            errs.push(FieldError::invalid(
                path,
                &bad,
                &format!(
                    "{path} in body should be a multiple of {}",
                    go_float(factor)
                ),
            ));
        }
    }
}

/// A float as Go's `%v` prints whole numbers (`3`, not `3.0`).
fn go_float(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e21 {
        format!("{}", f as i64)
    } else {
        format!("{f}")
    }
}

fn validate_array(
    schema: Node<'_>,
    items: &[Value],
    old: Option<&Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    let len = items.len();
    if let Some(max) = schema.get("maxItems").and_then(Value::as_i64)
        && len as i64 > max
    {
        errs.push(FieldError::too_many(path, len, max));
    }
    if let Some(min) = schema.get("minItems").and_then(Value::as_i64)
        && (len as i64) < min
    {
        errs.push(FieldError::invalid(
            path,
            &render_value(&Value::Array(items.to_vec())),
            &format!("{path} in body should have at least {min} items"),
        ));
    }
    if schema.flag("uniqueItems") {
        let duplicated = items
            .iter()
            .enumerate()
            .any(|(i, a)| items[..i].iter().any(|b| json_equal(a, b)));
        if duplicated {
            errs.push(FieldError::invalid(
                path,
                &render_value(&Value::Array(items.to_vec())),
                &format!("{path} in body shouldn't contain duplicates"),
            ));
        }
    }
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
        validate(item_schema, item, old_item, &index_path(path, i), errs);
    }
}

fn validate_object(
    schema: Node<'_>,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    let Some(map) = value.as_object() else { return };
    if schema.embedded_resource() {
        for key in ["apiVersion", "kind"] {
            if map
                .get(key)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                errs.push(FieldError::required(
                    &child_path(path, key),
                    "must not be empty",
                ));
            }
        }
    }
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(name) {
                errs.push(FieldError::required(&child_path(path, name), ""));
            }
        }
    }
    let count = map.len();
    if let Some(max) = schema.get("maxProperties").and_then(Value::as_i64)
        && count as i64 > max
    {
        errs.push(FieldError::too_many(path, count, max));
    }
    if let Some(min) = schema.get("minProperties").and_then(Value::as_i64)
        && (count as i64) < min
    {
        errs.push(FieldError::invalid(
            path,
            &render_value(value),
            &format!("{path} in body should have at least {min} properties"),
        ));
    }
    for (key, child) in map {
        if let Some(child_schema) = schema.child(key) {
            let old_child = old.and_then(|o| o.get(key));
            validate(child_schema, child, old_child, &child_path(path, key), errs);
        }
    }
}

/// `allOf`, `anyOf`, `oneOf` and `not`. A failed composition is reported, as kube-apiserver
/// does, at the object root with the path in the message (`Invalid value: "": "spec.x" must
/// validate at least one schema (anyOf)`), followed by the first failing branch's own errors.
fn validate_composition(schema: Node<'_>, value: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let quoted_path = render_value(&Value::String(path.to_string()));
    let empty = render_value(&Value::String(String::new()));
    let run = |node: Node<'_>| {
        let mut branch = Vec::new();
        validate(node, value, None, path, &mut branch);
        branch
    };
    let all_of = schema.sub_schemas("allOf");
    if !all_of.is_empty() {
        let failed: Vec<FieldError> = all_of.into_iter().flat_map(run).collect();
        if !failed.is_empty() {
            errs.push(FieldError::invalid(
                "",
                &empty,
                &format!("{quoted_path} must validate all the schemas (allOf)"),
            ));
            errs.extend(failed);
        }
    }
    let any_of = schema.sub_schemas("anyOf");
    if !any_of.is_empty() {
        let results: Vec<Vec<FieldError>> = any_of.into_iter().map(run).collect();
        if results.iter().all(|r| !r.is_empty()) {
            errs.push(FieldError::invalid(
                "",
                &empty,
                &format!("{quoted_path} must validate at least one schema (anyOf)"),
            ));
            errs.extend(results.into_iter().next().unwrap_or_default());
        }
    }
    let one_of = schema.sub_schemas("oneOf");
    if !one_of.is_empty() {
        let results: Vec<Vec<FieldError>> = one_of.into_iter().map(run).collect();
        let passing = results.iter().filter(|r| r.is_empty()).count();
        if passing != 1 {
            errs.push(FieldError::invalid(
                "",
                &empty,
                &format!("{quoted_path} must validate one and only one schema (oneOf)"),
            ));
            if passing == 0 {
                errs.extend(results.into_iter().next().unwrap_or_default());
            }
        }
    }
    if let Some(not) = schema.get("not").filter(|v| v.is_object())
        && run(Node(not)).is_empty()
    {
        errs.push(FieldError::invalid(
            "",
            &empty,
            &format!("{quoted_path} must not validate the schema (not)"),
        ));
    }
}

/// JSON equality where numbers compare by value (`1` equals `1.0`), as Go compares decoded JSON.
pub(crate) fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}
