//! Runs a fuzz target on stable Rust, without libFuzzer: every seed file, then seeded random
//! mutations of them (bit flips, byte insertions and deletions, splices, truncations).
//!
//! ```text
//! cargo run --manifest-path fuzz/Cargo.toml --example replay -- <target> <iterations> [seed]
//! ```
//!
//! Seeds come from `fuzz/seeds/<target>/` (and, for `manifest`, the repository's `examples/`).
//! A panic stops the run with the offending input written to `fuzz/artifacts/<target>/`.

use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn files_in(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_in(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn mutate(rng: &mut StdRng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut data = seeds[rng.random_range(0..seeds.len())].clone();
    for _ in 0..rng.random_range(1..8) {
        let len = data.len();
        match rng.random_range(0..6) {
            0 if len > 0 => {
                let i = rng.random_range(0..len);
                data[i] ^= 1 << rng.random_range(0..8);
            }
            1 => {
                let i = rng.random_range(0..=len);
                let byte = *b"{}[]:,\"\\-0123456789e.\n #&*!|>'"
                    .get(rng.random_range(0..30))
                    .unwrap_or(&b'x');
                data.insert(i, byte);
            }
            2 if len > 0 => {
                let i = rng.random_range(0..len);
                data.remove(i);
            }
            3 => {
                let other = &seeds[rng.random_range(0..seeds.len())];
                if !other.is_empty() {
                    let from = rng.random_range(0..other.len());
                    let to = rng.random_range(from..=other.len());
                    let at = rng.random_range(0..=len);
                    data.splice(at..at, other[from..to].iter().copied());
                }
            }
            4 => data.truncate(rng.random_range(0..=len)),
            _ => {
                let i = rng.random_range(0..=len);
                let random: Vec<u8> = (0..rng.random_range(1..16)).map(|_| rng.random()).collect();
                data.splice(i..i, random);
            }
        }
    }
    data
}

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = format!(
        "usage: replay <{}> <iterations> [seed]",
        mailtarget_operator_fuzz::TARGETS.join("|")
    );
    let Some(target) = args.next() else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let iterations: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let seed: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    if !mailtarget_operator_fuzz::TARGETS.contains(&target.as_str()) {
        eprintln!("unknown target {target:?}; {usage}");
        std::process::exit(2);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    files_in(&root.join("seeds").join(&target), &mut files);
    files_in(&root.join("corpus").join(&target), &mut files);
    if target == "manifest" {
        files_in(&root.join("..").join("examples"), &mut files);
    }
    files.sort();
    let mut seeds: Vec<Vec<u8>> = files.iter().filter_map(|f| std::fs::read(f).ok()).collect();
    if seeds.is_empty() {
        seeds.push(Vec::new());
    }
    let artifacts = root.join("artifacts").join(&target);
    let run_one = |data: &[u8]| {
        let outcome = std::panic::catch_unwind(|| mailtarget_operator_fuzz::run(&target, data));
        if outcome.is_err() {
            let _ = std::fs::create_dir_all(&artifacts);
            let file = artifacts.join("crash-replay");
            let _ = std::fs::write(&file, data);
            eprintln!("{target}: panic; input written to {}", file.display());
            std::process::exit(1);
        }
    };
    for seed_input in &seeds {
        run_one(seed_input);
    }
    let mut rng = StdRng::seed_from_u64(seed);
    for _ in 0..iterations {
        let data = mutate(&mut rng, &seeds);
        run_one(&data);
    }
    println!(
        "{target}: {} seeds and {iterations} mutations, no panic",
        seeds.len()
    );
}
