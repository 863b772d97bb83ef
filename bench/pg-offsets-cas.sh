#!/bin/bash
# What an exactly-once JDBC sink's offset compare-and-set costs a batch on
# PostgreSQL, with no Sluice in the way: one transaction that moves P
# partitions' offsets (the JDBC bench's topic has 64), written
#   loop    one UPDATE per partition, each a round trip (the sink before
#           2026-12-04's change);
#   arrays  one UPDATE ... FROM unnest(arrays) for them all (the sink now).
# pgbench (libpq, prepared statements, one client) runs each form for T
# seconds and reports transactions/s and latency; the statements are the
# sink's, with the offset moved by one each time so every row changes.
# Usage: bench/pg-offsets-cas.sh [postgres URL]   (P=64, T=20, ROUNDS="1 2 3")
set -euo pipefail
URL=${1:-${SLUICE_BENCH_POSTGRES_URL:-postgres://postgres@127.0.0.1:54329/postgres}}
P=${P:-64}
T=${T:-20}
PGBENCH=$(ls /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | tail -1)
if [[ -z "$PGBENCH" ]]; then
  echo "pg-offsets-cas: pgbench not found (PostgreSQL's server package has it)" >&2
  exit 1
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
psql -X -q "$URL" -c "SET client_min_messages = warning; DROP TABLE IF EXISTS bench_cas; CREATE TABLE bench_cas (\"connector\" VARCHAR(255) NOT NULL, \"topic\" VARCHAR(255) NOT NULL, \"partition\" INTEGER NOT NULL, \"offset\" BIGINT NOT NULL, PRIMARY KEY (\"connector\", \"topic\", \"partition\")); INSERT INTO bench_cas SELECT 'bench', 'orders', p, 0 FROM generate_series(0, $P - 1) p;" >/dev/null
# The stored offset is never past `first` (kept far ahead) and always
# behind the next (the offset plus one).
first=9000000000000000000
{
  echo "BEGIN;"
  for ((p = 0; p < P; p++)); do
    echo "UPDATE bench_cas SET \"offset\" = \"offset\" + 1 WHERE \"connector\" = 'bench' AND \"topic\" = 'orders' AND \"partition\" = $p AND \"offset\" <= $first AND \"offset\" < \"offset\" + 1;"
  done
  echo "COMMIT;"
} >"$WORK/loop.sql"
parts=$(seq -s, 0 $((P - 1)))
topics=$(for ((p = 0; p < P; p++)); do printf "'orders',"; done | sed 's/,$//')
firsts=$(for ((p = 0; p < P; p++)); do printf "$first,"; done | sed 's/,$//')
cat >"$WORK/arrays.sql" <<SQL
BEGIN;
UPDATE bench_cas AS s SET "offset" = s."offset" + 1 FROM unnest(ARRAY[$topics]::text[], ARRAY[$parts]::int4[], ARRAY[$firsts]::int8[]) AS b(topic, part, first) WHERE s."connector" = 'bench' AND s."topic" = b.topic AND s."partition" = b.part AND s."offset" <= b.first AND s."offset" < s."offset" + 1 RETURNING s."topic"::text, s."partition";
COMMIT;
SQL
echo "| form | round | commits/s | ms per commit |"
echo "|---|---:|---:|---:|"
for round in ${ROUNDS:-1 2 3}; do
  for form in loop arrays; do
    out=$("$PGBENCH" -n -M prepared -c 1 -T "$T" -f "$WORK/$form.sql" "$URL" 2>&1)
    tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
    lat=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' <<<"$out")
    printf '| %s | %s | %.0f | %.2f |\n' "$form" "$round" "$tps" "$lat"
  done
done
psql -X -q "$URL" -c "DROP TABLE bench_cas" >/dev/null
