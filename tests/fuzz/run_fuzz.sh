#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time from fresh seeds: a crash, a leak or a
# failed property fails the test and leaves the input in the build's fuzz directory.
# usage: run_fuzz.sh TARGET KIND SECONDS SOURCE_DIR
set -eu
target=$1 kind=$2 seconds=$3 src=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$src/tests/fuzz/make_seeds.py" "$kind" "$work/seeds" "$src"
mkdir -p "$work/corpus" fuzz-artifacts
rc=0
MQR_SOURCE_DIR=$src "$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
  -print_final_stats=1 -artifact_prefix="fuzz-artifacts/$(basename "$target")-" "$work/corpus" "$work/seeds" \
  >"$work/log" 2>&1 || rc=$?
grep -v "^#[0-9]*[[:space:]]*\(NEW\|REDUCE\|pulse\)" "$work/log" | tail -40
exit $rc
