//! Admission of custom resources against their CRD's structural schema, as kube-apiserver does
//! it (Kubernetes docs, "Custom Resource Definitions": "Field pruning", "Defaulting",
//! "Validation", "Validation rules", "Validation ratcheting").
//!
//! [`admit`] runs kube-apiserver's steps in its order: prune unknown fields, apply defaults,
//! validate the OpenAPI keywords, check `x-kubernetes-list-type` invariants, then evaluate the
//! `x-kubernetes-validations` CEL rules. [`unknown_fields`] reports what pruning would drop, for
//! `fieldValidation=Strict`.

mod cel;
mod cel_library;
mod defaults;
mod error;
mod formats;
mod listtype;
pub(crate) mod node;
mod prune;
mod validate;

use serde_json::Value;

pub use error::{FieldError, FieldErrorReason};

use node::Node;

/// Admits a custom resource as kube-apiserver does for a structural schema.
///
/// - `schema`: the version's `openAPIV3Schema` (or the version's `schema` object wrapping it).
/// - `obj`: the incoming object; pruned and defaulted in place, even when validation fails.
/// - `old`: the stored object on update (`None` on create). It drives transition rules (rules
///   using `oldSelf` run only on update and only where the node existed before) and validation
///   ratcheting (unchanged nodes are not validated again).
///
/// Steps: 1) prune fields the schema does not specify (keeping `apiVersion`, `kind` and the
/// `ObjectMeta` fields of `metadata`; honouring `x-kubernetes-preserve-unknown-fields`,
/// `x-kubernetes-embedded-resource` and `additionalProperties`); 2) apply `default`s to absent
/// fields, nested ones included; 3) validate `type`, `required`, `enum`, `pattern`, `format`,
/// bounds, lengths, item and property counts, `uniqueItems`, `nullable`, `allOf`/`anyOf`/
/// `oneOf`/`not`; 4) check `x-kubernetes-list-type` `set`/`map` uniqueness; 5) evaluate the
/// `x-kubernetes-validations` rules. As in kube-apiserver, the CEL rules are not evaluated when
/// step 3 found a type error or an unsupported enum value; a single error at the object's root
/// says so instead (`some validation rules were not checked because the object was invalid;
/// correct the existing errors to complete validation`).
///
/// Errors: every [`FieldError`] found, in the order above.
pub fn admit(schema: &Value, obj: &mut Value, old: Option<&Value>) -> Result<(), Vec<FieldError>> {
    let root = Node::root(schema);
    let mut dropped = Vec::new();
    prune::prune(root, obj, "", true, &mut dropped);
    defaults::apply_defaults(root, obj, true);

    let mut errs = Vec::new();
    validate::validate(root, obj, old, "", &mut errs);
    listtype::validate_list_types(root, obj, "", &mut errs);
    let blocking = errs.iter().any(|e| {
        matches!(
            e.reason,
            FieldErrorReason::FieldValueTypeInvalid | FieldErrorReason::FieldValueNotSupported
        )
    });
    if blocking {
        errs.push(FieldError::invalid(
            "",
            &error::render_value(&Value::Null),
            "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
        ));
    } else {
        cel::validate_rules(root, obj, old, "", true, &mut errs);
    }
    if errs.is_empty() { Ok(()) } else { Err(errs) }
}

/// The paths of the fields [`admit`] would prune from `obj`, without changing it: `spec.foo`,
/// `spec.items[0].bar`, `metadata.foo`, in the object's key order. kube-apiserver reports each as
/// `unknown field "<path>"` when the request asks for `fieldValidation=Strict` (an error) or
/// `Warn` (a warning).
pub fn unknown_fields(schema: &Value, obj: &Value) -> Vec<String> {
    let mut copy = obj.clone();
    let mut dropped = Vec::new();
    prune::prune(Node::root(schema), &mut copy, "", true, &mut dropped);
    dropped
}
