#!/usr/bin/env bash
# Builds the JavaScript reference transform as a component:  ./build.sh OUT.wasm
# Needs ComponentizeJS (npm @bytecodealliance/componentize-js;
# scripts/wasm-toolchains.sh installs it). The HTTP features are disabled:
# transforms run without network access, and Sluice refuses components that
# import wasi:http or wasi:sockets.
set -euo pipefail
out="$(realpath -m "${1:?usage: build.sh OUT.wasm}")"
here="$(cd "$(dirname "$0")" && pwd)"
wit="$here/../../../sdk/wit"
command -v componentize-js >/dev/null || {
  echo "build.sh: componentize-js not found: run scripts/wasm-toolchains.sh (npm install @bytecodealliance/componentize-js) and put its node_modules/.bin on PATH" >&2
  exit 127
}
mkdir -p "$(dirname "$out")"
componentize-js "$here/transform.js" --wit "$wit" --world-name transform \
  -d http -d fetch-event -o "$out" >&2
echo "$out"
