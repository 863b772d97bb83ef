#!/usr/bin/env bash
# Builds the Python reference transform as a component:  ./build.sh OUT.wasm
# Needs componentize-py (PyPI; scripts/wasm-toolchains.sh installs it).
set -euo pipefail
out="$(realpath -m "${1:?usage: build.sh OUT.wasm}")"
here="$(cd "$(dirname "$0")" && pwd)"
wit="$here/../../../sdk/wit"
command -v componentize-py >/dev/null || {
  echo "build.sh: componentize-py not found: run scripts/wasm-toolchains.sh (pip install componentize-py) and put its bin on PATH" >&2
  exit 127
}
mkdir -p "$(dirname "$out")"
cd "$here"
componentize-py -d "$wit" -w transform componentize --stub-wasi app -o "$out" >&2
echo "$out"
