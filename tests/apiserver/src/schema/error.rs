//! Field errors shaped like kube-apiserver's `k8s.io/apimachinery/pkg/util/validation/field.Error`.
//!
//! kube-apiserver renders a field error as `<path>: <body>`, where the body is
//! `<Type>: <bad value>: <detail>` (`field.Error.ErrorBody`). The API server puts the path into
//! `status.details.causes[].field`, the body into `.message` and the error type, as a
//! `metav1.CauseType`, into `.reason`. [`FieldError`] carries those three parts.

use std::fmt;

use serde_json::Value;

/// One validation failure, shaped like kube-apiserver's `field.Error`.
///
/// - `path`: the field path as kube-apiserver prints it (`field.Path.String()`): properties joined
///   with `.`, list indexes in brackets: `spec.domain`, `spec.allowedIps[1]`, map entries as
///   properties (`spec.labels.app`), the empty string for the object itself.
/// - `reason`: the `metav1.CauseType` (see [`FieldErrorReason`]).
/// - `message`: the error body without the path, e.g.
///   `Invalid value: "x": spec.domain in body should match '^[a-z.]+$'` or `Required value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Field path such as `spec.domain` or `spec.allowedIps[1]`; empty for the whole object.
    pub path: String,
    /// Machine-readable reason (`metav1.CauseType`).
    pub reason: FieldErrorReason,
    /// Human-readable message without the path, as `field.Error.ErrorBody()` words it.
    pub message: String,
}

/// The `metav1.CauseType` of a [`FieldError`] (Kubernetes API conventions, "Response Status
/// Kind"; the values match `field.ErrorType` one to one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldErrorReason {
    /// `FieldValueInvalid`: malformed value (pattern, bounds, format, failed CEL rule...).
    FieldValueInvalid,
    /// `FieldValueRequired`: a required field is missing.
    FieldValueRequired,
    /// `FieldValueNotSupported`: a value outside an `enum`.
    FieldValueNotSupported,
    /// `FieldValueTooLong`: a string longer than `maxLength`.
    FieldValueTooLong,
    /// `FieldValueTypeInvalid`: a value of the wrong JSON type, or failing its `format`.
    FieldValueTypeInvalid,
    /// `FieldValueForbidden`: a CEL rule with `reason: FieldValueForbidden`.
    FieldValueForbidden,
    /// `FieldValueDuplicate`: a repeated entry in a `x-kubernetes-list-type` set or map list.
    FieldValueDuplicate,
    /// `FieldValueTooMany`: a list or map with more entries than `maxItems`/`maxProperties`.
    FieldValueTooMany,
}

impl FieldErrorReason {
    /// The reason as Kubernetes spells it in `status.details.causes[].reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            FieldErrorReason::FieldValueInvalid => "FieldValueInvalid",
            FieldErrorReason::FieldValueRequired => "FieldValueRequired",
            FieldErrorReason::FieldValueNotSupported => "FieldValueNotSupported",
            FieldErrorReason::FieldValueTooLong => "FieldValueTooLong",
            FieldErrorReason::FieldValueTypeInvalid => "FieldValueTypeInvalid",
            FieldErrorReason::FieldValueForbidden => "FieldValueForbidden",
            FieldErrorReason::FieldValueDuplicate => "FieldValueDuplicate",
            FieldErrorReason::FieldValueTooMany => "FieldValueTooMany",
        }
    }
}

impl FieldError {
    /// The reason as Kubernetes spells it in `status.details.causes[].reason`, e.g.
    /// `"FieldValueInvalid"`.
    pub fn reason_str(&self) -> &'static str {
        self.reason.as_str()
    }

    /// `field.Invalid`: `Invalid value: <value>: <detail>`.
    pub(crate) fn invalid(path: &str, value: &str, detail: &str) -> Self {
        Self::with_value(
            path,
            FieldErrorReason::FieldValueInvalid,
            "Invalid value",
            value,
            detail,
        )
    }

    /// `field.TypeInvalid`: `Invalid value: <value>: <detail>` with reason `FieldValueTypeInvalid`.
    pub(crate) fn type_invalid(path: &str, value: &str, detail: &str) -> Self {
        Self::with_value(
            path,
            FieldErrorReason::FieldValueTypeInvalid,
            "Invalid value",
            value,
            detail,
        )
    }

    /// `field.NotSupported`: `Unsupported value: <value>: supported values: "a", "b"`.
    pub(crate) fn not_supported(path: &str, value: &str, supported: &[String]) -> Self {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::with_value(
            path,
            FieldErrorReason::FieldValueNotSupported,
            "Unsupported value",
            value,
            &detail,
        )
    }

    /// `field.Duplicate`: `Duplicate value: <value>`.
    pub(crate) fn duplicate(path: &str, value: &str) -> Self {
        Self::with_value(
            path,
            FieldErrorReason::FieldValueDuplicate,
            "Duplicate value",
            value,
            "",
        )
    }

    /// `field.TooMany`: `Too many: <actual>: must have at most <max> items`.
    pub(crate) fn too_many(path: &str, actual: usize, max: i64) -> Self {
        let detail = format!("must have at most {max} items");
        Self::with_value(
            path,
            FieldErrorReason::FieldValueTooMany,
            "Too many",
            &actual.to_string(),
            &detail,
        )
    }

    /// `field.TooLongMaxLength`: `Too long: may not be longer than <max>` (the value is omitted).
    pub(crate) fn too_long(path: &str, max: i64) -> Self {
        Self::without_value(
            path,
            FieldErrorReason::FieldValueTooLong,
            "Too long",
            &format!("may not be longer than {max}"),
        )
    }

    /// `field.Required`: `Required value` or `Required value: <detail>`.
    pub(crate) fn required(path: &str, detail: &str) -> Self {
        Self::without_value(
            path,
            FieldErrorReason::FieldValueRequired,
            "Required value",
            detail,
        )
    }

    /// `field.Forbidden`: `Forbidden: <detail>`.
    pub(crate) fn forbidden(path: &str, detail: &str) -> Self {
        Self::without_value(
            path,
            FieldErrorReason::FieldValueForbidden,
            "Forbidden",
            detail,
        )
    }

    fn with_value(
        path: &str,
        reason: FieldErrorReason,
        kind: &str,
        value: &str,
        detail: &str,
    ) -> Self {
        let mut message = format!("{kind}: {value}");
        if !detail.is_empty() {
            message.push_str(": ");
            message.push_str(detail);
        }
        FieldError {
            path: path.to_string(),
            reason,
            message,
        }
    }

    fn without_value(path: &str, reason: FieldErrorReason, kind: &str, detail: &str) -> Self {
        let message = if detail.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}: {detail}")
        };
        FieldError {
            path: path.to_string(),
            reason,
            message,
        }
    }
}

impl fmt::Display for FieldError {
    /// `<path>: <message>`, as `field.Error.Error()` prints it (`<nil>` for the object itself).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() {
            "<nil>"
        } else {
            self.path.as_str()
        };
        write!(f, "{path}: {}", self.message)
    }
}

impl std::error::Error for FieldError {}

/// Renders a bad value the way `field.Error.ErrorBody` does: strings quoted (`%q`), numbers and
/// booleans bare (`%v`), `null` as `"null"`, objects and lists in Go's `%#v` syntax
/// (`map[string]interface {}{"a":"b"}`, `[]interface {}{"a", "b"}`).
pub(crate) fn render_value(value: &Value) -> String {
    match value {
        Value::Null => go_quote("null"),
        Value::String(s) => go_quote(s),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Array(_) | Value::Object(_) => go_sharp_v(value),
    }
}

/// Go's `%#v` of a decoded JSON value held in an `interface{}`.
fn go_sharp_v(value: &Value) -> String {
    match value {
        Value::Null => "interface {}(nil)".to_string(),
        Value::String(s) => go_quote(s),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(go_sharp_v).collect();
            format!("[]interface {{}}{{{}}}", parts.join(", "))
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", go_quote(k), go_sharp_v(&map[k.as_str()])))
                .collect();
            format!("map[string]interface {{}}{{{}}}", parts.join(", "))
        }
    }
}

/// A double-quoted string with JSON escapes, close to Go's `strconv.Quote` for the values the
/// emulator meets.
pub(crate) fn go_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// The JSON type name kube-openapi uses in type errors: `string`, `integer` (a number without a
/// fractional part), `number`, `boolean`, `object`, `array` or `null`.
pub(crate) fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bodies_match_field_error_body() {
        assert_eq!(
            FieldError::required("spec.domain", "").message,
            "Required value"
        );
        assert_eq!(
            FieldError::invalid("spec.x", &render_value(&json!("a")), "bad").message,
            "Invalid value: \"a\": bad"
        );
        assert_eq!(
            FieldError::not_supported("spec.x", "\"c\"", &["a".into(), "b".into()]).message,
            "Unsupported value: \"c\": supported values: \"a\", \"b\""
        );
        assert_eq!(
            FieldError::too_long("spec.x", 3).message,
            "Too long: may not be longer than 3"
        );
        assert_eq!(
            FieldError::too_many("spec.x", 4, 3).message,
            "Too many: 4: must have at most 3 items"
        );
        assert_eq!(
            FieldError::forbidden("spec.x", "no").message,
            "Forbidden: no"
        );
        assert_eq!(
            FieldError::duplicate("spec.x[1]", "\"a\"").message,
            "Duplicate value: \"a\""
        );
    }

    #[test]
    fn values_render_like_go() {
        assert_eq!(render_value(&json!(null)), "\"null\"");
        assert_eq!(render_value(&json!(5)), "5");
        assert_eq!(
            render_value(&json!({"type": "Ready", "a": 1})),
            "map[string]interface {}{\"a\":1, \"type\":\"Ready\"}"
        );
        assert_eq!(render_value(&json!(["a", 1])), "[]interface {}{\"a\", 1}");
    }

    #[test]
    fn display_prints_nil_for_the_root() {
        let e = FieldError::required("", "");
        assert_eq!(e.to_string(), "<nil>: Required value");
        assert_eq!(e.reason_str(), "FieldValueRequired");
    }
}
