#!/usr/bin/env bash
# Build what users install and test it as they get it.
#
# Builds the abi3 wheel that users install, a manylinux wheel (linked by zig against
# glibc 2.17: RHEL 8, Debian 11, Amazon Linux 2 and newer), checks its tag with
# auditwheel, builds the sdist into target/dist/ and the sdist into a wheel once (it
# must compile on its own), installs the wheel with the "server" and "spark" extras
# into a fresh virtualenv (target/smoke-venv/) of another Python minor version than the
# one it was built with (Debian 13's CPython 3.13, fetched into target/ by
# scripts/debian-python.sh, or SMOKE_PYTHON), and runs smoke/ from a directory outside
# the repository with that interpreter and no path into the source tree.
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
# The oldest glibc the wheel supports; auditwheel must find the wheel consistent with it.
MANYLINUX="${MANYLINUX:-manylinux_2_17}"
GLIBC="$(sed -E 's/^manylinux_([0-9]+)_([0-9]+)$/\1.\2/' <<<"$MANYLINUX")"
if [ "$(uname -m)" != x86_64 ]; then
    echo "error: scripts/smoke.sh builds the x86_64 manylinux wheel; this is $(uname -m)" >&2
    exit 1
fi

build() {
    rm -rf "$DIST"
    step "maturin build --release --compatibility $MANYLINUX, linked by zig (the abi3 wheel users install), and maturin sdist"
    # Linked by zig against glibc $GLIBC's symbols (scripts/zig-linker.sh), as
    # scripts/setup.sh links the test environment's build: the module is not compiled
    # again, only packed.
    local zig_cc
    zig_cc="$(MANYLINUX="$MANYLINUX" bash scripts/zig-linker.sh)"
    maturin build --release --compatibility "$MANYLINUX" --out "$DIST" -- -C "linker=$zig_cc"
    maturin sdist --out "$DIST"
    local wheel sdist
    wheel="$(ls "$DIST"/jetstream_arrow-*.whl)"
    sdist="$(ls "$DIST"/jetstream_arrow-*.tar.gz)"
    echo "wheel: $wheel"
    echo "sdist: $sdist"

    step "auditwheel show: the wheel is $MANYLINUX"
    local report
    report="$(auditwheel show "$wheel")"
    echo "$report"
    # The platform tag auditwheel derives from the symbol versions and libraries the
    # module needs, not only the name maturin gave the file.
    if ! tr -s ' \n' ' ' <<<"$report" | grep -q "platform tag: \"${MANYLINUX}_x86_64\""; then
        echo "error: auditwheel does not find $(basename "$wheel") consistent with ${MANYLINUX}_x86_64 (above)" >&2
        exit 1
    fi
    case "$(basename "$wheel")" in
        *[.-]"${MANYLINUX}"_x86_64[.]*) ;;
        *)
            echo "error: $(basename "$wheel") is not tagged ${MANYLINUX}_x86_64" >&2
            exit 1
            ;;
    esac

    step "the sdist builds a wheel on its own"
    # Built from the unpacked sdist alone; the shared target/ only spares recompiling
    # the crates.io dependencies.
    python -m pip wheel --quiet --no-deps --no-build-isolation -w "$DIST/from-sdist" "$sdist"
    ls "$DIST"/from-sdist/jetstream_arrow-*.whl

    step "a fresh virtualenv of another Python, with the wheel and its server and spark extras"
    local python
    python="${SMOKE_PYTHON:-$(bash scripts/debian-python.sh)}"
    "$python" -m venv --clear --without-pip "$VENV"
    echo "built with $(python -c 'import platform; print(platform.python_version())');" \
        "installed into $("$VENV/bin/python" -c 'import platform; print(platform.python_version())') ($python)"
    # pip runs from .venv, installing into the smoke virtualenv (which has none of its own).
    python -m pip --python "$VENV/bin/python" install --quiet --disable-pip-version-check \
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
