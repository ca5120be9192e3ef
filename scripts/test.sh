#!/usr/bin/env bash
# The project's whole test command; CI runs exactly this (.ci/run).
#
# From a clean clone it builds everything it needs (see scripts/setup.sh), then runs the
# Rust checks and tests, the Python linters and type checks, pytest and the smoke test
# of the installed wheel. Any failure, including pytest collecting no test at all,
# fails the run. At the end (pass or fail) it prints each step's wall time, and warns
# when the whole run took longer than its budget.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/timing.sh
source "$ROOT/scripts/timing.sh"
# Jobs run beside other steps (the smoke step's builds), stopped if the run ends first.
background=()
on_exit() {
    local rc=$?
    local pid
    for pid in "${background[@]}"; do
        kill -- "-$pid" 2>/dev/null || true
    done
    timing_report "$rc"
}
trap on_exit EXIT

# pytest's parallel workers (tests mostly wait on servers and Spark, so more than cores).
PYTEST_WORKERS="${PYTEST_WORKERS:-3}"

step "setup: .venv, the extras and the release build of the native module"
source "$ROOT/scripts/setup.sh" test

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

step "cargo test (the release build's dependencies, reused)"
# The whole workspace, so that the dependencies' features are those of the module's
# build; the glue crate itself is not compiled here (rust/python/Cargo.toml says why).
cargo test --workspace --release

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

step "pytest ($PYTEST_WORKERS workers; the smoke step's builds beside it)"
# The smoke step's builds (the wheels, the sdist's own build, a fresh virtualenv) are
# compilation and downloads, and the tests mostly wait on servers and Spark: the two
# run at once, the builds in a process group of their own, logged to a file.
smoke_log="$ROOT/target/smoke-build.log"
setsid bash scripts/smoke.sh build >"$smoke_log" 2>&1 &
background+=("$!")
smoke_started=$SECONDS
# More workers than cores pay, for the same reason; each worker has its own servers
# and at most one Spark session (tests/conftest.py says how tests are grouped).
# Arguments of this script come last, so `-n 0` runs the tests in one process.
rc=0
python -m pytest -n "$PYTEST_WORKERS" --durations=25 "$@" || rc=$?
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: that is a failure here" >&2
    exit 1
fi
if [ "$rc" -ne 0 ]; then
    exit "$rc"
fi

step "smoke: the wheel and the sdist, installed outside the tree"
smoke_rc=0
wait "${background[0]}" || smoke_rc=$?
background=()
cat "$smoke_log"
echo "(built beside pytest: $((SECONDS - smoke_started)) s from its start to now)"
if [ "$smoke_rc" -ne 0 ]; then
    echo "the smoke step's builds failed (above)" >&2
    exit "$smoke_rc"
fi
bash scripts/smoke.sh test
