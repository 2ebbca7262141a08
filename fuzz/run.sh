#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# Runs the parser fuzz targets of a `fuzz` build (docs/fuzzing.md), each for a fixed time on its committed
# seed corpus (fuzz/corpus/<target>/, read only) plus a work corpus in the build folder, with its dictionary
# (fuzz/dict/<target>.dict) when there is one; -p N runs N targets at a time (one process each). Prints one
# line per target (executions, cov, ft, corpus size) and exits non-zero if any target found something: the
# input is saved as <build>/findings/<target>-crash-... (or leak-, timeout-, oom-) and the log is printed.
#   fuzz/run.sh [-t SECONDS] [-p PARALLEL] [-b BUILD_DIR] [TARGET...]   (default: 30 s, 1, build/fuzz, all)
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=30 parallel=1 build=build/fuzz
while getopts "t:p:b:" o; do
  case $o in
    t) seconds=$OPTARG ;; p) parallel=$OPTARG ;; b) build=$OPTARG ;;
    *) echo "usage: $0 [-t SECONDS] [-p PARALLEL] [-b BUILD_DIR] [TARGET...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi
mkdir -p "$build/findings" "$build/logs"
for t in "${targets[@]}"; do
  [ -x "$build/fuzz/$t" ] || { echo "fuzz: $build/fuzz/$t is not built (cmake --workflow --preset fuzz)" >&2; exit 2; }
done

# Runs one target; writes its summary line (or the failure and the log's tail) to <build>/logs/<t>.summary.
run_one() {
  local t=$1 name=${1#fuzz_}
  local work=$build/corpus/$name log=$build/logs/$1.log out=$build/logs/$1.summary
  mkdir -p "$work"
  local args=(-max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1
              -artifact_prefix="$build/findings/$t-")
  [ -f "fuzz/dict/$name.dict" ] && args+=(-dict="fuzz/dict/$name.dict")
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    "$build/fuzz/$t" "${args[@]}" "$work" "fuzz/corpus/$name" >"$log" 2>&1
  local rc=$?
  local execs last cov ft corp
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | awk '{s += $2} END {print s + 0}')
  last=$(grep -E '^#[0-9]+.*(cov|ft):' "$log" | tail -1)
  cov=$(echo "$last" | grep -o 'cov: [0-9]*' | awk '{print $2}')
  ft=$(echo "$last" | grep -o 'ft: [0-9]*' | awk '{print $2}')
  corp=$(echo "$last" | grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' | awk '{print $2}')
  if [ "$rc" -ne 0 ]; then
    { echo "fuzz: $t FAILED (exit $rc) after ${execs} executions; log $log:"; tail -60 "$log"; } >"$out"
  else
    printf '%-24s %10s execs  cov %-6s ft %-6s corpus %s\n' "$t" "$execs" "${cov:-?}" "${ft:-?}" "${corp:-?}" >"$out"
  fi
  return "$rc"
}

failed=0
pids=()
report() {  # waits for the oldest running target and prints its summary
  wait "${pids[0]}" || failed=1
  local t=${names[0]}
  if grep -q "FAILED" "$build/logs/$t.summary"; then cat "$build/logs/$t.summary" >&2; else cat "$build/logs/$t.summary"; fi
  pids=("${pids[@]:1}") names=("${names[@]:1}")
}
names=()
for t in "${targets[@]}"; do
  run_one "$t" &
  pids+=($!) names+=("$t")
  [ ${#pids[@]} -ge "$parallel" ] && report
done
while [ ${#pids[@]} -gt 0 ]; do report; done
exit $failed
