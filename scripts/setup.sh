#!/usr/bin/env bash
# Make the project's environment inside the clone and build the native module into it.
#
# Sourced by scripts/test.sh and scripts/demo.sh (`source scripts/setup.sh [extras]`).
# Everything lives in the clone: the virtualenv in .venv/, Rust build output in target/.
# Afterwards .venv/bin is first on PATH, so `python`, `pytest` and `nats-server` are the
# project's own. The extras default to "test" (everything the test command needs).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
EXTRAS="${1:-test}"

# The requirements the README lists, each refused in one line naming what to install.
PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
    echo "error: Python 3.10 or newer is needed (tried '$PY'; set PYTHON to another)" >&2
    exit 1
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "error: a Rust toolchain (cargo) is needed to build the native module: install it with rustup or your system's packages" >&2
    exit 1
fi
# Pip's downloads and built wheels (pyspark's is 450 MB) stay in the clone, like the rest.
export PIP_CACHE_DIR="${PIP_CACHE_DIR:-$ROOT/.cache/pip}"

# A venv whose creation was interrupted has no pip: make it again.
if ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
    echo "==> creating .venv with $(command -v "${PYTHON:-python3}")"
    "$PY" -m venv --clear .venv
fi
export VIRTUAL_ENV="$ROOT/.venv"
export PATH="$VIRTUAL_ENV/bin:$PATH"
# One interpreter for every cargo invocation, so pyo3's build script is not re-run
# (and pyo3 rebuilt) between maturin, clippy and cargo test.
export PYO3_PYTHON="$VIRTUAL_ENV/bin/python"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

echo "==> installing maturin"
python -m pip install --quiet --disable-pip-version-check "maturin>=1.9,<2"

# The test environment's module is linked as the wheel users install is (see
# scripts/zig-linker.sh): the tests run that build, and the smoke step's wheel reuses
# it instead of compiling the module's crate again. zig comes from PyPI (ziglang, the
# version the test extra pins), installed before the build that needs it and before
# the background install of the extras starts, which then finds it there (two pips
# writing one package at once could replace zig while it links).
link_args=()
case ",$EXTRAS," in
    *,test,*)
        if [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ]; then
            python -m pip install --quiet --disable-pip-version-check \
                "$(grep -o '"ziglang==[^"]*"' pyproject.toml | tr -d '"')"
            link_args=(-- -C "linker=$(bash scripts/zig-linker.sh)")
        fi
        ;;
esac

# The packages of the extras (pyspark alone is a 450 MB download and a wheel build)
# install while cargo builds the native module: the one waits on the network and the
# disk, the other on the CPU. maturin develop then finds them installed. (Without
# tomllib, Python 3.10, they install one after the other.)
mkdir -p "$CARGO_TARGET_DIR"
requirements="$CARGO_TARGET_DIR/requirements-${EXTRAS//,/-}.txt"
pip_log="$CARGO_TARGET_DIR/pip-install.log"
pip_pid=""
if python - "$EXTRAS" >"$requirements" 2>/dev/null <<'PY'; then
import sys, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
wanted = list(project.get("dependencies", []))
for extra in filter(None, sys.argv[1].split(",")):
    wanted += project["optional-dependencies"][extra]
print("\n".join(wanted))
PY
    echo "==> installing the packages of [$EXTRAS] in the background (log: $pip_log)"
    python -m pip install --quiet --disable-pip-version-check -r "$requirements" >"$pip_log" 2>&1 &
    pip_pid=$!
    # Interrupted, the build stops and so does the install (a background job ignores
    # Ctrl-C), so that no pip is left writing into .venv.
    trap 'kill "$pip_pid" 2>/dev/null' INT TERM
fi

echo "==> building jetstream_arrow._core (release)"
build_rc=0
maturin develop --release --skip-install "${link_args[@]}" || build_rc=$?
if [ "$build_rc" -ne 0 ]; then
    if [ -n "$pip_pid" ]; then
        kill "$pip_pid" 2>/dev/null || true
        wait "$pip_pid" 2>/dev/null || true
    fi
    exit "$build_rc"
fi
if [ -n "$pip_pid" ] && ! wait "$pip_pid"; then
    cat "$pip_log" >&2
    echo "error: installing the packages of [$EXTRAS] failed (above)" >&2
    exit 1
fi
trap - INT TERM

echo "==> installing jetstream-arrow into .venv with extras [$EXTRAS]"
maturin develop --release --extras "$EXTRAS" "${link_args[@]}"

# Spark runs on Java 17+; without it every Spark step would fail with a JVM trace.
case ",$EXTRAS," in
    *,spark,* | *,test,*)
        python -m jetstream_arrow.spark || exit 1
        ;;
esac
