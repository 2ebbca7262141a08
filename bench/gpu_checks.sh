#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# The GPU checks of the CUDA engine, run on a machine with an NVIDIA GPU; every result lands in
# OUTDIR as a log or JSON file. Usage: bench/gpu_checks.sh OUTDIR ASSETS [stage...]
#   stages: build selftest sanitizer track bench qlora fp8 (default: all but qlora and fp8, in that order)
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
    compute-sanitizer --tool memcheck --error-exitcode 9 "$CLI" selftest --device cuda --fixtures tests/fixtures \
      --filter "nf4 " > "$OUT/sanitizer-nf4.log" 2>&1 || { rc=9; tail -n 25 "$OUT/sanitizer-nf4.log"; }
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
  qlora)
    # 4-bit NF4 base weights against bf16 ones in the same run: Llama-3.1-8B 2x2048 under two policies, and
    # Qwen3-14B 2x2048 planned and run on an emulated 24 GiB card (random weights, quantized on the device).
    note "qlora: 8B bf16 vs nf4 (off, recompute), 14B nf4 under --vram-budget 24"
    for policy in off recompute; do
      for q in none nf4; do
        "$CLI" bench --config llama-3.1-8b --batch-tokens 4096 --seq-len 2048 --checkpointing $policy \
          --quantization $q --steps 10 --warmup 2 --json "$OUT/qlora-8b-$policy-$q.json" > "$OUT/qlora-8b-$policy-$q.log" 2>&1 \
          || { note "qlora 8b $policy $q FAILED"; tail -5 "$OUT/qlora-8b-$policy-$q.log"; status=1; }
      done
    done
    "$CLI" bench --config qwen3-14b --batch-tokens 4096 --seq-len 2048 --checkpointing recompute --quantization nf4 \
      --vram-budget 24 --steps 10 --warmup 2 --json "$OUT/qlora-14b-recompute-nf4-24g.json" > "$OUT/qlora-14b.log" 2>&1 \
      || { note "qlora 14b FAILED"; tail -5 "$OUT/qlora-14b.log"; status=1; }
    python3 - "$OUT" <<'PY' | tee -a "$OUT/summary.txt"
import json, os, sys
d = sys.argv[1]
def row(f):
    p = os.path.join(d, f)
    if not os.path.exists(p): return None
    return json.load(open(p))
for policy in ("off", "recompute"):
    a, b = row(f"qlora-8b-{policy}-none.json"), row(f"qlora-8b-{policy}-nf4.json")
    if a and b:
        print(f"8B 2x2048 {policy}: bf16 {a['tokens_per_s']:.0f} tok/s {a['step_ms']['mean']:.1f} ms peak "
              f"{a.get('peak_gib', 0):.2f} GiB | nf4 {b['tokens_per_s']:.0f} tok/s {b['step_ms']['mean']:.1f} ms peak "
              f"{b.get('peak_gib', 0):.2f} GiB | step time nf4/bf16 {b['step_ms']['mean'] / a['step_ms']['mean']:.3f}")
c = row("qlora-14b-recompute-nf4-24g.json")
if c:
    print(f"14B 2x2048 recompute nf4, 24 GiB budget: {c['tokens_per_s']:.0f} tok/s, step {c['step_ms']['mean']:.1f} ms, "
          f"peak allocated {c['peak_gib']:.2f} GiB, device used {c['device_used_gib']:.2f} GiB")
PY
    ;;
  fp8)
    # FP8 against bf16: the throughput of 8B and Qwen3-0.6B, and 300-step loss curves (bench/fp8_bench.sh).
    note "fp8: speed and loss curves against bf16"
    bash bench/fp8_bench.sh "$CLI" "$OUT" "$ASSETS" ${FP8_PARTS:-speed curves} > "$OUT/fp8.log" 2>&1 || status=1
    tail -n 20 "$OUT/fp8.log" | tee -a "$OUT/summary.txt"
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
