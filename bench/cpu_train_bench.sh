#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# CPU training throughput of tandem-cli train (LoRA r=16 on all seven projections, packed 2048-token
# micro-batches, fp32 CPU backend) for the real tiny Llama of the shared assets and a ~50M-parameter random
# Llama (hidden 512, 10 layers, vocab 32000). Reports the median tokens/s of steps 3..8 (steps 1-2 warm up)
# from each run's metrics.jsonl. Numbers go to docs/benchmarks.md with the machine they ran on.
#   bench/cpu_train_bench.sh TANDEM_CLI ASSETS_DIR WORK_DIR
set -euo pipefail
cli=$1
assets=$2
work=$3
mkdir -p "$work"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) cores)"
"$cli" demo --out "$work/llama-50m" --hidden 512 --intermediate 1536 --layers 10 --heads 8 --kv-heads 8 --vocab 32000 >/dev/null
run() {
  local name=$1 model=$2 data=$3
  rm -rf "$work/run-$name"
  "$cli" train --model "$model" --dataset "$data" --out "$work/run-$name" --max-steps 8 --batch-tokens 2048 \
    --max-seq-len 256 --lora-r 16 --seed 1 >/dev/null 2>&1
  python3 - "$name" "$("$cli" info "$model" --json)" "$work/run-$name/metrics.jsonl" <<'PY'
import json, statistics, sys
name, info, path = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
steps = [json.loads(l) for l in open(path)]
tps = statistics.median(s["tokens_per_s"] for s in steps[2:])
print(f"{name}: {info['parameters']/1e6:.2f}M params, {len(steps)} steps of 2048-token batches, "
      f"median {tps:.0f} tokens/s, median step {statistics.median(s['step_time_s'] for s in steps[2:]):.3f} s")
PY
}
run babyllama "$assets/babyllama-tok105/hf" "$assets/datasets/tinystories_train_head.txt"
run llama-50m "$work/llama-50m" "$(dirname "$0")/../datasets/demo_alpaca.jsonl"
