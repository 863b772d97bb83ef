#!/usr/bin/env bash
# Installs what Sluice needs, skipping what is already there. Safe to run
# again. Needs root (or sudo) for apt, and rustup (https://rustup.rs).
#
#   scripts/setup.sh quickstart   only what ./scripts/quickstart.sh needs:
#     - the C toolchain and libraries for rdkafka's bundled librdkafka (ssl,
#       zstd) and SQLite: build-essential pkg-config zlib1g-dev libssl-dev;
#       python3 (librdkafka's Makefile and the quick start's checks), curl and
#       ca-certificates (the quick start's status print)
#     - the Rust toolchain pinned in rust-toolchain.toml, with wasm32-wasip2
#   scripts/setup.sh [tests]      all of the above, and what the tests need
#     (scripts/test.sh, hence .ci/run, and bench/run.sh run it this way):
#     - PostgreSQL (tests run against a real server; see scripts/postgres.sh)
#       (skip: SLUICE_SETUP_POSTGRES=0)
#     - Java 17 and Maven: Apache Kafka itself, resolved from Maven by
#       scripts/kafka.sh, is the broker of the real-Kafka tests (skip:
#       SLUICE_SETUP_KAFKA=0, and the test command says the suite did not run)
#     - MariaDB (the JDBC sink's MySQL dialect; tests start their own server)
#       (skip: SLUICE_SETUP_MARIADB=0)
#     - promtool, from Debian's prometheus package (the alert rules' tests)
#       (skip: SLUICE_SETUP_MONITORING=0)
#     - the toolchains of the example transforms in other languages (C,
#       Python, JavaScript, AssemblyScript, Zig, Go): scripts/wasm-toolchains.sh,
#       into ${SLUICE_TOOLS_DIR:-/var/tmp/sluice-tools}
#       (skip: SLUICE_SETUP_WASM_TOOLCHAINS=0)
#     - schemathesis, pinned, from PyPI into a venv of its own in the same
#       prefix: scripts/schemathesis.sh runs it on docs/openapi.yaml against
#       a live worker (skip: SLUICE_SETUP_SCHEMATHESIS=0)
#     - the web console's browser test: Debian's chromium, and playwright-core
#       and typescript from npm, pinned by tests/console/package-lock.json,
#       into the same prefix (scripts/console-tests.sh; skip:
#       SLUICE_SETUP_CONSOLE=0, and the console test fails saying so)
#     - confluent-kafka (Confluent's Python client, with its Avro serializers
#       and SchemaRegistryClient), pinned, from PyPI into a venv of its own in
#       the same prefix: tests/schema_registry.rs drives the built-in schema
#       registry and the Avro converter with it (scripts/confluent-py.sh;
#       skip: SLUICE_SETUP_SCHEMA_REGISTRY=0, and that test fails saying so)
#     - kafka-connect-py, pinned, from PyPI into a venv of its own in the same
#       prefix: the third-party client the real-Kafka suite drives against
#       Apache Kafka Connect and Sluice (scripts/kafka-connect-py.sh; skip:
#       SLUICE_SETUP_KAFKA=0, as Kafka Connect itself)
set -euo pipefail
cd "$(dirname "$0")/.."

profile="${1:-tests}"
case "$profile" in
  quickstart | tests) ;;
  *)
    echo "setup: unknown profile '$profile' (valid: quickstart, tests)" >&2
    exit 2
    ;;
esac
if (($# > 1)); then
  echo "setup: one profile at most (valid: quickstart, tests); got: $*" >&2
  exit 2
fi
tests=0
if [[ "$profile" == tests ]]; then tests=1; fi

APT_PACKAGES=(build-essential pkg-config zlib1g-dev libssl-dev python3 curl ca-certificates openssl)
if ((tests)); then
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
if ((tests)) && [[ "${SLUICE_SETUP_WASM_TOOLCHAINS:-1}" == 1 ]]; then
  scripts/wasm-toolchains.sh >/dev/null
fi

# The REST API's fuzzer (scripts/schemathesis.sh install: the pinned
# schemathesis in ${SLUICE_TOOLS_DIR:-/var/tmp/sluice-tools}/schemathesis-venv).
if ((tests)) && [[ "${SLUICE_SETUP_SCHEMATHESIS:-1}" == 1 ]]; then
  scripts/schemathesis.sh install
fi

# The web console's browser test (tests/console.rs): chromium, playwright-core.
if ((tests)) && [[ "${SLUICE_SETUP_CONSOLE:-1}" == 1 ]]; then
  scripts/console-tests.sh install
fi

# Confluent's Python client, driven against the built-in schema registry
# and the Avro converter (tests/schema_registry.rs).
if ((tests)) && [[ "${SLUICE_SETUP_SCHEMA_REGISTRY:-1}" == 1 ]]; then
  scripts/confluent-py.sh install
fi

# The Kafka Connect client the compatibility suite drives (tests/compat/).
if ((tests)) && [[ "${SLUICE_SETUP_KAFKA:-1}" == 1 ]]; then
  scripts/kafka-connect-py.sh install
fi
