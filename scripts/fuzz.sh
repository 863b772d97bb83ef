#!/usr/bin/env bash
# Fuzzes every cargo-fuzz target in fuzz/ for a bounded time each (issue 21):
#   scripts/fuzz.sh [seconds-per-target]    (default 60)
#
# The pinned stable toolchain (rust-toolchain.toml) with `--sanitizer none`:
# libFuzzer's coverage-guided search needs no nightly; only AddressSanitizer
# would, and the code fuzzed here is safe Rust. cargo-fuzz is installed from
# crates.io at a pinned version when missing.
#
# Each target starts from its seeds (fuzz/corpus/<target>/) and from every
# saved crash (fuzz/regressions/<target>/, which must pass once fixed), with
# its dictionary if it has one (fuzz/dicts/<target>.dict); what
# it learns and any crash go under the build directory, outside the clone:
# ${SLUICE_FUZZ_TARGET_DIR:-/var/tmp/sluice-fuzz-target}. A target that
# crashes (panic, overflow, out of memory, a unit slower than 10 s) fails the
# run, after the others have run, with its input's path.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz: usage: scripts/fuzz.sh [seconds-per-target]" >&2
  exit 2
fi
CARGO_FUZZ_VERSION=0.13.2
build_dir="${SLUICE_FUZZ_TARGET_DIR:-/var/tmp/sluice-fuzz-target}"
export CARGO_INCREMENTAL=0

if [[ "$(cargo fuzz --version 2>/dev/null || true)" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]]; then
  echo "fuzz: installing cargo-fuzz $CARGO_FUZZ_VERSION" >&2
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

fuzz=(cargo fuzz)
flags=(--fuzz-dir fuzz --sanitizer none --debug-assertions --target-dir "$build_dir")
mapfile -t targets < <("${fuzz[@]}" list --fuzz-dir fuzz)
if [[ ${#targets[@]} -eq 0 ]]; then
  echo "fuzz: no targets in fuzz/" >&2
  exit 1
fi

# cargo fuzz builds without --locked and would quietly rewrite a stale
# fuzz/Cargo.lock: refuse one instead, as the workspace's builds do.
if ! cargo metadata --locked --format-version 1 --manifest-path fuzz/Cargo.toml > /dev/null; then
  echo "fuzz: fuzz/Cargo.lock is out of date with the workspace; run: cargo update --workspace --manifest-path fuzz/Cargo.toml" >&2
  exit 1
fi

start=$SECONDS
nice "${fuzz[@]}" build "${flags[@]}"
echo "fuzz: built ${#targets[@]} targets in $((SECONDS - start)) s" >&2

failed=()
summary=()
for t in "${targets[@]}"; do
  work="$build_dir/corpus/$t"
  artifacts="$build_dir/artifacts/$t"
  log="$build_dir/logs/$t.log"
  rm -rf "$artifacts"
  mkdir -p "$work" "$artifacts" "$(dirname "$log")"
  dirs=("$work" "fuzz/corpus/$t")
  if [[ -d "fuzz/regressions/$t" ]]; then
    dirs+=("fuzz/regressions/$t")
  fi
  extra=()
  if [[ -f "fuzz/dicts/$t.dict" ]]; then
    extra+=(-dict="fuzz/dicts/$t.dict")
  fi
  echo "fuzz: $t for ${seconds} s" >&2
  status=0
  nice "${fuzz[@]}" run "${flags[@]}" "$t" "${dirs[@]}" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="$artifacts/" -print_final_stats=1 "${extra[@]}" >"$log" 2>&1 || status=$?
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)"
  cov="$(grep -ao 'cov: [0-9]*' "$log" | tail -n 1 || true)"
  if [[ $status -ne 0 ]]; then
    failed+=("$t")
    summary+=("$t: FAILED (exit $status) after ${execs:-?} runs; log $log")
    echo "fuzz: $t FAILED (exit $status); the end of $log:" >&2
    grep -av '^#[0-9]' "$log" | grep -av '^ *[0-9]*: \|^ *at ' | tail -n 30 >&2
    ls -1 "$artifacts" | sed "s|^|fuzz:   input: $artifacts/|" >&2 || true
  else
    summary+=("$t: ok, ${execs:-?} runs (${rate:-?}/s), ${cov:-cov: ?}")
  fi
done

echo "fuzz: ${seconds} s per target:" >&2
printf 'fuzz:   %s\n' "${summary[@]}" >&2
if [[ ${#failed[@]} -ne 0 ]]; then
  echo "fuzz: ${#failed[@]} target(s) crashed: ${failed[*]}" >&2
  echo "fuzz: minimise an input with: cargo fuzz tmin --fuzz-dir fuzz -s none TARGET INPUT" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} passed, 0 failed" >&2
