#!/usr/bin/env bash
# Installs what Sluice's build, quick start and tests need, skipping what is
# already there. Safe to run again. Needs root (or sudo) for apt.
#
#   - C toolchain and libraries for rdkafka's bundled librdkafka (ssl, zstd)
#     and SQLite: build-essential pkg-config zlib1g-dev libssl-dev
#   - PostgreSQL (tests run against a real server; see scripts/postgres.sh)
#   - Java 17 and Maven: Apache Kafka itself, resolved from Maven by
#     scripts/kafka.sh, is the broker of the real-Kafka tests (skip:
#     SLUICE_SETUP_KAFKA=0, and the test command says the suite did not run)
#   - MariaDB (the JDBC sink's MySQL dialect; tests start their own server)
#   - promtool, from Debian's prometheus package (the alert rules' tests)
#   - the Rust toolchain pinned in rust-toolchain.toml, with wasm32-wasip2
#   - the toolchains of the example transforms in other languages (C, Python,
#     JavaScript, AssemblyScript, Zig, Go): scripts/wasm-toolchains.sh, into
#     ${SLUICE_TOOLS_DIR:-/var/tmp/sluice-tools} (skip: SLUICE_SETUP_WASM_TOOLCHAINS=0)
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(build-essential pkg-config zlib1g-dev libssl-dev python3 curl ca-certificates)
# promtool (Debian's prometheus package) checks and unit-tests the shipped alerts.
if [[ "${SLUICE_SETUP_MONITORING:-1}" == 1 ]]; then
  APT_PACKAGES+=(prometheus)
fi
if [[ "${SLUICE_SETUP_POSTGRES:-1}" == 1 ]]; then
  APT_PACKAGES+=(postgresql postgresql-client)
fi
if [[ "${SLUICE_SETUP_KAFKA:-1}" == 1 ]]; then
  command -v java >/dev/null 2>&1 || APT_PACKAGES+=(openjdk-17-jdk-headless)
  command -v mvn >/dev/null 2>&1 || APT_PACKAGES+=(maven)
fi
# The JDBC sink's tests start their own MariaDB server (MySQL protocol).
if [[ "${SLUICE_SETUP_MARIADB:-1}" == 1 ]]; then
  APT_PACKAGES+=(mariadb-server mariadb-client)
fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  [[ "$(id -u)" == 0 ]] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v rustup >/dev/null; then
  echo "setup: rustup is required (https://rustup.rs); it installs the toolchain pinned in rust-toolchain.toml" >&2
  exit 1
fi
# Installs the pinned toolchain with its components and the wasm32-wasip2
# target, as listed in rust-toolchain.toml.
rustup toolchain install >/dev/null 2>&1 || rustup show active-toolchain >/dev/null
toolchain="$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)"
if ! rustup target list --toolchain "$toolchain" --installed | grep -q '^wasm32-wasip2$'; then
  rustup target add --toolchain "$toolchain" wasm32-wasip2
fi

# The example transforms' toolchains (the tests build every language's
# example; they find the tools in the same prefix).
if [[ "${SLUICE_SETUP_WASM_TOOLCHAINS:-1}" == 1 ]]; then
  scripts/wasm-toolchains.sh >/dev/null
fi
