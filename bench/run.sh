#!/usr/bin/env bash
# Runs Sluice's benchmarks with their baselines and prints their tables.
#   bench/run.sh            every benchmark
#   bench/run.sh jdbc       Kafka -> PostgreSQL upsert vs COPY and a Python loop
#   bench/run.sh transform  the WASM transform boundary
#   bench/run.sh converters the converters with schemas (JSON envelopes,
#                           Avro, Protobuf, JSON Schema): ns and instructions
#                           per record
#   bench/run.sh languages  the reference transform in every language
#   bench/run.sh guarantees each delivery guarantee by batch size, on the
#                           embedded broker and on Apache Kafka
#   bench/run.sh pipelines  whole pipelines against Python: throughput, CPU,
#                           memory, latency, scaling, typed values, and on
#                           Apache Kafka
#                           (runtime/benches/pipelines.rs lists its
#                           SLUICE_BENCH_* size and rate settings)
#   bench/run.sh cdc        postgres-cdc's snapshot and stream against COPY TO
#                           and the server's own logical decoding
#   bench/run.sh kafka-connect  side by side with Apache Kafka Connect 4.1.1:
#                           file and PostgreSQL sinks, with and without a
#                           transform, and PostgreSQL change data capture
#                           beside Debezium's connector
#                           (runtime/benches/kafka_connect.rs)
# Installs what it needs first (scripts/setup.sh, a Python venv with the
# baselines' packages in $SLUICE_BENCH_VENV) and starts PostgreSQL and, for
# the guarantees, pipelines and kafka-connect, one Apache Kafka broker
# (scripts/kafka.sh); kafka-connect also has scripts/kafka-connect.sh resolve
# Kafka Connect's jars from Maven (once, cached), and starts its own workers.
set -euo pipefail
cd "$(dirname "$0")/.."
which="${1:-all}"
scripts/setup.sh
VENV="${SLUICE_BENCH_VENV:-/var/tmp/sluice-bench-venv}"
if [[ ! -x "$VENV/bin/python" ]]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/pip" install -q -r bench/baselines/requirements.txt
export SLUICE_BENCH_PYTHON="$VENV/bin/python"

if [[ "$which" == all || "$which" == jdbc ]]; then
  eval "$(scripts/postgres.sh start)"
  export SLUICE_BENCH_POSTGRES_URL="$SLUICE_TEST_POSTGRES_URL"
  cargo bench --locked -p sluice-runtime --bench jdbc_sink
fi
start_kafka() {
  eval "$(scripts/kafka.sh start)"
  export SLUICE_BENCH_KAFKA_BOOTSTRAP="$SLUICE_TEST_KAFKA_BOOTSTRAP"
}
if [[ "$which" == all || "$which" == guarantees ]]; then
  eval "$(scripts/postgres.sh start)"
  export SLUICE_BENCH_POSTGRES_URL="$SLUICE_TEST_POSTGRES_URL"
  start_kafka
  cargo bench --locked -p sluice-runtime --bench guarantees
fi
if [[ "$which" == all || "$which" == cdc ]]; then
  eval "$(scripts/postgres.sh start)"
  export SLUICE_BENCH_POSTGRES_URL="$SLUICE_TEST_POSTGRES_URL"
  cargo bench --locked -p sluice-runtime --bench cdc
fi
if [[ "$which" == all || "$which" == transform ]]; then
  cargo bench --locked -p sluice-runtime --bench transform
fi
if [[ "$which" == all || "$which" == converters ]]; then
  cargo bench --locked -p sluice-runtime --bench converters
fi
if [[ "$which" == all || "$which" == languages ]]; then
  eval "$(scripts/wasm-toolchains.sh)"
  cargo bench --locked -p sluice-runtime --bench languages
fi
if [[ "$which" == all || "$which" == pipelines ]]; then
  eval "$(scripts/postgres.sh start)"
  export SLUICE_BENCH_POSTGRES_URL="$SLUICE_TEST_POSTGRES_URL"
  start_kafka
  cargo bench --locked -p sluice-runtime --bench pipelines
fi
if [[ "$which" == all || "$which" == kafka-connect ]]; then
  eval "$(scripts/postgres.sh start)"
  export SLUICE_BENCH_POSTGRES_URL="$SLUICE_TEST_POSTGRES_URL"
  start_kafka
  # The jars as the script caches them (resolved once, and again when the
  # pom changes), and its workers' plugin.path; the bench starts its own
  # workers with them.
  eval "$(scripts/kafka-connect.sh resolve)"
  export SLUICE_BENCH_KAFKA_CONNECT_HOME="$KAFKA_CONNECT_HOME"
  export SLUICE_BENCH_KAFKA_CONNECT_PLUGIN_PATH="$KAFKA_CONNECT_PLUGIN_PATH"
  cargo bench --locked -p sluice-runtime --bench kafka_connect
fi
