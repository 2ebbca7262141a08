#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# Batch-1 greedy decode speed of a random-weight Llama-3.1-8B checkpoint (bf16) with a real Llama 3 tokenizer:
# tandem-cli generate --device cuda against HF transformers' generate (dynamic cache, and a static cache sized
# for the prompt and the new tokens: the default static cache spans max_position_embeddings and is slower; bf16,
# sdpa) on the same checkpoint, prompt and number of new tokens.
#   bench/decode_bench.sh TANDEM_CLI TOKENIZER_DIR OUTDIR [NEW_TOKENS]
set -euo pipefail
CLI=$1; TOK=$2; OUT=$3; NEW=${4:-256}
mkdir -p "$OUT"
M=$OUT/llama-3.1-8b-random
python3 - "$M" "$TOK" <<'PY'
import os, shutil, sys, torch, transformers
out, tok = sys.argv[1], sys.argv[2]
if not os.path.exists(os.path.join(out, "config.json")):
    cfg = transformers.LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0,
        rope_scaling={"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        bos_token_id=128000, eos_token_id=128001, tie_word_embeddings=False)
    torch.manual_seed(0)
    with torch.device("cuda"):
        m = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    m.save_pretrained(out)
    for f in os.listdir(tok):
        if f.startswith("tokenizer"): shutil.copy(os.path.join(tok, f), out)
PY
PROMPT="Once upon a time, in a small village by the sea, there lived an old fisherman who"
"$CLI" generate --model "$M" --prompt "$PROMPT" --max-new-tokens "$NEW" --device cuda --stats > "$OUT/tandem.txt" 2> "$OUT/tandem.err"
tail -3 "$OUT/tandem.err"
[ "${HF:-1}" = 1 ] || exit 0  # HF=0: Tandem only
python3 - "$M" "$PROMPT" "$NEW" <<'PY' | tee "$OUT/hf.txt"
import sys, time, torch, transformers
path, prompt, new = sys.argv[1], sys.argv[2], int(sys.argv[3])
tok = transformers.AutoTokenizer.from_pretrained(path)
m = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16, device_map={"": 0},
                                                      attn_implementation="sdpa")
ids = tok(prompt, return_tensors="pt").input_ids.cuda()
for name, extra in (("dynamic cache", {}),
                    ("static cache", {"cache_implementation": "static",
                                      "cache_config": {"max_cache_len": ids.shape[1] + new + 16}})):
    kw = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False, **extra)
    m.generate(ids, **dict(kw, max_new_tokens=8, min_new_tokens=8))  # warm up
    torch.cuda.synchronize(); t = time.perf_counter()
    out = m.generate(ids, **kw)
    torch.cuda.synchronize(); dt = time.perf_counter() - t
    n = out.shape[1] - ids.shape[1]
    print(f"HF generate ({name}, bf16, sdpa): {n} tokens in {dt:.2f} s = {n / dt:.1f} tokens/s")
PY
