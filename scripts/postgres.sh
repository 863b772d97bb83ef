#!/usr/bin/env bash
# Starts a throwaway PostgreSQL server for the tests on 127.0.0.1 and prints
# the export line for its URL:
#   eval "$(scripts/postgres.sh start)"   -> SLUICE_TEST_POSTGRES_URL=...
#   scripts/postgres.sh stop
# Data lives in $SLUICE_PGDATA (default /tmp/sluice-pg), port $SLUICE_PGPORT
# (default 54329). Trust authentication on loopback only: for tests, never
# for production.
set -euo pipefail
PGDATA="${SLUICE_PGDATA:-/tmp/sluice-pg}"
PORT="${SLUICE_PGPORT:-54329}"
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

case "${1:-start}" in
  start)
    if ! "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PORT"; then
      if [[ ! -s "$PGDATA/PG_VERSION" ]]; then
        rm -rf "$PGDATA"
        mkdir -p "$PGDATA"
        [[ "$(id -u)" == 0 ]] && chown postgres:postgres "$PGDATA"
        as_pg "'$PGBIN/initdb' -D '$PGDATA' -A trust -U postgres >/dev/null"
      fi
      as_pg "'$PGBIN/pg_ctl' -D '$PGDATA' -l '$PGDATA/server.log' -w -t 60 \
        -o \"-p $PORT -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off\" start >/dev/null"
    fi
    echo "export SLUICE_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:$PORT/postgres"
    ;;
  stop)
    as_pg "'$PGBIN/pg_ctl' -D '$PGDATA' -m fast -w stop" || true
    ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
