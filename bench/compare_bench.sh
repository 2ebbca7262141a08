#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# The Chat page's comparison (base and tuned answering the same prompt at once): tokens/s of each answer when
# both decode in one batch (tandem-cli generate --compare), against one answer alone, on random-weight
# Qwen3-0.6B and Llama-3.1-8B checkpoints (bench/random_checkpoint.py, as decode_more.sh) with an adapter from two
# LoRA steps.
#   bench/compare_bench.sh TANDEM_CLI ASSETS_DIR OUTDIR      (ASSETS_DIR: tokenizer-qwen3/, tokenizer-llama3/, datasets/)
set -euo pipefail
CLI=$1; ASSETS=$2; OUT=$3
mkdir -p "$OUT"
for name in qwen3-0.6b llama-3.1-8b; do python3 "$(dirname "$0")/random_checkpoint.py" "$ASSETS" "$OUT/$name" $name; done
PROMPT="Once upon a time, in a small village by the sea, there lived an old fisherman who"
for name in qwen3-0.6b llama-3.1-8b; do
  M=$OUT/$name
  "$CLI" train --model "$M" --dataset "$ASSETS/datasets/alpaca_5000.json" --out "$OUT/run-$name" --max-steps 2 \
    --batch-tokens 2048 --max-seq-len 512 --device cuda --lr 1e-3 > "$OUT/train-$name.log" 2>&1
  A=$OUT/run-$name/adapter
  "$CLI" generate --model "$M" --prompt "$PROMPT" --max-new-tokens 256 --device cuda --stats --warmup 1 \
    > /dev/null 2> "$OUT/$name-base.err"
  echo "$name base alone: $(tail -1 "$OUT/$name-base.err")"
  "$CLI" generate --model "$M" --adapter "$A" --prompt "$PROMPT" --max-new-tokens 256 --device cuda --stats \
    --warmup 1 > /dev/null 2> "$OUT/$name-tuned.err"
  echo "$name tuned alone: $(tail -1 "$OUT/$name-tuned.err")"
  "$CLI" generate --model "$M" --adapter "$A" --compare --prompt "$PROMPT" --max-new-tokens 256 --device cuda \
    --stats --warmup 1 > /dev/null 2> "$OUT/$name-compare.err"
  echo "$name compare (one batch): $(grep -E '^(base|/)' "$OUT/$name-compare.err" | tr '\n' ' ')"
  rm -rf "$M" "$OUT/run-$name/checkpoints"
done
