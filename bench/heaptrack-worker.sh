#!/bin/sh
# Runs a command (the bench's `sluice standalone`) with heaptrack's preload
# (Debian package `heaptrack`),
# writing its raw heap trace to $HEAPTRACK_DIR/raw.PID (default /var/tmp).
# Use it as SLUICE_BENCH_WORKER_WRAPPER=bench/heaptrack-worker.sh, then read
# a trace with:
#   /usr/lib/heaptrack/libexec/heaptrack_interpret < raw.PID | zstd > t.zst
#   heaptrack_print -f t.zst --print-peaks 1
# The exec keeps the worker's pid, so the bench still reads its /proc.
exec env LD_PRELOAD=/usr/lib/heaptrack/libheaptrack_preload.so \
    DUMP_HEAPTRACK_OUTPUT="${HEAPTRACK_DIR:-/var/tmp}/raw.$$" "$@"
