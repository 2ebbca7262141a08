#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# Before / after on one GPU machine: the working tree (new) beside an earlier commit (old), both built there
# and measured in the same run, so a refactoring is judged by the same GPU, driver and minute.
#   here:  bench/before_after.sh prepare REV      git archive of REV -> .carry/old-src (git-ignored; the GPU
#                                                 machine gets a copy of the tree without .git)
#   there: . tools/gpu-env.sh env && bench/before_after.sh run OUTDIR [stage...]
# Stages (default: build selftest plans):
#   build       configure + build both trees at once (build/gpu and build/gpu-old, CUDA arch 90, no UI)
#   selftest    the new binary's `selftest --device cuda --fixtures tests/fixtures` (every op and step check)
#   plans       `bench --plans` of both binaries: the memory plans of every preset x policy x token budget must
#               be identical byte for byte (the old tree gets the --plans option from this tree's cmd_bench.cpp)
#   glue-small  bench/glue_bench.sh 'small' (Qwen3-0.6B, Llama-3.2-1B, 8x2048, four policies), old then new
#   glue-large  bench/glue_bench.sh 'large' (Llama-3.1-8B, 2x2048 and 1x16384, four policies), old then new
#   compare     OUTDIR/compare.md: tokens/s new / old and host syncs per step of every glue run both have
# Environment: JOBS (build jobs per tree, default nproc/2), WARMUP / STEPS (glue_bench.sh), SIDES (the order of
# the glue runs, default "old new"; run a stage twice in both orders to see drift).
set -uo pipefail
mode=${1:?prepare REV | run OUTDIR [stage...]}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
old_src=$root/.carry/old-src

if [ "$mode" = prepare ]; then
  rev=${1:?REV}
  rm -rf "$old_src" && mkdir -p "$old_src"
  git -C "$root" archive "$rev" CMakeLists.txt CMakePresets.json cmake engine app bench installer resources datasets | tar -x -C "$old_src"
  # The --plans option, with the include paths the old tree had before core/cuda existed (harmless otherwise).
  sed -e 's#core/cuda/context.h#kernels/cuda/common.h#; s#core/cuda/memory.h#kernels/cuda/memory.h#' \
    "$root/app/cli/cmd_bench.cpp" >"$old_src/app/cli/cmd_bench.cpp"
  [ -f "$old_src/engine/core/cuda/context.h" ] && cp "$root/app/cli/cmd_bench.cpp" "$old_src/app/cli/cmd_bench.cpp"
  echo "$rev $(git -C "$root" rev-parse "$rev")" >"$old_src/REVISION"
  echo "before_after: $old_src holds $(cat "$old_src/REVISION") ($(du -sh "$old_src" | cut -f1)); carry .carry"
  exit 0
fi
[ "$mode" = run ] || { echo "usage: $0 prepare REV | run OUTDIR [stage...]" >&2; exit 2; }

out=${1:?OUTDIR}; shift
stages=${*:-build selftest plans}
jobs=${JOBS:-$(( $(nproc) / 2 ))}
new_cli=$root/build/gpu/app/cli/tandem-cli
old_cli=$root/build/gpu-old/app/cli/tandem-cli
mkdir -p "$out"
status=0
note() { echo "== $*" | tee -a "$out/summary.txt"; }

build_tree() {  # build_tree SRC BUILD LOG
  { cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_UI=OFF -DTANDEM_TESTS=OFF \
      -DTANDEM_BENCH=OFF -DTANDEM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build "$2" -j "$jobs"; } >"$3" 2>&1
}

for stage in $stages; do
  case $stage in
  build)
    [ -f "$old_src/REVISION" ] || { note "no $old_src: run '$0 prepare REV' here and carry .carry"; exit 2; }
    note "build new (this tree) and old ($(cat "$old_src/REVISION")), $jobs jobs each"
    t0=$SECONDS
    build_tree "$root" "$root/build/gpu" "$out/build-new.log" & p1=$!
    build_tree "$old_src" "$root/build/gpu-old" "$out/build-old.log" & p2=$!
    wait $p1; r1=$?; wait $p2; r2=$?
    note "build new exit $r1, old exit $r2 ($((SECONDS - t0)) s)"
    for f in build-new build-old; do grep -E "error|Error" "$out/$f.log" | head -20; done
    [ $r1 = 0 ] && [ $r2 = 0 ] || exit 1
    ;;
  selftest)
    note "selftest (new)"
    "$new_cli" selftest --device cuda --fixtures "$root/tests/fixtures" --json "$out/selftest.json" \
      >"$out/selftest.log" 2>&1; rc=$?
    note "selftest exit $rc"; tail -n 8 "$out/selftest.log"; grep -E "FAIL" "$out/selftest.log" | head -20
    [ $rc = 0 ] || status=1
    ;;
  plans)
    "$new_cli" bench --plans "$out/plans-new.json" >/dev/null && "$old_cli" bench --plans "$out/plans-old.json" >/dev/null
    if cmp -s "$out/plans-new.json" "$out/plans-old.json"; then
      note "plans: identical ($(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))))" "$out/plans-new.json") rows)"
    else
      note "plans: DIFFER"; diff <(python3 -m json.tool "$out/plans-old.json") <(python3 -m json.tool "$out/plans-new.json") | head -40
      status=1
    fi
    golden=$root/tests/fixtures/plans/cuda_plans.json
    if [ -f "$golden" ]; then
      if cmp -s "$out/plans-new.json" "$golden"; then note "plans: new = golden ($golden)"; else note "plans: new != golden"; status=1; fi
    fi
    ;;
  glue-small|glue-large)
    what=${stage#glue-}
    for side in ${SIDES:-old new}; do
      cli=$old_cli; [ $side = new ] && cli=$new_cli
      note "glue $what ($side)"
      bash "$root/bench/glue_bench.sh" "$cli" "$out/glue-$side${ROUND:+-$ROUND}" "$what" | tee -a "$out/summary.txt"
    done
    ;;
  compare)
    python3 - "$out" <<'PY' | tee "$out/compare.md"
import json, os, sys
out = sys.argv[1]
rnd = os.environ.get("ROUND", "")
def load(side):
    d = os.path.join(out, "glue-" + side + ("-" + rnd if rnd else ""))
    rows = {}
    if os.path.isdir(d):
        for f in sorted(os.listdir(d)):
            if f.endswith(".json"):
                j = json.load(open(os.path.join(d, f)))
                if "tokens_per_s" in j: rows[f[:-5]] = j
    return rows
old, new = load("old"), load("new")
print("| run | old tok/s | new tok/s | new / old | host syncs/step old, new | peak GiB old, new |")
print("|---|---:|---:|---:|---|---|")
worst = 1e9
for name in sorted(set(old) & set(new)):
    o, n = old[name], new[name]
    r = n["tokens_per_s"] / o["tokens_per_s"]
    worst = min(worst, r)
    print(f"| {name} | {o['tokens_per_s']:,.0f} | {n['tokens_per_s']:,.0f} | {r:.3f} | "
          f"{o['host_syncs_per_step']:.2f}, {n['host_syncs_per_step']:.2f} | {o['peak_gib']:.2f}, {n['peak_gib']:.2f} |")
if old and new: print(f"\nslowest row: new / old = {worst:.3f}")
PY
    ;;
  *) echo "unknown stage $stage" >&2; exit 2 ;;
  esac
done
exit $status
