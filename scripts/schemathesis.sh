#!/usr/bin/env bash
# The REST API against its own spec: runs schemathesis (PyPI, pinned) with
# every check on docs/openapi.yaml against a live `sluice standalone` worker
# on the embedded defaults (embedded broker, a temporary directory, REST on a
# free port, basic authentication on, so that every operation's 401 is
# checked too), then stops the worker. Exits non-zero on any failure: a 5xx,
# a status, content type, header or body the spec does not give, a request
# the spec calls invalid that is accepted (or a valid one refused), an
# operation that answers without credentials, a panic in the worker's log.
#
#   scripts/schemathesis.sh [ARGS]    build `sluice` (cargo build --locked
#                                     --bin sluice) and run it all; ARGS go
#                                     to `schemathesis run` (e.g.
#                                     --include-operation-id replayDlq,
#                                     --report har; relative paths are in
#                                     the temporary directory)
#   scripts/schemathesis.sh install   only install schemathesis (what
#                                     scripts/setup.sh runs)
#
# schemathesis is installed, if missing, into a venv of its own:
# ${SLUICE_TOOLS_DIR:-/var/tmp/sluice-tools}/schemathesis-venv (python3-venv
# from apt if missing). Settings: scripts/schemathesis.toml. Environment:
#   SLUICE_BIN                    a built `sluice` to run instead of building
#   SLUICE_SCHEMATHESIS_EXAMPLES  test cases per operation and phase (30)
#   SLUICE_SCHEMATHESIS_SEED      the seed (fixed, so that runs repeat); any
#                                 number, or `random` to explore
# A failure prints schemathesis' report with a curl line that reproduces each
# case, and the end of the worker's log; the temporary directory (worker log,
# schemathesis' stored cases for `st replay`) is kept and named.
set -euo pipefail
# shellcheck source=scripts/python-venv.sh
source "$(dirname "$0")/python-venv.sh"
cd "$(dirname "$0")/.."
repo="$PWD"

PIN="schemathesis==4.32.5"
TOOLS="${SLUICE_TOOLS_DIR:-/var/tmp/sluice-tools}"
venv="$TOOLS/schemathesis-venv"

log() { echo "schemathesis.sh: $*" >&2; }

install() { pinned_venv "$venv" "$PIN" schemathesis schemathesis.sh; }

if [[ "${1:-}" == install ]]; then
  install
  exit 0
fi

install
if [[ -n "${SLUICE_BIN:-}" ]]; then
  sluice="$SLUICE_BIN"
else
  cargo build --locked --bin sluice
  target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
  sluice="$target_dir/debug/sluice"
fi
[[ -x "$sluice" ]] || {
  log "no sluice binary at $sluice"
  exit 2
}

examples="${SLUICE_SCHEMATHESIS_EXAMPLES:-30}"
seed="${SLUICE_SCHEMATHESIS_SEED:-20261201}"
if [[ "$seed" == random ]]; then seed="$RANDOM$RANDOM"; fi

# The worker: embedded defaults, everything in a temporary directory (its
# working directory too, so that whatever a fuzzed config writes lands there).
tmp="$(mktemp -d "${TMPDIR:-/tmp}/sluice-schemathesis.XXXXXX")"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
url="http://127.0.0.1:$port"
user=schemathesis
password="$(python3 -c 'import secrets; print(secrets.token_urlsafe(18))')"
echo "$password" | "$sluice" passwd "$user" >"$tmp/users"
cat >"$tmp/worker.json" <<EOF
{
  "listeners": "$url",
  "rest.auth.users.file": "$tmp/users",
  "config.storage.file.filename": "$tmp/connectors.json",
  "offset.storage.file.filename": "$tmp/offsets.json",
  "wasm.cache.dir": ""
}
EOF
(cd "$tmp" && NO_COLOR=1 exec "$sluice" standalone worker.json >worker.log 2>&1) &
pid=$!
stop_worker() {
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
trap stop_worker EXIT

log "worker $url (pid $pid, directory $tmp)"
ready=0
for _ in $(seq 600); do
  kill -0 "$pid" 2>/dev/null || break
  if [[ "$(curl -s -o /dev/null -w '%{http_code}' -u "$user:$password" "$url/health")" == 200 ]]; then
    ready=1
    break
  fi
  sleep 0.1
done
if ((!ready)); then
  log "the worker did not become healthy; its log ends with:"
  tail -n 30 "$tmp/worker.log" >&2
  exit 1
fi

# The spec's own examples of POST /connectors (a datagen source, a file sink
# of its topic with a dead-letter queue) exist from the start, so that the
# operations on a connector reach one in every phase, not only 404s.
"$venv/bin/python" - "$repo/docs/openapi.yaml" "$url" "$user" "$password" <<'PY'
import base64, json, sys, urllib.request, yaml
spec, url, user, password = sys.argv[1:]
examples = yaml.safe_load(open(spec))["paths"]["/connectors"]["post"]["requestBody"]["content"]["application/json"]["examples"]
auth = base64.b64encode(f"{user}:{password}".encode()).decode()
for name, example in examples.items():
    request = urllib.request.Request(f"{url}/connectors", data=json.dumps(example["value"]).encode(), method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Basic {auth}"})
    with urllib.request.urlopen(request) as response:
        print(f"schemathesis.sh: created {example['value']['name']} ({response.status})", file=sys.stderr)
PY

log "schemathesis: every check, $examples cases per operation and phase, seed $seed"
status=0
(
  cd "$tmp"
  "$venv/bin/schemathesis" --config-file "$repo/scripts/schemathesis.toml" --no-color run "$repo/docs/openapi.yaml" \
    --url "$url" --auth "$user:$password" --checks all --max-examples "$examples" --seed "$seed" --workers 1 "$@"
) || status=$?

# A panic is a defect even where no answer showed it (the panic hook's line:
# also for the panics of tasks, which are caught and leave them FAILED).
if grep -n "panicked at " "$tmp/worker.log" >&2; then
  log "the worker panicked (above, from $tmp/worker.log)"
  status=1
fi
stop_worker
trap - EXIT
if ((status)); then
  log "FAILED; the worker's log ends with:"
  tail -n 20 "$tmp/worker.log" >&2
  log "kept $tmp (worker.log; .schemathesis/ holds the failing cases for \`st replay\`)"
  exit "$status"
fi
rm -rf "$tmp"
log "passed"
