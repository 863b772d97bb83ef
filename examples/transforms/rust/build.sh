#!/usr/bin/env bash
# Builds the reference transform as a WebAssembly component at
#   examples/transforms/rust/target/wasm32-wasip2/release/sluice_example_transform.wasm
# (always there, whatever CARGO_TARGET_DIR says, so configs can name it).
#
#   ./build.sh [OUT.wasm] [cargo options...]
#
# With OUT.wasm (any first argument not starting with `-`), the component is
# also copied there, as every other language's build.sh does.
set -euo pipefail
out=""
if [[ $# -gt 0 && "$1" != -* ]]; then
  out="$(realpath -m "$1")"
  shift
fi
cd "$(dirname "$0")"
CARGO_TARGET_DIR="$PWD/target" cargo build --release --target wasm32-wasip2 "$@"
built="$PWD/target/wasm32-wasip2/release/sluice_example_transform.wasm"
if [[ -n "$out" ]]; then
  mkdir -p "$(dirname "$out")"
  cp "$built" "$out"
  echo "$out"
else
  echo "$built"
fi
