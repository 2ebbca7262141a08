#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# Generation beyond batch 1: batch-16 greedy decode throughput and the time to first token of a 2k-token prompt,
# on random-weight Llama-3.1-8B and Qwen3-0.6B checkpoints (bf16, written by transformers) with their real
# tokenizers; tandem-cli generate --device cuda (--batch 16, --stats) against HF transformers' generate (static
# cache sized for the prompt and the new tokens, bf16, sdpa) on the same checkpoint and prompts.
#   bench/decode_more.sh TANDEM_CLI ASSETS_DIR OUTDIR [NEW_TOKENS]
# ASSETS_DIR holds tokenizer-llama3/ and tokenizer-qwen3/ (../shared/assets). Prints one line per measurement.
# TTFT_ONLY=1: only the 2k-token prompt's first token (cold, then warm with prefill chunks of 256 and 2048).
# HF=0: no transformers runs. HF_CACHE=dynamic: transformers' default cache, eager (the static cache compiles the
# decode step with torch.compile, whose recompilations spoiled a batch-16 measurement).
set -euo pipefail
CLI=$1; ASSETS=$2; OUT=$3; NEW=${4:-256}
mkdir -p "$OUT"
for name in llama-3.1-8b qwen3-0.6b; do python3 "$(dirname "$0")/random_checkpoint.py" "$ASSETS" "$OUT/$name" $name; done
SHORT="Once upon a time, in a small village by the sea, there lived an old fisherman who"
LONG=$(python3 -c "print(' '.join(['The quick brown fox jumps over the lazy dog near the river bank.'] * 150))")
for name in llama-3.1-8b qwen3-0.6b; do
  M=$OUT/$name
  if [ "${TTFT_ONLY:-0}" != 1 ]; then
    "$CLI" generate --model "$M" --prompt "$SHORT" --max-new-tokens "$NEW" --device cuda --batch 16 --stats \
      > /dev/null 2> "$OUT/$name-batch16.err"
    echo "$name tandem $(tail -1 "$OUT/$name-batch16.err")"
    "$CLI" generate --model "$M" --prompt "$SHORT" --max-new-tokens "$NEW" --device cuda --stats \
      > /dev/null 2> "$OUT/$name-batch1.err"
    echo "$name tandem batch 1: $(tail -1 "$OUT/$name-batch1.err")"
  fi
  "$CLI" generate --model "$M" --prompt "$LONG" --max-new-tokens 8 --device cuda --stats \
    > /dev/null 2> "$OUT/$name-ttft.err"
  echo "$name tandem long prompt: $(tail -1 "$OUT/$name-ttft.err")"
  for chunk in 256 2048; do  # warm (one unprinted run first), the former and the current prefill chunk
    "$CLI" generate --model "$M" --prompt "$LONG" --max-new-tokens 8 --device cuda --stats --warmup 1 \
      --prefill-chunk $chunk > /dev/null 2> "$OUT/$name-ttft-warm-$chunk.err"
    echo "$name tandem long prompt, warm, prefill chunk $chunk: $(tail -1 "$OUT/$name-ttft-warm-$chunk.err")"
  done
  [ "${HF:-1}" = 1 ] || continue
  python3 - "$M" "$SHORT" "$LONG" "$NEW" "$name" <<'PY'
import os, sys, time, torch, transformers
path, short, long_, new, name = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
tok = transformers.AutoTokenizer.from_pretrained(path)
m = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16, device_map={"": 0},
                                                      attn_implementation="sdpa")
CACHE = os.environ.get("HF_CACHE", "static")  # static (torch.compile'd decode step) or dynamic (eager)
def run(ids, n):
    kw = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False)
    if CACHE == "static":
        kw.update(cache_implementation="static", cache_config={"max_cache_len": ids.shape[1] + n + 16})
    m.generate(ids, **dict(kw, max_new_tokens=min(n, 8), min_new_tokens=min(n, 8)))  # warm up
    if CACHE == "dynamic":  # the same shapes once in full: nothing left to warm
        m.generate(ids, **kw)
    torch.cuda.synchronize(); t = time.perf_counter()
    out = m.generate(ids, **kw)
    torch.cuda.synchronize()
    return out, time.perf_counter() - t
import os
if os.environ.get("TTFT_ONLY", "0") != "1":
    ids = tok(short, return_tensors="pt").input_ids.cuda()
    out, dt = run(ids.repeat(16, 1), new)
    n = 16 * (out.shape[1] - ids.shape[1])
    print(f"{name} HF generate batch 16 ({CACHE} cache, bf16, sdpa): {n} new tokens in {dt:.2f} s = {n / dt:.1f} tokens/s")
ids = tok(long_, return_tensors="pt").input_ids.cuda()
_, dt = run(ids, 1)
print(f"{name} HF generate long prompt: {ids.shape[1]} prompt tokens, first token {dt:.3f} s")
PY
done
