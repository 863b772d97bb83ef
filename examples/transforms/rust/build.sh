#!/usr/bin/env bash
# Builds the reference transform as a WebAssembly component at
#   examples/transforms/rust/target/wasm32-wasip2/release/sluice_example_transform.wasm
# (always there, whatever CARGO_TARGET_DIR says, so configs can name it).
set -euo pipefail
cd "$(dirname "$0")"
CARGO_TARGET_DIR="$PWD/target" cargo build --release --target wasm32-wasip2 "$@"
echo "$PWD/target/wasm32-wasip2/release/sluice_example_transform.wasm"
