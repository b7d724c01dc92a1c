//! The fuzz targets' bodies (`fuzz/src/lib.rs`, outside the workspace) compiled into the test
//! suite and run on every seed and example: a rename in the library breaks this build, not only
//! the next fuzzing session, and every seed must pass each target without a panic.

#[path = "../fuzz/src/lib.rs"]
#[allow(dead_code)]
mod harness;

use std::path::{Path, PathBuf};

fn files_in(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_in(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// Every seed of each target (and, for `manifest`, every example) runs through the target.
#[test]
fn every_seed_runs_through_its_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for target in harness::TARGETS {
        let mut files = Vec::new();
        files_in(&root.join("fuzz/seeds").join(target), &mut files);
        if *target == "manifest" {
            files_in(&root.join("examples"), &mut files);
        }
        assert!(files.len() >= 3, "{target}: seeds found: {files:?}");
        for file in &files {
            let data = std::fs::read(file).unwrap();
            assert!(harness::run(target, &data), "{target} is a target");
        }
    }
    assert!(!harness::run("no-such-target", b""));
}
