#!/usr/bin/env bash
# The Rust checks of the test command: clippy, unused dependencies (cargo machete) and
# the Rust tests. Run by scripts/test.sh beside pytest (after scripts/setup.sh, whose
# release build the tests reuse); alone: `source scripts/setup.sh && bash
# scripts/rust-checks.sh`. Prints each check's wall time; fails at the first failure.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

check() {
    local name="$1"
    shift
    local started=$SECONDS
    echo
    echo "==> $name"
    "$@"
    echo "($name: $((SECONDS - started)) s)"
}

machete() {
    # Installed into the clone (target/tools/) once, from crates.io.
    if [ ! -x target/tools/bin/cargo-machete ]; then
        cargo install --quiet --locked --root target/tools cargo-machete@0.9.2
    fi
    target/tools/bin/cargo-machete
}

check "cargo clippy" cargo clippy --workspace --all-targets -- -D warnings
check "cargo machete: no declared crate goes unused" machete
# The whole workspace, so that the dependencies' features are those of the module's
# build; the glue crate itself is not compiled here (rust/python/Cargo.toml says why).
check "cargo test (the release build's dependencies, reused)" cargo test --workspace --release
