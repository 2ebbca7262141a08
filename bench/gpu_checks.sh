#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# The GPU checks of the CUDA engine, run on a machine with an NVIDIA GPU; every result lands in
# OUTDIR as a log or JSON file. Usage: bench/gpu_checks.sh OUTDIR ASSETS [stage...]
#   stages: build selftest sanitizer track bench (default: all, in that order)
#   ASSETS: the shared assets folder (../shared/assets), holding babyllama-tok105/ and datasets/.
# Environment: BUILD (build folder, default build/gpu), JOBS.
set -u -o pipefail
OUT=${1:?OUTDIR}; ASSETS=${2:?ASSETS}; shift 2
STAGES=${*:-build selftest sanitizer track bench}
BUILD=${BUILD:-build/gpu}
JOBS=${JOBS:-$(nproc)}
CLI=$BUILD/app/cli/tandem-cli
mkdir -p "$OUT"
status=0
note() { echo "== $*" | tee -a "$OUT/summary.txt"; }

for stage in $STAGES; do
  case $stage in
  build)
    note "build"
    { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_UI=OFF -DTANDEM_TESTS=OFF \
        -DTANDEM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build "$BUILD" -j "$JOBS"; } > "$OUT/build.log" 2>&1 \
      || { note "build FAILED"; grep -E "error|Error" "$OUT/build.log" | head -40; exit 1; }
    ;;
  selftest)
    note "selftest"
    "$CLI" selftest --device cuda --fixtures tests/fixtures --json "$OUT/selftest.json" > "$OUT/selftest.log" 2>&1; rc=$?
    note "selftest exit $rc"; tail -n 60 "$OUT/selftest.log"; [ $rc = 0 ] || status=1
    ;;
  sanitizer)
    note "compute-sanitizer memcheck (one training step)"
    compute-sanitizer --tool memcheck --error-exitcode 9 "$CLI" selftest --device cuda --filter "step llama-bias checkpointing=off" \
      > "$OUT/sanitizer.log" 2>&1; rc=$?
    note "sanitizer exit $rc"; tail -n 25 "$OUT/sanitizer.log"; [ $rc = 0 ] || status=1
    ;;
  track)
    # 200 steps of the tiny pretrained Llama on the Alpaca subset, CUDA against the CPU backend.
    note "track: babyllama x alpaca, 200 steps, cuda vs cpu"
    for dev in cuda cpu; do
      rm -rf "$BUILD/track-$dev"
      "$CLI" train --model "$ASSETS/babyllama-tok105/hf" --dataset "$ASSETS/datasets/alpaca_5000.json" \
        --out "$BUILD/track-$dev" --max-steps 200 --batch-tokens 4096 --max-seq-len 256 --lr 1e-3 --seed 1 \
        --device $dev > "$OUT/track-$dev.log" 2>&1 || { note "track $dev FAILED"; tail -20 "$OUT/track-$dev.log"; status=1; }
      cp "$BUILD/track-$dev/metrics.jsonl" "$OUT/track-$dev.jsonl" 2>/dev/null
    done
    python3 - "$OUT/track-cuda.jsonl" "$OUT/track-cpu.jsonl" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
n = min(len(a), len(b))
d = [abs(x["loss"] - y["loss"]) for x, y in zip(a, b)]
print(f"steps compared {n}; max |loss cuda - loss cpu| {max(d):.4f}; mean {sum(d)/n:.4f}")
for s in (0, 9, 49, 99, 149, n - 1):
    if s < n: print(f"  step {s+1}: cuda {a[s]['loss']:.4f} cpu {b[s]['loss']:.4f} tok/s cuda {a[s]['tokens_per_s']:.0f} cpu {b[s]['tokens_per_s']:.0f}")
PY
    ;;
  bench)
    note "bench vs HF PEFT"
    bash bench/gpu_bench.sh "$CLI" "$OUT" > "$OUT/bench.log" 2>&1; rc=$?
    note "bench exit $rc"; tail -n 30 "$OUT/bench.log"; [ -f "$OUT/table.md" ] && cat "$OUT/table.md"
    ;;
  *) echo "unknown stage $stage"; exit 2 ;;
  esac
done
exit $status
