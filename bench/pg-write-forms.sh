#!/bin/bash
# PostgreSQL's own cost per row of the write forms a JDBC sink could use,
# with no Sluice in the way: the backend's CPU seconds per million rows and
# the rate, over the same rows, in batches of 5000 (one transaction each)
# unless said otherwise:
#   series1m  one INSERT ... SELECT generate_series ... ON CONFLICT DO UPDATE
#             of every row (the JDBC bench's "database alone");
#   series    the same upsert, a statement per batch;
#   copyup    COPY into a temporary table, then INSERT ... SELECT ... ON
#             CONFLICT DO UPDATE from it (the staging form issue 25 names);
#   copyraw   COPY into the empty table itself (no conflict check).
# Usage: bench/pg-write-forms.sh [postgres URL]   (N=rows, ROUNDS="1 2 3")
set -euo pipefail
URL=${1:-${SLUICE_BENCH_POSTGRES_URL:-postgres://postgres@127.0.0.1:54329/postgres}}
N=${N:-1000000}
B=5000
P=(psql -X -q "$URL")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
python3 -c "
with open('orders.tsv', 'w') as f:
    for g in range($N):
        f.write(f'{g}\tcust-{g % 1000}\t{10 + g % 500}\tEUR\tshipped\t2026-01-01T00:00:00.000Z\n')"
split -l $B -d -a 4 orders.tsv part.
setup="DROP TABLE IF EXISTS exp_orders; CREATE TABLE exp_orders (order_id BIGINT PRIMARY KEY, customer_id TEXT, amount DOUBLE PRECISION, currency TEXT, status TEXT, updated_at TEXT); CHECKPOINT;"
up="ON CONFLICT (order_id) DO UPDATE SET customer_id = excluded.customer_id, amount = excluded.amount, currency = excluded.currency, status = excluded.status, updated_at = excluded.updated_at"
row="g, 'cust-' || (g % 1000), 10 + (g % 500), 'EUR', 'shipped', '2026-01-01T00:00:00.000Z'"
echo "INSERT INTO exp_orders SELECT $row FROM generate_series(0, $N - 1) g $up;" > series1m.sql
: > series.sql
: > copyraw.sql
echo "CREATE TEMP TABLE t_stage (LIKE exp_orders) ON COMMIT DELETE ROWS;" > copyup.sql
for f in part.*; do
  i=$((10#${f#part.})); lo=$((i * B)); hi=$((lo + B - 1))
  echo "BEGIN; INSERT INTO exp_orders SELECT $row FROM generate_series($lo, $hi) g $up; COMMIT;" >> series.sql
  printf 'BEGIN;\n\\copy t_stage FROM %s\nINSERT INTO exp_orders SELECT * FROM t_stage %s; COMMIT;\n' "$WORK/$f" "$up" >> copyup.sql
  printf 'BEGIN;\n\\copy exp_orders FROM %s\nCOMMIT;\n' "$WORK/$f" >> copyraw.sql
done
# The backend's own CPU (utime + stime from /proc) and the wall time
# around the statements, read by the session itself.
timed() {
  {
    echo "SELECT pg_backend_pid() AS pid \\gset"
    echo "\\setenv PGPID :pid"
    echo "\\! awk '{print \$14 + \$15}' /proc/\$PGPID/stat > $WORK/cpu0; date +%s.%N > $WORK/t0"
    cat "$1"
    echo "\\! awk '{print \$14 + \$15}' /proc/\$PGPID/stat > $WORK/cpu1; date +%s.%N > $WORK/t1"
  } > timed.sql
}
echo "| form | round | backend CPU s per 1M rows | rows/s |"
echo "|---|---:|---:|---:|"
for round in ${ROUNDS:-1 2 3}; do
  for form in series1m series copyup copyraw; do
    "${P[@]}" -c "$setup" > /dev/null 2>&1
    timed $form.sql
    "${P[@]}" -f timed.sql > /dev/null
    python3 -c "
ticks = int(open('cpu1').read()) - int(open('cpu0').read())
wall = float(open('t1').read()) - float(open('t0').read())
print(f'| $form | $round | {ticks / 100 / ($N / 1e6):.2f} | {$N / wall:,.0f} |')"
  done
done
"${P[@]}" -c "DROP TABLE IF EXISTS exp_orders" > /dev/null
