#!/usr/bin/env bash
# Print the path of a linker that links the native module against glibc 2.17's symbols
# (manylinux_2_17: RHEL 8, Debian 11, Amazon Linux 2 and newer) whatever the host's
# glibc is: maturin's own `zig cc` wrapper, the one `maturin build --zig` uses, with zig
# from the `ziglang` package of the active virtualenv. Give it to cargo as
# `-- -C linker=<path>` (maturin's arguments for the module's crate).
#
# scripts/setup.sh builds the test environment's module with it and scripts/smoke.sh
# the wheel users install: the same crate, arguments and profile, so the wheel's build
# finds the module compiled and only packs it. `maturin build --zig` would build with
# an explicit --target into another directory, every crate compiled a second time.
# zig's cache stays in the clone, like the rest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MANYLINUX="${MANYLINUX:-manylinux_2_17}"
GLIBC="$(sed -E 's/^manylinux_([0-9]+)_([0-9]+)$/\1.\2/' <<<"$MANYLINUX")"
python="$(command -v python)"
maturin="$(command -v maturin)"
if ! "$python" -c 'import ziglang' 2>/dev/null; then
    echo "error: the ziglang package is not installed in $python's environment" >&2
    exit 1
fi
linker="${CARGO_TARGET_DIR:-$ROOT/target}/zig/cc-$MANYLINUX.sh"
mkdir -p "$(dirname "$linker")"
printf '%s\n' '#!/bin/sh' \
    "export CARGO_ZIGBUILD_ZIG_COMMAND='$python' CARGO_ZIGBUILD_ZIG_COMMAND_ARGS='-m ziglang'" \
    "export XDG_CACHE_HOME='$ROOT/.cache' ZIG_GLOBAL_CACHE_DIR='$ROOT/.cache/zig'" \
    "exec '$maturin' zig cc -- -g -fno-sanitize=all -target x86_64-linux-gnu.$GLIBC \"\$@\"" \
    >"$linker.tmp"
chmod +x "$linker.tmp"
mv "$linker.tmp" "$linker"
echo "$linker"
