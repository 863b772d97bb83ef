#!/usr/bin/env bash
# The test command: installs what is missing, starts PostgreSQL and a real
# Apache Kafka broker, checks formatting and lints, and runs every test (unit
# and integration; the integration tests build their WASM components from
# source), then the real-Kafka suite (tests/real_kafka/: exactly-once,
# fencing and static membership on brokers that enforce them).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
# No backtraces: CI shows the end of the output, and a failing test's
# message (with its seed and counts) must be what ends it, not a hundred
# frames. SLUICE_TEST_BACKTRACE=1 brings them back.
export RUST_BACKTRACE="${SLUICE_TEST_BACKTRACE:-0}"

# CI shows the start and the end of the output, and a failing test's own
# message sits in the middle, above later output. `cargo_test` keeps each
# failure's panic message (its first lines) and the end of the run repeats
# them, so the reason is in the part CI shows.
failure_digest="$(mktemp)"
print_failure_digest() {
  if [[ -s "$failure_digest" ]]; then
    echo "test: why the failing tests failed (the first lines of each panic):" >&2
    cat "$failure_digest" >&2
  fi
  rm -f "$failure_digest"
}
trap print_failure_digest EXIT
cargo_test() {
  local log status=0
  log="$(mktemp)"
  cargo test "$@" 2>&1 | tee "$log" || status=$?
  # Only a failed run, and only its "failures:" section: passing tests
  # panic on purpose too (a plugin's panic that must not cross), and their
  # output is not why anything failed.
  if [[ "$status" != 0 ]]; then
    awk '
      /^failures:$/ { in_failures = 1 }
      !in_failures { next }
      /^---- .* stdout ----$/ { name = $2; left = 0 }
      /panicked at/ { left = 8; print "== " name }
      left > 0 { print "   " substr($0, 1, 300); left-- }
    ' "$log" >>"$failure_digest"
  fi
  rm -f "$log"
  return "$status"
}
eval "$(scripts/postgres.sh start)"
# A second server: the target change data capture replicates into.
eval "$(scripts/postgres.sh start target)"
echo "test: PostgreSQL at $SLUICE_TEST_POSTGRES_URL" >&2
# Apache Kafka from Maven (scripts/kafka.sh), fresh for each run. A machine
# without Java (setup.sh installs it unless SLUICE_SETUP_KAFKA=0) is the only
# reason not to run the real-Kafka suite, and it is said loudly below; a
# broker that cannot start fails the run.
real_kafka=0
if command -v java >/dev/null 2>&1; then
  scripts/kafka.sh reset
  eval "$(scripts/kafka.sh start)"
  real_kafka=1
fi

# The shipped alert rules: valid, and firing exactly when they should.
promtool check rules examples/monitoring/alerts.yml
promtool test rules examples/monitoring/alerts_test.yml

cargo fmt --all --check
for guest in examples/transforms/rust examples/cdc/mask-email plugins/transforms plugins/http-sink tests/guests tests/native fuzz; do
  cargo fmt --all --check --manifest-path "$guest/Cargo.toml"
  # Each nested lock file, before the long runs: a dependency added to the
  # workspace must also be locked where it is used (the fuzz crate's
  # Cargo.lock went stale that way and failed only after the tests).
  if ! cargo metadata --locked --format-version 1 --manifest-path "$guest/Cargo.toml" >/dev/null; then
    echo "test: $guest/Cargo.lock is out of date; run: cargo update --workspace --manifest-path $guest/Cargo.toml" >&2
    exit 1
  fi
done
# The example transforms in other languages are built and checked by the
# integration tests (tests/languages.rs); Go's and Zig's formatting here.
eval "$(scripts/wasm-toolchains.sh)"
unformatted="$(gofmt -l examples/transforms/go)"
if [[ -n "$unformatted" ]]; then
  echo "test: gofmt would change: $unformatted" >&2
  exit 1
fi
zig fmt --check examples/transforms/zig
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo clippy -p sluice-sdk --features guest --locked -- -D warnings
cargo clippy -p sluice-sdk --features native --locked -- -D warnings
cargo clippy --manifest-path plugins/http-sink/Cargo.toml --locked -- -D warnings
# The real-Kafka suite runs on its own below, after everything else.
cargo_test --workspace --locked -- --skip real_kafka::
# The REST API against its own spec: schemathesis on a live worker
# (scripts/schemathesis.sh): no 5xx, no answer the spec does not allow.
scripts/schemathesis.sh
# Every cargo-fuzz target for a bounded time, from its seeds and every
# crash found before (fuzz/regressions/, which must pass once fixed).
scripts/fuzz.sh "${SLUICE_FUZZ_SECONDS:-30}"
# The guest SDK: its documentation example, compiled, and its unit tests
# (the guest allocator's among them), which the workspace run leaves out.
cargo test -p sluice-sdk --features guest --locked

# The real-Kafka suite (tests/real_kafka/): the checks that need brokers that
# enforce transactions and static membership, and the comparisons with
# Apache Kafka Connect. The three-broker cluster its failover checks start
# is stopped afterwards.
if [[ "$real_kafka" == 1 ]]; then
  status=0
  # Apache Kafka Connect on the same broker (scripts/kafka-connect.sh, from
  # Maven): the reference of the REST differential and of the third-party
  # client check (real_kafka::compat_rest, docs/compatibility.md), and the
  # worker that runs Debezium's JDBC sink there and Debezium's PostgreSQL
  # source beside postgres-cdc (real_kafka::debezium). One that cannot start
  # fails the run here, saying why.
  scripts/kafka-connect.sh stop # one an earlier run left is on a reset broker
  eval "$(scripts/kafka-connect.sh start)"
  # --workspace: the same build as the run above (`-p` would unify
  # features differently and compile the runtime again).
  cargo_test --workspace --locked --test integration -- real_kafka:: \
    --skip real_kafka::membership:: || status=$?
  # Static membership across restarts, on its own: whether a restarted
  # worker is back within the session timeout is timing, which twenty
  # other real-Kafka tests on the same two cores can starve (two full runs
  # timed out there, the same test alone passes).
  cargo_test --workspace --locked --test integration real_kafka::membership:: || status=$?
  scripts/kafka-connect.sh stop
  scripts/kafka.sh stop
  exit "$status"
fi
cat >&2 <<'BANNER'
###########################################################################
# NOT RUN: the real-Kafka suite (tests/real_kafka/), because this machine
#   has no Java to run Apache Kafka (scripts/setup.sh installs it unless
#   SLUICE_SETUP_KAFKA=0). Unchecked here: read_committed hides aborted
#   records, zombies are fenced, streams and sources stay exactly-once
#   while the worker and a broker are killed, static members rejoin
#   without a rebalance. The mock broker enforces none of these. Nor the
#   comparisons with Apache Kafka Connect (real_kafka::compat_rest: the
#   REST differential, the kafka-connect-py client and Debezium's JDBC
#   sink) and with Debezium's PostgreSQL source (real_kafka::debezium),
#   which run it.
###########################################################################
BANNER
