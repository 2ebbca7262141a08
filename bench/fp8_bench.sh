#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# FP8 training (precision fp8) against bf16 in the same run, on one GPU:
#   bench/fp8_bench.sh TANDEM_CLI OUTDIR ASSETS [parts...]     parts: speed curves (default: both)
#   speed:  tandem-cli bench, bf16 then fp8, same checkpointing policy: Llama-3.1-8B 2x2048 and Qwen3-0.6B
#           8x2048 (random weights), policies off and recompute -> OUTDIR/fp8-<model>-<policy>-<precision>.json
#   curves: 300 LoRA steps on ASSETS/datasets/alpaca_5000.json, bf16 then fp8, of the tiny pretrained Llama
#           (ASSETS/babyllama-tok105/hf) and of a random-weight Qwen3-0.6B (transformers' own initialisation,
#           seed 0, saved with ASSETS/tokenizer-qwen3) -> OUTDIR/curve-<model>-<precision>.jsonl
# ASSETS holds babyllama-tok105/, tokenizer-qwen3/ and datasets/ (../shared/assets, or its carried copy).
# QUANT=nf4: both sides with 4-bit base weights (QLoRA, then QLoRA with FP8 GEMMs: the 4-bit weights dequantized
# straight to FP8); the files are then named ...-nf4-bf16 / ...-nf4-fp8.
set -u -o pipefail
CLI=${1:?TANDEM_CLI}; OUT=${2:?OUTDIR}; ASSETS=${3:?ASSETS}; shift 3
PARTS=${*:-speed curves}
STEPS=${STEPS:-300}
QUANT=${QUANT:-none}
Q=""; QARG=()
[ "$QUANT" = nf4 ] && { Q="-nf4"; QARG=(--quantization nf4); }
mkdir -p "$OUT"
status=0
for part in $PARTS; do
  case $part in
  speed)
    for spec in "llama-3.1-8b 4096" "qwen3-0.6b 16384"; do
      set -- $spec
      for policy in off recompute; do
        for p in bf16 fp8; do
          "$CLI" bench --config "$1" --batch-tokens "$2" --seq-len 2048 --checkpointing $policy --precision $p \
            "${QARG[@]}" --steps 10 --warmup 3 --json "$OUT/fp8-$1-$policy$Q-$p.json" > "$OUT/fp8-$1-$policy$Q-$p.log" 2>&1 \
            || { echo "bench $1 $policy$Q $p FAILED"; tail -5 "$OUT/fp8-$1-$policy$Q-$p.log"; status=1; }
        done
      done
    done
    python3 - "$OUT" "$Q" <<'PY'
import json, os, sys
d, q = sys.argv[1], sys.argv[2]
def row(f):
    p = os.path.join(d, f)
    return json.load(open(p)) if os.path.exists(p) else None
for model in ("llama-3.1-8b", "qwen3-0.6b"):
    for policy in ("off", "recompute"):
        a, b = row(f"fp8-{model}-{policy}{q}-bf16.json"), row(f"fp8-{model}-{policy}{q}-fp8.json")
        if a and b:
            print(f"{model} {policy}{q}: bf16 {a['tokens_per_s']:.0f} tok/s peak {a.get('peak_gib', 0):.2f} GiB | "
                  f"fp8 {b['tokens_per_s']:.0f} tok/s peak {b.get('peak_gib', 0):.2f} GiB | "
                  f"fp8/bf16 {b['tokens_per_s'] / a['tokens_per_s']:.3f}")
PY
    ;;
  curves)
    python3 "$(dirname "$0")/random_checkpoint.py" "$ASSETS" "$OUT/qwen3-0.6b-random" qwen3-0.6b --device cpu || status=1
    for spec in "babyllama $ASSETS/babyllama-tok105/hf 256 1e-3" "qwen3-0.6b $OUT/qwen3-0.6b-random 1024 2e-4"; do
      set -- $spec
      for p in bf16 fp8; do
        rm -rf "$OUT/run-$1-$p"
        "$CLI" train --model "$2" --dataset "$ASSETS/datasets/alpaca_5000.json" --out "$OUT/run-$1-$p" \
          --max-steps "$STEPS" --batch-tokens 4096 --max-seq-len "$3" --lr "$4" --seed 1 --device cuda --precision $p \
          "${QARG[@]}" > "$OUT/curve-$1$Q-$p.log" 2>&1 || { echo "train $1$Q $p FAILED"; tail -8 "$OUT/curve-$1$Q-$p.log"; status=1; }
        cp "$OUT/run-$1-$p/metrics.jsonl" "$OUT/curve-$1$Q-$p.jsonl" 2>/dev/null
        rm -rf "$OUT/run-$1-$p"
      done
    done
    rm -rf "$OUT/qwen3-0.6b-random"
    python3 - "$OUT" "$Q" <<'PY'
import json, os, sys
d, q = sys.argv[1], sys.argv[2]
for model in ("babyllama", "qwen3-0.6b"):
    rows = {}
    for p in ("bf16", "fp8"):
        f = os.path.join(d, f"curve-{model}{q}-{p}.jsonl")
        rows[p] = [json.loads(l) for l in open(f)] if os.path.exists(f) else []
    a, b = rows["bf16"], rows["fp8"]
    if not a or not b: continue
    tail = lambda r: sum(x["loss"] for x in r[-20:]) / len(r[-20:])
    print(f"{model}{q}: {len(a)} / {len(b)} steps; final loss (mean of the last 20) bf16 {tail(a):.4f} fp8 {tail(b):.4f} "
          f"(fp8/bf16 {tail(b) / tail(a):.4f}); max |step loss difference| "
          f"{max(abs(x['loss'] - y['loss']) for x, y in zip(a, b)):.4f}; tok/s bf16 {a[-1].get('tokens_per_s', 0):.0f} "
          f"fp8 {b[-1].get('tokens_per_s', 0):.0f}")
PY
    ;;
  *) echo "unknown part $part"; exit 2 ;;
  esac
done
exit $status
