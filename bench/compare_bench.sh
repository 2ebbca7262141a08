#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# The Chat page's comparison (base and tuned answering the same prompt at once): tokens/s of each answer when
# both decode in one batch (tandem-cli generate --compare), against one answer alone, on random-weight
# Qwen3-0.6B and Llama-3.1-8B checkpoints (written by transformers) with an adapter from two LoRA steps.
#   bench/compare_bench.sh TANDEM_CLI ASSETS_DIR OUTDIR      (ASSETS_DIR: tokenizer-qwen3/, tokenizer-llama3/, datasets/)
set -euo pipefail
CLI=$1; ASSETS=$2; OUT=$3
mkdir -p "$OUT"
python3 - "$OUT" "$ASSETS" <<'PY'
import os, shutil, sys, torch, transformers
out, assets = sys.argv[1], sys.argv[2]
models = {
    "qwen3-0.6b": ("tokenizer-qwen3", lambda: transformers.Qwen3ForCausalLM(transformers.Qwen3Config(
        hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8,
        head_dim=128, vocab_size=151936, max_position_embeddings=40960, rms_norm_eps=1e-6, rope_theta=1000000.0,
        tie_word_embeddings=True, bos_token_id=151643, eos_token_id=151645))),
    "llama-3.1-8b": ("tokenizer-llama3", lambda: transformers.LlamaForCausalLM(transformers.LlamaConfig(
        hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
        vocab_size=128256, max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0,
        bos_token_id=128000, eos_token_id=128001, tie_word_embeddings=False))),
}
for name, (tok, make) in models.items():
    d = os.path.join(out, name)
    torch.manual_seed(0)
    with torch.device("cuda"):
        m = make().to(torch.bfloat16)
    m.save_pretrained(d)
    del m
    for f in os.listdir(os.path.join(assets, tok)):
        if f.startswith("tokenizer"):
            shutil.copy(os.path.join(assets, tok, f), d)
PY
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
