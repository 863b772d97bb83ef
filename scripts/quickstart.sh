#!/usr/bin/env bash
# The quick start: builds Sluice and the example WASM transform, runs the
# pipeline datagen -> WASM transform -> embedded Kafka broker -> SQLite on
# the embedded defaults, shows the rows arriving in quickstart.db, and stops.
# Set KEEP_RUNNING=1 to leave the worker running (REST on localhost:8083).
# Installs first only what it needs (scripts/setup.sh quickstart: the C build
# dependencies and the pinned Rust toolchain with wasm32-wasip2).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh quickstart
echo "==> building sluice and the example transform" >&2
cargo build --locked --bin sluice
examples/transforms/rust/build.sh --locked >/dev/null
target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"

rm -f quickstart.db quickstart.db-wal quickstart.db-shm
echo "==> starting: sluice standalone examples/quickstart/{worker,datagen,jdbc-sink}.json" >&2
"$target_dir/debug/sluice" standalone examples/quickstart/worker.json \
  examples/quickstart/datagen.json examples/quickstart/jdbc-sink.json 2> quickstart.log &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT

set +e
expected=$(python3 -c 'import json; print(json.load(open("examples/quickstart/datagen.json"))["config"]["count"])')
python3 - "$expected" "$pid" <<'PY'
import os, sqlite3, sys, time
expected, pid = int(sys.argv[1]), int(sys.argv[2])
deadline = time.time() + 120
count = 0
def alive():
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False
while time.time() < deadline and alive():
    try:
        count = sqlite3.connect("quickstart.db").execute("SELECT count(*) FROM orders").fetchone()[0]
    except sqlite3.Error:
        count = 0
    print(f"\rrows in quickstart.db: {count}/{expected}", end="", file=sys.stderr, flush=True)
    if count >= expected:
        break
    time.sleep(0.5)
print(file=sys.stderr)
if count < expected:
    print("sluice did not deliver every row; its log (quickstart.log) ends with:", file=sys.stderr)
    print("".join(open("quickstart.log").readlines()[-20:]), file=sys.stderr)
    sys.exit(1)
db = sqlite3.connect("quickstart.db")
cols = [r[1] for r in db.execute("PRAGMA table_info(orders)")]
print(" | ".join(cols))
for row in db.execute("SELECT * FROM orders ORDER BY order_id LIMIT 5"):
    print(" | ".join(str(v) for v in row))
sys.exit(0 if count >= expected else 1)
PY
status=$?
set -e
if ((status == 0)); then
  curl -s 'localhost:8083/connectors?expand=status' | python3 -m json.tool >&2 || true
fi
if [[ "${KEEP_RUNNING:-0}" == 1 ]]; then
  trap - EXIT
  echo "sluice is running (pid $pid); logs in quickstart.log; stop it with: kill $pid" >&2
else
  kill -TERM $pid 2>/dev/null || true
  wait $pid || true
  echo "==> stopped; the rows stay in quickstart.db (log: quickstart.log)" >&2
fi
exit $status
