#!/usr/bin/env bash
# Build what users install and test it as they get it.
#
# Builds the abi3 wheel and the sdist into target/dist/, builds the sdist into a wheel
# once (it must compile on its own), installs the wheel with the "server" and "spark"
# extras into a fresh virtualenv (target/smoke-venv/), and runs smoke/ from a directory
# outside the repository with that interpreter and no path into the source tree.
#
# Run by scripts/test.sh; alone: `bash scripts/smoke.sh` (after `source scripts/setup.sh`).
# `bash scripts/smoke.sh build` does only the builds and the virtualenv, and
# `bash scripts/smoke.sh test` only the smoke suite: the test command runs the first
# beside pytest (compiling while the tests mostly wait on servers) and the second after.
set -euo pipefail
PHASE="${1:-all}"
case "$PHASE" in
    all | build | test) ;;
    *) echo "usage: bash scripts/smoke.sh [build|test]" >&2; exit 2 ;;
esac

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [ -z "${VIRTUAL_ENV:-}" ]; then
    source scripts/setup.sh test
fi

step() { echo; echo "==> $*"; }

DIST="$ROOT/target/dist"
VENV="$ROOT/target/smoke-venv"

build() {
    rm -rf "$DIST"
    step "maturin build --release (abi3 wheel, from the release build) and maturin sdist"
    maturin build --release --out "$DIST"
    maturin sdist --out "$DIST"
    local wheel sdist
    wheel="$(ls "$DIST"/jetstream_arrow-*.whl)"
    sdist="$(ls "$DIST"/jetstream_arrow-*.tar.gz)"
    echo "wheel: $wheel"
    echo "sdist: $sdist"

    step "the sdist builds a wheel on its own"
    # Built from the unpacked sdist alone; the shared target/ only spares recompiling
    # the crates.io dependencies.
    python -m pip wheel --quiet --no-deps --no-build-isolation -w "$DIST/from-sdist" "$sdist"
    ls "$DIST"/from-sdist/jetstream_arrow-*.whl

    step "a fresh virtualenv with the wheel and its server and spark extras"
    "${PYTHON:-python3}" -m venv --clear "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        "${wheel}[server,spark]" "pytest>=8.3" "pytest-timeout>=2.3"
}

smoke_suite() {
    step "smoke suite, from outside the repository, against the installed wheel"
    local clean_path
    outside="$(mktemp -d "${TMPDIR:-/tmp}/jetstream-arrow-smoke.XXXXXX")"
    trap 'rm -rf "$outside"' EXIT
    cp smoke/test_installed.py "$outside/"
    # Only the fresh virtualenv's bin ahead of the system's: nothing from .venv/ or the tree.
    clean_path="$(echo "$PATH" | tr ':' '\n' | grep -v -x -F "$ROOT/.venv/bin" | paste -sd: -)"
    (
        cd "$outside"
        env -u PYTHONPATH -u VIRTUAL_ENV -u PYSPARK_PYTHON -u PYSPARK_DRIVER_PYTHON \
            PATH="$VENV/bin:$clean_path" JETSTREAM_ARROW_SOURCE_TREE="$ROOT" \
            "$VENV/bin/python" -m pytest -p no:cacheprovider -ra test_installed.py
    )
}

case "$PHASE" in
    build) build ;;
    test) smoke_suite ;;
    # Not `build && smoke_suite`: errexit does not reach into a function run in a list.
    all)
        build
        smoke_suite
        ;;
esac
