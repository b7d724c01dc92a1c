//! The CRDs in `crds/` are exactly what the Rust types generate, and the examples are valid.

use std::path::Path;

use mailtarget_operator::crd::generate;

/// `crds/` is regenerated from the types (`cargo run -- crds --out-dir crds`); this fails when
/// someone changes a type without regenerating.
#[test]
fn crds_directory_matches_the_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crds");
    let mut expected: Vec<String> = Vec::new();
    for crd in generate::all_crds() {
        let name = generate::file_name(&crd);
        let on_disk = std::fs::read_to_string(dir.join(&name)).unwrap_or_default();
        assert_eq!(
            on_disk,
            generate::crd_yaml(&crd).unwrap(),
            "crds/{name} is stale: run `cargo run -- crds --out-dir crds`"
        );
        expected.push(name);
    }
    let mut present: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    present.sort();
    expected.sort();
    assert_eq!(
        present, expected,
        "crds/ holds files that are not generated"
    );
}

/// Every example manifest passes validation; the account example is validated too, and
/// skipped by `plan`/`apply` with the reason they print.
#[test]
fn examples_are_valid() {
    let set = mailtarget_operator::manifest::load(&[
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
    ])
    .unwrap();
    // Five at the top, eight in tenants/ (two SubAccounts, and per team a domain and two keys).
    assert_eq!(set.resources.len(), 13);
    let skipped: Vec<(&str, &str)> = set
        .skipped
        .iter()
        .map(|(_, what, why)| (what.as_str(), *why))
        .collect();
    let account = (
        "mailtarget.co/v1alpha1/Account \"second-company\"",
        mailtarget_operator::manifest::ACCOUNT_KIND,
    );
    assert!(skipped.contains(&account), "{skipped:?}");
    let namespaces = skipped
        .iter()
        .filter(|(what, _)| what.contains("Namespace"));
    assert_eq!(
        namespaces.count(),
        3,
        "the tenants' namespaces: {skipped:?}"
    );
    assert_eq!(skipped.len(), 4, "{skipped:?}");
}

/// An account manifest with a schema violation fails like any other kind (it is not skipped
/// unread), and a valid ClusterAccount is skipped.
#[test]
fn account_manifests_are_validated_then_skipped() {
    use mailtarget_operator::manifest::{ACCOUNT_KIND, load_str};
    let bad = "apiVersion: mailtarget.co/v1alpha1\nkind: ClusterAccount\nmetadata: {name: default}\nspec:\n  credentials: {secretRef: {name: mt}}\n  apiUrl: ftp://x\n  requestBudget: {concurrency: 0}\n";
    let errors = load_str("accounts.yaml", bad).unwrap_err().to_string();
    assert!(errors.contains("spec.apiUrl"), "{errors}");
    assert!(
        errors.contains("spec.requestBudget.concurrency"),
        "{errors}"
    );
    let good = "apiVersion: mailtarget.co/v1alpha1\nkind: ClusterAccount\nmetadata: {name: default}\nspec:\n  credentials: {secretRef: {name: mt}}\n  scope: Company\n";
    let set = load_str("accounts.yaml", good).unwrap();
    assert!(set.resources.is_empty());
    assert_eq!(set.skipped.len(), 1);
    // The default's addresses are the flags', whatever its manifest says; another account's
    // are its manifest's: the note says which.
    let note = set.skipped[0].2;
    assert!(
        note.contains("--api-url") && !note.contains("this manifest's"),
        "{note}"
    );
    let other = good.replace("name: default", "name: billing");
    let set = load_str("accounts.yaml", &other).unwrap();
    assert_eq!(set.skipped[0].2, ACCOUNT_KIND);
    assert!(ACCOUNT_KIND.contains("this manifest's addresses"));
}

/// `plan`/`apply` hold one key, the default account's: a resource naming another account is
/// refused at load (nothing is called), one naming `default` explicitly is accepted.
#[test]
fn manifests_naming_another_account_are_refused_by_the_cli() {
    use mailtarget_operator::manifest::load_str;
    let other = "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: app}\nspec:\n  secretName: app-key\n  accountRef: {kind: Account, name: billing}\n";
    let errors = load_str("keys.yaml", other).unwrap_err().to_string();
    assert!(errors.contains("spec.accountRef"), "{errors}");
    assert!(errors.contains("Account \"billing\""), "{errors}");
    let explicit = "apiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: app}\nspec:\n  secretName: app-key\n  accountRef: {name: default}\n";
    assert_eq!(load_str("keys.yaml", explicit).unwrap().resources.len(), 1);
    // A key placed inside a SubAccount of another account says so (not "no SubAccount").
    let apart = "apiVersion: mailtarget.co/v1alpha1\nkind: SubAccount\nmetadata: {name: team}\nspec:\n  accountRef: {name: billing}\n---\napiVersion: mailtarget.co/v1alpha1\nkind: ApiKey\nmetadata: {name: app}\nspec:\n  secretName: app-key\n  subAccountRef: {name: team}\n";
    let errors = load_str("apart.yaml", apart).unwrap_err().to_string();
    assert!(errors.contains("name the same account"), "{errors}");
    assert!(!errors.contains("no SubAccount"), "{errors}");
}
