#!/usr/bin/env bash
# Builds the CDC demo's transform as a WebAssembly component at
#   examples/cdc/mask-email/target/wasm32-wasip2/release/sluice_mask_email.wasm
# (the path the demo's sink configs name).
set -euo pipefail
cd "$(dirname "$0")"
CARGO_TARGET_DIR="$PWD/target" cargo build --release --target wasm32-wasip2 "$@"
echo "$PWD/target/wasm32-wasip2/release/sluice_mask_email.wasm"
