#!/usr/bin/env bash
# Builds the reference transform as a WebAssembly component:
#   target/wasm32-wasip2/release/sluice_example_transform.wasm
set -euo pipefail
cd "$(dirname "$0")"
cargo build --release --target wasm32-wasip2 "$@"
echo "$(pwd)/target/wasm32-wasip2/release/sluice_example_transform.wasm"
