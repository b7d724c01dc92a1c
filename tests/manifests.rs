//! Reading manifests for `plan`, `apply` and `destroy`: streams of documents in YAML or JSON,
//! and the problems they are refused for, as `kubectl apply --validate=strict` reads them.

use mailtarget_operator::manifest::load_str;

const SUB: &str = r#"{"apiVersion": "mailtarget.co/v1alpha1", "kind": "SubAccount", "metadata": {"name": "NAME"}, "spec": {"name": "NAME"}}"#;

fn sub(name: &str) -> String {
    SUB.replace("NAME", name)
}

/// A `.json` file may hold a stream of JSON objects, one after the other, as kubectl's
/// YAML-or-JSON decoder reads it (`kubectl get -o json` of several objects, `jq -c` output).
#[test]
fn a_stream_of_json_objects_is_read_object_by_object() {
    for separator in ["", "\n", " \n\t"] {
        let text = format!("{}{separator}{}\n", sub("a"), sub("b"));
        let set = load_str("two.json", &text).unwrap_or_else(|e| panic!("{separator:?}: {e}"));
        let names: Vec<&str> = set.resources.iter().map(|r| r.resource.name()).collect();
        assert_eq!(names, ["a", "b"], "{separator:?}");
    }
    // Where the JSON stream ends, YAML documents may follow (kubectl reads them too).
    let yaml = "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: c}\nspec: {name: c}\n";
    let text = format!("{}{}\n---\n{yaml}", sub("a"), sub("b"));
    let set = load_str("mixed.json", &text).unwrap();
    let names: Vec<&str> = set.resources.iter().map(|r| r.resource.name()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    let errors = load_str(
        "mixed.json",
        &format!("{}\n---\n{yaml}  bad: [\n", sub("a")),
    )
    .unwrap_err()
    .to_string();
    assert!(
        errors.contains("mixed.json (document 2): not valid YAML"),
        "{errors}"
    );
    assert!(
        errors.contains("line 7"),
        "YAML's lines are the file's: {errors}"
    );
    // A problem in the second object names it.
    let text = format!("{}\n{}\n", sub("a"), sub("Bad_Name"));
    let errors = load_str("two.json", &text).unwrap_err().to_string();
    assert!(errors.contains("two.json (document 2)"), "{errors}");
    assert!(errors.contains("metadata.name"), "{errors}");
    // A syntax error is still one, with its place.
    let errors = load_str("two.json", &format!("{}\n{{\"kind\": ", sub("a")))
        .unwrap_err()
        .to_string();
    assert!(errors.contains("two.json (document 2)"), "{errors}");
    assert!(errors.contains("not valid JSON"), "{errors}");
}

/// Every problem of a document is reported at once, as the API server lists every field error
/// of an object: a bad name does not hide a bad namespace or an unknown field of the spec.
#[test]
fn every_problem_of_a_document_is_reported() {
    let text = "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: Bad_Name\n  namespace: Bad_Space\nspec:\n  secretName: s\n  bogus: 1\n  allowedIps: [\"10.0.0.300\"]\n";
    let errors = load_str("key.yaml", text).unwrap_err().to_string();
    for field in [
        "metadata.name:",
        "metadata.namespace:",
        "spec.bogus:",
        "spec.allowedIps[0]:",
    ] {
        assert!(errors.contains(field), "{field}: {errors}");
    }
}

/// The third and later definitions of one object, or claims of one API object, point to the
/// first one, which is the one to keep.
#[test]
fn repeated_definitions_point_to_the_first() {
    let text = [sub("a"), sub("a"), sub("a")].join("\n---\n");
    let errors = load_str("subs.yaml", &text).unwrap_err().to_string();
    assert_eq!(
        errors
            .matches("also defined at subs.yaml (document 1)")
            .count(),
        2,
        "{errors}"
    );
    let claims = ["a", "b", "c"]
        .map(|n| SUB.replacen("NAME", n, 1).replace("NAME", "Team"))
        .join("\n---\n");
    let errors = load_str("subs.yaml", &claims).unwrap_err().to_string();
    assert_eq!(
        errors
            .matches("also claimed by SubAccount \"a\" at subs.yaml (document 1)")
            .count(),
        2,
        "{errors}"
    );
    assert_eq!(errors.matches("(ConflictingOwner)").count(), 2, "{errors}");
}

/// Object and Secret names are DNS-1123 subdomains as kube-apiserver checks them
/// (`IsDNS1123Subdomain` in k8s.io/apimachinery): at most 253 characters in all, with no limit
/// per dot-separated part, so a 100-character name without dots is valid. A namespace is a
/// label (at most 63).
#[test]
fn names_are_checked_as_the_api_server_checks_them() {
    let long = "n".repeat(100);
    let key = format!(
        "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata:\n  name: {long}\nspec:\n  secretName: {long}.keys\n"
    );
    let set = load_str("key.yaml", &key).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(set.resources[0].resource.name(), long);
    for (text, field) in [
        (key.replace(&long, &"n".repeat(254)), "metadata.name"),
        (key.replace(&long, "a..b"), "metadata.name"),
        (
            key.replace(
                "metadata:\n",
                &format!("metadata:\n  namespace: {}\n", "s".repeat(64)),
            ),
            "metadata.namespace",
        ),
    ] {
        let errors = load_str("key.yaml", &text).unwrap_err().to_string();
        assert!(errors.contains(field), "{field}: {errors}");
    }
}

/// API groups are case-sensitive, as the API server reads them: a document whose group differs
/// from `mailtarget.co` in case only is a typo to report, not another group's document to skip
/// (skipped, it would make `plan --detailed-exitcode` say "no changes"). Another group is
/// skipped.
#[test]
fn a_group_written_in_another_case_is_an_error() {
    let doc = |api_version: &str| {
        format!(
            "apiVersion: {api_version}\nkind: SubAccount\nmetadata: {{name: a}}\nspec: {{name: a}}\n"
        )
    };
    let errors = load_str("sub.yaml", &doc("Mailtarget.co/v1alpha1"))
        .unwrap_err()
        .to_string();
    assert!(
        errors.contains("use \"mailtarget.co/v1alpha1\""),
        "{errors}"
    );
    let set = load_str("sub.yaml", &doc("example.com/v1")).unwrap();
    assert_eq!((set.resources.len(), set.skipped.len()), (0, 1));
}
