#!/usr/bin/env bash
# The project's whole test command; CI runs exactly this (.ci/run).
#
# From a clean clone it builds everything it needs (see scripts/setup.sh), then runs
# the format checks, the Python linters and type checks, pytest with the Rust checks
# and tests beside it (scripts/rust-checks.sh), and the smoke test of the installed
# wheel. Any failure, including pytest collecting no test at all,
# fails the run. At the end (pass or fail) it prints each step's wall time, and warns
# when the whole run took longer than its budget.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/timing.sh
source "$ROOT/scripts/timing.sh"
# Jobs run beside other steps (the Rust checks, the smoke step's builds), stopped if the
# run ends first.
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

step "pytest ($PYTEST_WORKERS workers; the Rust checks and the smoke step's builds beside it)"
# Beside pytest, one after the other in a process group of their own, each logged to a
# file: the Rust checks (clippy, cargo machete, cargo test: scripts/rust-checks.sh) and
# the smoke step's builds (the wheel, the sdist's own build, a fresh virtualenv). They
# are compilation and downloads, and the tests mostly wait on servers and Spark: run
# one after the other, they would add their time to the run's.
beside="$ROOT/target/beside-pytest"
rm -rf "$beside"
mkdir -p "$beside"
setsid bash -c '
    bash scripts/rust-checks.sh >"$1/rust-checks.log" 2>&1
    echo $? >"$1/rust-checks.rc"
    bash scripts/smoke.sh build >"$1/smoke-build.log" 2>&1
    echo $? >"$1/smoke-build.rc"
' _ "$beside" &
background+=("$!")
beside_started=$SECONDS
# More workers than cores pay, for the same reason; each worker has its own servers
# and at most one Spark session (tests/conftest.py says how tests are grouped).
# Arguments of this script come last, so `-n 0` runs the tests in one process.
rc=0
python -m pytest -n "$PYTEST_WORKERS" --durations=25 "$@" || rc=$?
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: that is a failure here" >&2
    rc=1
fi

# Their outcome is told whatever pytest's: a red run says everything that failed.
step "the Rust checks and the smoke step's builds (run beside pytest)"
wait "${background[0]}" || true
background=()
echo "(beside pytest: $((SECONDS - beside_started)) s from their start to now)"
beside_rc=0
for job in rust-checks smoke-build; do
    if [ -f "$beside/$job.log" ]; then
        cat "$beside/$job.log"
    fi
    job_rc="$(cat "$beside/$job.rc" 2>/dev/null || true)"
    # No exit status written (the job was stopped first): a failure.
    case "$job_rc" in
        '' | *[!0-9]*) job_rc=1 ;;
    esac
    if [ "$job_rc" -ne 0 ]; then
        echo "$job failed (above)" >&2
        [ "$beside_rc" -ne 0 ] || beside_rc="$job_rc"
    fi
done
if [ "$rc" -ne 0 ]; then
    echo "pytest failed (exit $rc; its report is further above)" >&2
    exit "$rc"
fi
if [ "$beside_rc" -ne 0 ]; then
    exit "$beside_rc"
fi

step "smoke: the wheel and the sdist, installed outside the tree"
bash scripts/smoke.sh test
