#!/usr/bin/env bash
# Short, bounded fuzz run of the targets in fuzz/: `manifest` (the manifest reader of plan/apply)
# and `api_responses` (decoding of every answer type of the service's interface). See
# docs/guarantees.md, section "Fuzzing".
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]      # default 60
#
# Runs cargo-fuzz (installed on first use with `cargo install cargo-fuzz`; libFuzzer is built
# from source, so a C++ compiler is needed): coverage-guided, each target for
# SECONDS_PER_TARGET seconds, inputs up to 64 KiB, at most 10 s and 2 GiB of memory per input.
# With a nightly toolchain (`rustup toolchain install nightly`) it uses AddressSanitizer; on
# stable it runs without a sanitizer (`-s none`), which needs no unstable compiler flag. The
# corpus grows in fuzz/corpus/<target>/ (seeded from fuzz/seeds/ and examples/); a crash is
# written to fuzz/artifacts/<target>/ and replayed with `cargo fuzz run <target> <file>`.
#
# FUZZ_REPLAY=1 runs the `replay` example instead, which needs neither libFuzzer nor a C++
# compiler: every seed, then FUZZ_ITERATIONS (default 20000) seeded random mutations per target,
# without coverage guidance.
#
# Nothing here is part of CI: the fuzz crate is outside the workspace and is never built by
# `cargo build` or `cargo test` at the repository root.
set -euo pipefail

cd "$(dirname "$0")/.."
seconds="${1:-60}"
iterations="${FUZZ_ITERATIONS:-20000}"
targets=(manifest api_responses)

if [[ "${FUZZ_REPLAY:-0}" == "1" ]]; then
    for target in "${targets[@]}"; do
        cargo run --quiet --manifest-path fuzz/Cargo.toml --example replay -- "$target" "$iterations"
    done
    exit 0
fi

if ! command -v cargo-fuzz >/dev/null 2>&1; then
    echo "installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi
if command -v rustup >/dev/null 2>&1 && rustup run nightly rustc --version >/dev/null 2>&1; then
    toolchain=(+nightly)
    sanitizer=address
else
    toolchain=()
    sanitizer=none
fi
for target in "${targets[@]}"; do
    corpus="corpus/$target"
    mkdir -p "fuzz/$corpus"
    cp -n fuzz/seeds/"$target"/* "fuzz/$corpus"/ 2>/dev/null || true
    if [[ "$target" == "manifest" ]]; then
        cp -n examples/*.yaml "fuzz/$corpus"/ 2>/dev/null || true
    fi
    echo "== $target: ${seconds}s, sanitizer $sanitizer" >&2
    (cd fuzz && cargo "${toolchain[@]}" fuzz run --dev -s "$sanitizer" "$target" "$corpus" -- \
        -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048)
done
