#!/usr/bin/env bash
# Runs the parser fuzz targets of a `fuzz` build (docs/fuzzing.md), one after the other, each for a fixed
# time on its committed seed corpus (fuzz/corpus/<target>/, read only) plus a work corpus in the build
# folder, with its dictionary (fuzz/dict/<target>.dict) when there is one. Prints one line per target
# (executions, cov, ft, corpus size) and exits non-zero if any target found something: the input is saved
# as <build>/findings/<target>-crash-... (or leak-, timeout-, oom-) and the log is printed.
#   fuzz/run.sh [-t SECONDS] [-b BUILD_DIR] [TARGET...]     (default: 30 s, build/fuzz, all targets)
# Two cores: run two of these at once on different targets (each target is one process).
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=30 build=build/fuzz
while getopts "t:b:" o; do
  case $o in
    t) seconds=$OPTARG ;; b) build=$OPTARG ;;
    *) echo "usage: $0 [-t SECONDS] [-b BUILD_DIR] [TARGET...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi
mkdir -p "$build/findings" "$build/logs"
failed=0
for t in "${targets[@]}"; do
  bin=$build/fuzz/$t
  [ -x "$bin" ] || { echo "fuzz: $bin is not built (cmake --workflow --preset fuzz)" >&2; exit 2; }
  name=${t#fuzz_}
  work=$build/corpus/$name
  mkdir -p "$work"
  args=(-max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1
        -artifact_prefix="$build/findings/$t-")
  [ -f "fuzz/dict/$name.dict" ] && args+=(-dict="fuzz/dict/$name.dict")
  log=$build/logs/$t.log
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    "$bin" "${args[@]}" "$work" "fuzz/corpus/$name" >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | awk '{s += $2} END {print s + 0}')
  last=$(grep -E '^#[0-9]+.*(cov|ft):' "$log" | tail -1)
  cov=$(echo "$last" | grep -o 'cov: [0-9]*' | awk '{print $2}')
  ft=$(echo "$last" | grep -o 'ft: [0-9]*' | awk '{print $2}')
  corp=$(echo "$last" | grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' | awk '{print $2}')
  if [ "$rc" -ne 0 ]; then
    failed=1
    echo "fuzz: $t FAILED (exit $rc) after ${execs} executions; log $log:" >&2
    tail -60 "$log" >&2
  else
    printf '%-24s %10s execs  cov %-6s ft %-6s corpus %s\n' "$t" "$execs" "${cov:-?}" "${ft:-?}" "${corp:-?}"
  fi
done
exit $failed
