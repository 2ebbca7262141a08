#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# The glue-code measurements: the three glue-code optimizations, each on and off in the same run, on one GPU,
# and the checkpointing policies.
#   bench/glue_bench.sh TANDEM_CLI OUTDIR [stage...]
# Stages (default: all, in order; each writes OUTDIR/<name>.json + .log + .rc):
#   meta      metadata built once per batch vs --rebuild-metadata-per-layer, Qwen3-0.6B (28 layers) and
#             Llama-3.2-1B (16 layers), 16384 and 4096 tokens (META_TOKENS) of short samples (32..320 tokens,
#             like Alpaca records)
#   small     checkpointing off / recompute / smart-single / smart on Qwen3-0.6B and Llama-3.2-1B, 8x2048
#   large     the same four on Llama-3.1-8B at 2x2048 and at 1x16384 tokens
#   long      Llama-3.1-8B at 1x32768 tokens: recompute, smart, and HF PEFT + gradient checkpointing
#   selective Llama-3.1-8B at 2x2048 and 1x16384 with checkpointing selective (compare with 'large' and 'hf')
#   timeline  per-layer CUDA events of one micro-batch (8B, 1x16384, smart and smart-single)
#   hf        HF PEFT + gradient checkpointing on the same shapes (bench/hf_peft_baseline.py); hf8b: only the 8B rows
# Then bench/glue_table.py OUTDIR writes OUTDIR/table.md. Environment: PYTHON, WARMUP (2), STEPS (8),
# RUN_TIMEOUT (seconds per run, 240).
set -uo pipefail
cli=${1:?TANDEM_CLI}; out=${2:?OUTDIR}; shift 2
stages=${*:-meta small large long timeline hf}
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}
warmup=${WARMUP:-2}
steps=${STEPS:-8}
run_timeout=${RUN_TIMEOUT:-240}
mkdir -p "$out"

run() {  # run NAME COMMAND...
  local name=$1; shift
  local t0=$SECONDS
  rm -f "$out/$name.json"
  timeout "$run_timeout" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  echo "$rc" >"$out/$name.rc"
  printf '%-44s exit %3d  %4ds\n' "$name" "$rc" $((SECONDS - t0))
}
tandem() {  # tandem NAME CONFIG TOKENS SEQ CHECKPOINTING [extra...]
  local name=$1 cfg=$2 tokens=$3 seq=$4 ck=$5; shift 5
  run "$name" "$cli" bench --config "$cfg" --batch-tokens "$tokens" --seq-len "$seq" --warmup "$warmup" \
    --steps "$steps" --checkpointing "$ck" --json "$out/$name.json" "$@"
}
hf() {  # hf NAME CONFIG ROWS SEQ
  run "$1" "$python" "$here/hf_peft_baseline.py" --config "$2" --batch "$3" --seq-len "$4" --warmup "$warmup" \
    --steps "$steps" --gc on --json "$out/$1.json"
}

for stage in $stages; do
  case $stage in
  meta)
    for tokens in ${META_TOKENS:-16384 4096}; do
      for cfg in qwen3-0.6b llama-3.2-1b; do
        tandem "meta-$cfg-$tokens-once" "$cfg" "$tokens" 320 off --min-seq-len 32
        tandem "meta-$cfg-$tokens-per-layer" "$cfg" "$tokens" 320 off --min-seq-len 32 --rebuild-metadata-per-layer
      done
    done ;;
  small)
    for cfg in qwen3-0.6b llama-3.2-1b; do
      for ck in off recompute smart-single smart; do tandem "ckpt-$cfg-8x2048-$ck" "$cfg" 16384 2048 "$ck"; done
    done ;;
  large)
    for ck in off recompute smart-single smart; do
      tandem "ckpt-llama-3.1-8b-2x2048-$ck" llama-3.1-8b 4096 2048 "$ck"
      tandem "ckpt-llama-3.1-8b-1x16384-$ck" llama-3.1-8b 16384 16384 "$ck"
    done ;;
  selective)
    tandem "ckpt-llama-3.1-8b-2x2048-selective" llama-3.1-8b 4096 2048 selective
    tandem "ckpt-llama-3.1-8b-1x16384-selective" llama-3.1-8b 16384 16384 selective ;;
  hf8b)
    hf hf-llama-3.1-8b-2x2048 llama-3.1-8b 2 2048
    hf hf-llama-3.1-8b-1x16384 llama-3.1-8b 1 16384 ;;
  long)
    for ck in recompute smart; do tandem "ckpt-llama-3.1-8b-1x32768-$ck" llama-3.1-8b 32768 32768 "$ck"; done
    hf hf-llama-3.1-8b-1x32768 llama-3.1-8b 1 32768 ;;
  timeline)
    for ck in smart smart-single; do
      tandem "timeline-llama-3.1-8b-1x16384-$ck" llama-3.1-8b 16384 16384 "$ck" --timeline "$out/timeline-$ck.json"
    done ;;
  hf)
    hf hf-qwen3-0.6b-8x2048 qwen3-0.6b 8 2048
    hf hf-llama-3.2-1b-8x2048 llama-3.2-1b 8 2048
    hf hf-llama-3.1-8b-2x2048 llama-3.1-8b 2 2048
    hf hf-llama-3.1-8b-1x16384 llama-3.1-8b 1 16384 ;;
  *) echo "unknown stage $stage" >&2; exit 2 ;;
  esac
done
