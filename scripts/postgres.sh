#!/usr/bin/env bash
# Starts throwaway PostgreSQL servers for the tests on 127.0.0.1 and prints
# the export line of each one's URL:
#   eval "$(scripts/postgres.sh start)"          -> SLUICE_TEST_POSTGRES_URL=...
#   eval "$(scripts/postgres.sh start target)"   -> SLUICE_TEST_POSTGRES_TARGET_URL=...
#   scripts/postgres.sh stop [target]
# The first is the tests' database and the source of change data capture;
# the second (`target`) is a separate server that CDC replicates into.
# Both run with wal_level=logical (logical replication slots need it).
# Data lives in $SLUICE_PGDATA (default /tmp/sluice-pg; /tmp/sluice-pg-target
# for the second), port $SLUICE_PGPORT (default 54329; 54330). Trust
# authentication on loopback only: for tests, never for production.
set -euo pipefail
instance="${2:-main}"
case "$instance" in
  main)
    PGDATA="${SLUICE_PGDATA:-/tmp/sluice-pg}"
    PORT="${SLUICE_PGPORT:-54329}"
    URL_VAR=SLUICE_TEST_POSTGRES_URL
    ;;
  target)
    PGDATA="${SLUICE_PGDATA_TARGET:-/tmp/sluice-pg-target}"
    PORT="${SLUICE_PGPORT_TARGET:-54330}"
    URL_VAR=SLUICE_TEST_POSTGRES_TARGET_URL
    ;;
  *)
    echo "usage: $0 start|stop [main|target]" >&2
    exit 2
    ;;
esac
PGBIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
if [[ -z "$PGBIN" ]]; then
  echo "postgres.sh: PostgreSQL is not installed (run scripts/setup.sh)" >&2
  exit 1
fi

as_pg() {
  if [[ "$(id -u)" == 0 ]]; then
    su postgres -s /bin/bash -c "$*"
  else
    bash -c "$*"
  fi
}

OPTIONS="-p $PORT -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off \
-c wal_level=logical -c max_replication_slots=32 -c max_wal_senders=32"

case "${1:-start}" in
  start)
    if "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PORT"; then
      # A server started before it needed logical decoding: restart it so.
      level="$("$PGBIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -tAc 'SHOW wal_level' 2>/dev/null || true)"
      if [[ "$level" != logical ]]; then
        as_pg "'$PGBIN/pg_ctl' -D '$PGDATA' -l '$PGDATA/server.log' -w -t 60 -m fast \
          -o \"$OPTIONS\" restart >/dev/null"
      fi
    else
      if [[ ! -s "$PGDATA/PG_VERSION" ]]; then
        rm -rf "$PGDATA"
        mkdir -p "$PGDATA"
        [[ "$(id -u)" == 0 ]] && chown postgres:postgres "$PGDATA"
        as_pg "'$PGBIN/initdb' -D '$PGDATA' -A trust -U postgres >/dev/null"
      fi
      as_pg "'$PGBIN/pg_ctl' -D '$PGDATA' -l '$PGDATA/server.log' -w -t 60 \
        -o \"$OPTIONS\" start >/dev/null"
    fi
    echo "export $URL_VAR=postgres://postgres@127.0.0.1:$PORT/postgres"
    ;;
  stop)
    as_pg "'$PGBIN/pg_ctl' -D '$PGDATA' -m fast -w stop" || true
    ;;
  *)
    echo "usage: $0 start|stop [main|target]" >&2
    exit 2
    ;;
esac
