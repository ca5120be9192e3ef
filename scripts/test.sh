#!/usr/bin/env bash
# The project's whole test command; CI runs exactly this (.ci/run).
#
# From a clean clone it builds everything it needs (see scripts/setup.sh), then runs the
# Rust checks and tests, the Python linters and type checks, and pytest. Any failure,
# including pytest collecting no test at all, fails the run.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/setup.sh" test

step() { echo; echo "==> $*"; }

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo machete: no declared crate goes unused"
# Installed into the clone (target/tools/) once, from crates.io.
if [ ! -x target/tools/bin/cargo-machete ]; then
    cargo install --quiet --locked --root target/tools cargo-machete@0.9.2
fi
target/tools/bin/cargo-machete

step "cargo test"
# The pyo3 crate's test binary links libpython, whose directory (pyenv's, say) the
# dynamic loader may not search; the interpreter itself finds it through its rpath.
py_libdir="$(python -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR") or "")')"
LD_LIBRARY_PATH="$py_libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" cargo test --workspace --release

step "ruff"
ruff check python tests benches smoke
ruff format --check python tests benches smoke

step "stubtest: _core.pyi against the built module"
stubtest_args=(jetstream_arrow._core)
if [ -f scripts/stubtest-allowlist.txt ]; then
    stubtest_args+=(--allowlist scripts/stubtest-allowlist.txt)
fi
python -m mypy.stubtest "${stubtest_args[@]}"

step "mypy"
mypy python/jetstream_arrow

step "docs: mkdocs build --strict"
# The guides in docs/ as a site (mkdocs.yml); a broken link, a missing anchor or a page
# left out of the nav is an error. The site goes to target/site/ (git-ignored).
mkdocs build --strict -d target/site

step "pytest"
rc=0
python -m pytest --durations=25 "$@" || rc=$?
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: that is a failure here" >&2
    exit 1
fi
if [ "$rc" -ne 0 ]; then
    exit "$rc"
fi

step "smoke: the wheel and the sdist, installed outside the tree"
bash scripts/smoke.sh
