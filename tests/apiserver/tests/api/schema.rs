//! Admission of custom resources against a structural schema: each keyword with a passing and a
//! failing input, pruning, defaulting and CEL validation rules, checked against the paths,
//! reasons and messages kube-apiserver gives.

use mailtarget_test_apiserver::schema::{FieldError, admit, unknown_fields};
use serde_json::{Value, json};

/// A schema exercising every keyword the emulator checks, under `spec`.
fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "required": ["domain"],
                "properties": {
                    "domain": {"type": "string", "pattern": "^[a-z0-9.-]+$", "maxLength": 20},
                    "note": {"type": "string", "minLength": 1},
                    "count": {"type": "integer", "minimum": 1, "maximum": 10},
                    "ratio": {"type": "number", "exclusiveMinimum": true, "minimum": 0, "exclusiveMaximum": true, "maximum": 1},
                    "step": {"type": "integer", "multipleOf": 5},
                    "port": {"x-kubernetes-int-or-string": true},
                    "policy": {"type": "string", "enum": ["Delete", "Orphan"]},
                    "allowedIps": {"type": "array", "maxItems": 3, "items": {"type": "string", "format": "ipv4"}},
                    "names": {"type": "array", "minItems": 1, "uniqueItems": true, "items": {"type": "string"}},
                    "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                    "conditions": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                        "items": {"type": "object", "required": ["type"], "properties": {"type": {"type": "string"}, "status": {"type": "string"}}}},
                    "labels": {"type": "object", "maxProperties": 2, "additionalProperties": {"type": "string"}},
                    "selector": {"type": "object", "minProperties": 1, "x-kubernetes-preserve-unknown-fields": true},
                    "maybe": {"type": "string", "nullable": true},
                    "enabled": {"type": "boolean"},
                    "ref": {"type": "object", "anyOf": [{"required": ["name"]}, {"required": ["uid"]}],
                        "properties": {"name": {"type": "string"}, "uid": {"type": "string"}}},
                    "choice": {"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
                        "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
                    "notEmpty": {"type": "string", "not": {"enum": [""]}},
                    "both": {"type": "string", "allOf": [{"minLength": 2}, {"maxLength": 4}]}
                }
            }
        }
    })
}

fn object(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": spec})
}

fn errors_for(spec: Value) -> Vec<FieldError> {
    let mut obj = object(spec);
    match admit(&schema(), &mut obj, None) {
        Ok(()) => Vec::new(),
        Err(errs) => errs,
    }
}

/// Every keyword: a valid value passes, an invalid one fails with kube-apiserver's path, reason and
/// message.
#[test]
fn keywords_pass_and_fail_like_kube_apiserver() {
    let passing = [
        json!({"domain": "mail.example.com"}),
        json!({"domain": "a", "count": 3}),
        json!({"domain": "a", "count": 3.0}),
        json!({"domain": "a", "ratio": 0.5}),
        json!({"domain": "a", "step": 15}),
        json!({"domain": "a", "port": 8080}),
        json!({"domain": "a", "port": "http"}),
        json!({"domain": "a", "policy": "Orphan"}),
        json!({"domain": "a", "allowedIps": ["10.0.0.1", "192.168.1.1"]}),
        json!({"domain": "a", "names": ["x", "y"]}),
        json!({"domain": "a", "tags": ["x", "y"]}),
        json!({"domain": "a", "conditions": [{"type": "Ready"}, {"type": "Stalled"}]}),
        json!({"domain": "a", "labels": {"a": "b"}}),
        json!({"domain": "a", "selector": {"anything": {"goes": 1}}}),
        json!({"domain": "a", "maybe": null}),
        json!({"domain": "a", "ref": {"uid": "u"}}),
        json!({"domain": "a", "choice": {"b": "x"}}),
        json!({"domain": "a", "notEmpty": "x"}),
        json!({"domain": "a", "both": "abc"}),
    ];
    for spec in passing {
        assert_eq!(errors_for(spec.clone()), vec![], "{spec}");
    }

    // (spec, path, reason, message)
    let failing: Vec<(Value, &str, &str, &str)> = vec![
        (
            json!({}),
            "spec.domain",
            "FieldValueRequired",
            "Required value",
        ),
        (
            json!({"domain": 5}),
            "spec.domain",
            "FieldValueTypeInvalid",
            "Invalid value: \"integer\": spec.domain in body must be of type string: \"integer\"",
        ),
        (
            json!({"domain": "Bad_Domain"}),
            "spec.domain",
            "FieldValueInvalid",
            "Invalid value: \"Bad_Domain\": spec.domain in body should match '^[a-z0-9.-]+$'",
        ),
        (
            json!({"domain": "a".repeat(21)}),
            "spec.domain",
            "FieldValueTooLong",
            "Too long: may not be longer than 20",
        ),
        (
            json!({"domain": "a", "note": ""}),
            "spec.note",
            "FieldValueInvalid",
            "Invalid value: \"\": spec.note in body should be at least 1 chars long",
        ),
        (
            json!({"domain": "a", "count": 3.5}),
            "spec.count",
            "FieldValueTypeInvalid",
            "Invalid value: \"number\": spec.count in body must be of type integer: \"number\"",
        ),
        (
            json!({"domain": "a", "count": 0}),
            "spec.count",
            "FieldValueInvalid",
            "Invalid value: 0: spec.count in body should be greater than or equal to 1",
        ),
        (
            json!({"domain": "a", "count": 11}),
            "spec.count",
            "FieldValueInvalid",
            "Invalid value: 11: spec.count in body should be less than or equal to 10",
        ),
        (
            json!({"domain": "a", "ratio": 1}),
            "spec.ratio",
            "FieldValueInvalid",
            "Invalid value: 1: spec.ratio in body should be less than 1",
        ),
        (
            json!({"domain": "a", "ratio": 0}),
            "spec.ratio",
            "FieldValueInvalid",
            "Invalid value: 0: spec.ratio in body should be greater than 0",
        ),
        (
            json!({"domain": "a", "step": 7}),
            "spec.step",
            "FieldValueInvalid",
            "Invalid value: 7: spec.step in body should be a multiple of 5",
        ),
        (
            json!({"domain": "a", "port": true}),
            "spec.port",
            "FieldValueTypeInvalid",
            "Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
        ),
        (
            json!({"domain": "a", "policy": "Purge"}),
            "spec.policy",
            "FieldValueNotSupported",
            "Unsupported value: \"Purge\": supported values: \"Delete\", \"Orphan\"",
        ),
        (
            json!({"domain": "a", "allowedIps": ["10.0.0.1", "300.1.1.1"]}),
            "spec.allowedIps[1]",
            "FieldValueTypeInvalid",
            "Invalid value: \"300.1.1.1\": spec.allowedIps[1] in body must be of type ipv4: \"300.1.1.1\"",
        ),
        (
            json!({"domain": "a", "allowedIps": ["1.1.1.1", "1.1.1.2", "1.1.1.3", "1.1.1.4"]}),
            "spec.allowedIps",
            "FieldValueTooMany",
            "Too many: 4: must have at most 3 items",
        ),
        (
            json!({"domain": "a", "names": []}),
            "spec.names",
            "FieldValueInvalid",
            "Invalid value: []interface {}{}: spec.names in body should have at least 1 items",
        ),
        (
            json!({"domain": "a", "names": ["x", "x"]}),
            "spec.names",
            "FieldValueInvalid",
            "Invalid value: []interface {}{\"x\", \"x\"}: spec.names in body shouldn't contain duplicates",
        ),
        (
            json!({"domain": "a", "tags": ["x", "y", "x"]}),
            "spec.tags[2]",
            "FieldValueDuplicate",
            "Duplicate value: \"x\"",
        ),
        (
            json!({"domain": "a", "conditions": [{"type": "Ready"}, {"type": "Ready", "status": "True"}]}),
            "spec.conditions[1]",
            "FieldValueDuplicate",
            "Duplicate value: map[string]interface {}{\"type\":\"Ready\"}",
        ),
        (
            json!({"domain": "a", "conditions": [{"status": "True"}]}),
            "spec.conditions[0].type",
            "FieldValueRequired",
            "Required value",
        ),
        (
            json!({"domain": "a", "labels": {"a": "1", "b": "2", "c": "3"}}),
            "spec.labels",
            "FieldValueTooMany",
            "Too many: 3: must have at most 2 items",
        ),
        (
            json!({"domain": "a", "labels": {"a": 1}}),
            "spec.labels.a",
            "FieldValueTypeInvalid",
            "Invalid value: \"integer\": spec.labels.a in body must be of type string: \"integer\"",
        ),
        (
            json!({"domain": "a", "selector": {}}),
            "spec.selector",
            "FieldValueInvalid",
            "Invalid value: map[string]interface {}{}: spec.selector in body should have at least 1 properties",
        ),
        (
            json!({"domain": "a", "allowedIps": [null]}),
            "spec.allowedIps[0]",
            "FieldValueTypeInvalid",
            "Invalid value: \"null\": spec.allowedIps[0] in body must be of type string: \"null\"",
        ),
        (
            json!({"domain": "a", "enabled": "yes"}),
            "spec.enabled",
            "FieldValueTypeInvalid",
            "Invalid value: \"string\": spec.enabled in body must be of type boolean: \"string\"",
        ),
        (
            json!({"domain": "a", "ref": {}}),
            "",
            "FieldValueInvalid",
            "Invalid value: \"\": \"spec.ref\" must validate at least one schema (anyOf)",
        ),
        (
            json!({"domain": "a", "choice": {"a": "x", "b": "y"}}),
            "",
            "FieldValueInvalid",
            "Invalid value: \"\": \"spec.choice\" must validate one and only one schema (oneOf)",
        ),
        (
            json!({"domain": "a", "notEmpty": ""}),
            "",
            "FieldValueInvalid",
            "Invalid value: \"\": \"spec.notEmpty\" must not validate the schema (not)",
        ),
        (
            json!({"domain": "a", "both": "abcdef"}),
            "",
            "FieldValueInvalid",
            "Invalid value: \"\": \"spec.both\" must validate all the schemas (allOf)",
        ),
    ];
    for (spec, path, reason, message) in failing {
        let errs = errors_for(spec.clone());
        let first = errs
            .first()
            .unwrap_or_else(|| panic!("{spec} passed, expected {message}"));
        assert_eq!(
            (
                first.path.as_str(),
                first.reason_str(),
                first.message.as_str()
            ),
            (path, reason, message),
            "{spec}: {errs:?}"
        );
    }
}

/// anyOf failures carry the first branch's own errors after the composite one.
#[test]
fn any_of_reports_the_first_branch_errors() {
    let errs = errors_for(json!({"domain": "a", "ref": {}}));
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert_eq!(
        (errs[1].path.as_str(), errs[1].reason_str()),
        ("spec.ref.name", "FieldValueRequired")
    );
}

/// Unknown fields are pruned and listed, `apiVersion`/`kind`/`metadata` survive, preserved
/// subtrees keep their content.
#[test]
fn pruning_drops_unknown_fields_and_reports_them() {
    let mut obj = object(
        json!({"domain": "a", "bogus": 1, "selector": {"free": true}, "conditions": [{"type": "A", "extra": 1}]}),
    );
    obj["status"] = json!({"x": 1});
    obj["metadata"]["unknownMeta"] = json!(true);
    let mut unknown = unknown_fields(&schema(), &obj);
    unknown.sort();
    assert_eq!(
        unknown,
        vec![
            "metadata.unknownMeta",
            "spec.bogus",
            "spec.conditions[0].extra",
            "status"
        ]
    );
    assert_eq!(
        obj["spec"]["bogus"],
        json!(1),
        "unknown_fields must not mutate"
    );

    admit(&schema(), &mut obj, None).expect("valid after pruning");
    assert_eq!(
        obj,
        json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"},
               "spec": {"domain": "a", "selector": {"free": true}, "conditions": [{"type": "A"}]}})
    );
}

/// Defaults fill absent fields, nested ones included, before validation.
#[test]
fn defaults_apply_before_validation() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "default": {}, "properties": {
        "deletionPolicy": {"type": "string", "enum": ["Delete", "Orphan"], "default": "Delete"},
        "apiKey": {"type": "object", "properties": {"permissionType": {"type": "string", "default": "all"}}}
    }}}});
    let mut obj =
        json!({"apiVersion": "v", "kind": "K", "metadata": {"name": "n"}, "spec": {"apiKey": {}}});
    admit(&schema, &mut obj, None).expect("valid");
    assert_eq!(
        obj["spec"],
        json!({"deletionPolicy": "Delete", "apiKey": {"permissionType": "all"}})
    );

    let mut absent = json!({"apiVersion": "v", "kind": "K", "metadata": {"name": "n"}});
    admit(&schema, &mut absent, None).expect("valid");
    assert_eq!(absent["spec"], json!({"deletionPolicy": "Delete"}));
}

fn cel_schema() -> Value {
    json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "!has(self.minCount) || !has(self.maxCount) || self.minCount <= self.maxCount"},
            {"rule": "!has(self.mode) || self.mode != 'Secret' || has(self.secretName)", "fieldPath": ".secretName",
             "reason": "FieldValueRequired", "message": "secretName is required in Secret mode"}
        ],
        "properties": {
            "domain": {"type": "string", "x-kubernetes-validations": [
                {"rule": "self == oldSelf", "message": "domain is immutable"},
                {"rule": "!self.endsWith('.invalid')", "messageExpression": "'domain ' + self + ' is reserved'"}
            ]},
            "mode": {"type": "string"},
            "secretName": {"type": "string"},
            "minCount": {"type": "integer"},
            "maxCount": {"type": "integer"},
            "allowedIps": {"type": "array", "items": {"type": "string"},
                "x-kubernetes-validations": [{"rule": "self.all(ip, isIP(ip))", "message": "every entry must be an IP address",
                    "reason": "FieldValueForbidden"}]},
            "counter": {"type": "integer", "x-kubernetes-validations": [
                {"rule": "!oldSelf.hasValue() || self >= oldSelf.value()", "optionalOldSelf": true, "message": "counter may not decrease"}]},
            "broken": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                "x-kubernetes-validations": [{"rule": "self.missing == 1"}]},
            "conditions": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                "items": {"type": "object", "properties": {"type": {"type": "string"}, "since": {"type": "integer"}},
                    "x-kubernetes-validations": [{"rule": "self.since >= oldSelf.since", "message": "since may not go back"}]}}
        }
    }}}})
}

fn cel_object(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": spec})
}

fn cel_errors(spec: Value, old_spec: Option<Value>) -> Vec<(String, String, String)> {
    let mut obj = cel_object(spec);
    let old = old_spec.map(cel_object);
    match admit(&cel_schema(), &mut obj, old.as_ref()) {
        Ok(()) => Vec::new(),
        Err(errs) => errs
            .into_iter()
            .map(|e| (e.path.clone(), e.reason_str().to_string(), e.message))
            .collect(),
    }
}

fn one(path: &str, reason: &str, message: &str) -> Vec<(String, String, String)> {
    vec![(path.to_string(), reason.to_string(), message.to_string())]
}

/// `self == oldSelf` is skipped on create and enforced, with its message, on update.
#[test]
fn immutability_rule_is_a_transition_rule() {
    assert_eq!(cel_errors(json!({"domain": "a.com"}), None), vec![]);
    assert_eq!(
        cel_errors(json!({"domain": "a.com"}), Some(json!({"domain": "a.com"}))),
        vec![]
    );
    assert_eq!(
        cel_errors(json!({"domain": "b.com"}), Some(json!({"domain": "a.com"}))),
        one(
            "spec.domain",
            "FieldValueInvalid",
            "Invalid value: \"string\": domain is immutable"
        )
    );
    // The field did not exist before: the transition rule does not run.
    assert_eq!(
        cel_errors(json!({"domain": "b.com"}), Some(json!({}))),
        vec![]
    );
}

/// Default messages, messageExpression, fieldPath and reason shape the error.
#[test]
fn rule_messages_paths_and_reasons() {
    assert_eq!(
        cel_errors(json!({"minCount": 5, "maxCount": 2}), None),
        one(
            "spec",
            "FieldValueInvalid",
            "Invalid value: \"object\": failed rule: !has(self.minCount) || !has(self.maxCount) || self.minCount <= self.maxCount"
        )
    );
    assert_eq!(
        cel_errors(json!({"mode": "Secret"}), None),
        one(
            "spec.secretName",
            "FieldValueRequired",
            "Required value: secretName is required in Secret mode"
        )
    );
    assert_eq!(
        cel_errors(json!({"domain": "x.invalid"}), None),
        one(
            "spec.domain",
            "FieldValueInvalid",
            "Invalid value: \"string\": domain x.invalid is reserved"
        )
    );
    assert_eq!(
        cel_errors(json!({"allowedIps": ["10.0.0.1", "nope"]}), None),
        one(
            "spec.allowedIps",
            "FieldValueForbidden",
            "Forbidden: every entry must be an IP address"
        )
    );
    assert_eq!(
        cel_errors(json!({"allowedIps": ["10.0.0.1", "2001:db8::1"]}), None),
        vec![]
    );
}

/// An evaluation error is reported with the rule, as cel-go words it.
#[test]
fn evaluation_errors_name_the_rule() {
    assert_eq!(
        cel_errors(json!({"broken": {"other": 1}}), None),
        one(
            "spec.broken",
            "FieldValueInvalid",
            "Invalid value: \"object\": no such key: missing evaluating rule: self.missing == 1"
        )
    );
}

/// `optionalOldSelf` rules run on create with `oldSelf` empty, and compare on update.
#[test]
fn optional_old_self_runs_on_create() {
    assert_eq!(cel_errors(json!({"counter": 1}), None), vec![]);
    assert_eq!(
        cel_errors(json!({"counter": 5}), Some(json!({"counter": 3}))),
        vec![]
    );
    assert_eq!(
        cel_errors(json!({"counter": 2}), Some(json!({"counter": 3}))),
        one(
            "spec.counter",
            "FieldValueInvalid",
            "Invalid value: \"integer\": counter may not decrease"
        )
    );
}

/// Items of a list-type map correlate with the old item of the same key for transition rules.
#[test]
fn list_map_items_correlate_by_key() {
    let old = json!({"conditions": [{"type": "A", "since": 5}, {"type": "B", "since": 1}]});
    assert_eq!(
        cel_errors(
            json!({"conditions": [{"type": "B", "since": 2}, {"type": "A", "since": 6}]}),
            Some(old.clone())
        ),
        vec![]
    );
    assert_eq!(
        cel_errors(
            json!({"conditions": [{"type": "B", "since": 2}, {"type": "A", "since": 4}]}),
            Some(old)
        ),
        one(
            "spec.conditions[1]",
            "FieldValueInvalid",
            "Invalid value: \"object\": since may not go back"
        )
    );
}

/// A type error stops CEL evaluation, with kube-apiserver's note at the root.
#[test]
fn type_errors_block_rules() {
    let errs = cel_errors(json!({"minCount": "five", "maxCount": 2}), None);
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert_eq!(errs[0].0, "spec.minCount");
    assert_eq!(
        errs[1],
        (
            String::new(),
            "FieldValueInvalid".to_string(),
            "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".to_string()
        )
    );
}

/// Unchanged invalid values pass on update (validation ratcheting); changed ones fail.
#[test]
fn unchanged_values_are_ratcheted_on_update() {
    let mut obj = object(json!({"domain": "Bad_Domain"}));
    let old = obj.clone();
    assert_eq!(admit(&schema(), &mut obj, Some(&old)), Ok(()));
    let mut changed = object(json!({"domain": "Still_Bad"}));
    let errs = admit(&schema(), &mut changed, Some(&old)).expect_err("changed value is validated");
    assert_eq!(errs[0].path, "spec.domain");
}
