#!/usr/bin/env bash
# Builds the standard transform library as one WebAssembly component at
#   plugins/transforms/target/wasm32-wasip2/release/sluice_transforms.wasm
set -euo pipefail
cd "$(dirname "$0")"
CARGO_TARGET_DIR="$PWD/target" cargo build --release --target wasm32-wasip2 "$@"
echo "$PWD/target/wasm32-wasip2/release/sluice_transforms.wasm"
