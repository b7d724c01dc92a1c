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

/// Every example manifest passes validation.
#[test]
fn examples_are_valid() {
    let set = mailtarget_operator::manifest::load(&[
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
    ])
    .unwrap();
    assert_eq!(set.resources.len(), 5);
}
