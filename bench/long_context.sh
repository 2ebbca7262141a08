#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# The longest single sequence Llama-3.1-8B QLoRA (r 32, one sample per step) trains on under a VRAM budget,
# as the plan finds it (`tandem-cli plan --max-context`), then one real step at that length under the same
# budget (`tandem-cli bench --vram-budget`: the allocator refuses anything past it), measured.
#   bench/long_context.sh TANDEM_CLI OUTDIR [BUDGETS...]    (default budgets: 16 24 40 80 GiB)
# The model's config is Llama-3.1-8B's (max_position_embeddings 131072: the search stops there; CONTEXT raises it).
set -u -o pipefail
CLI=${1:?TANDEM_CLI}; OUT=${2:?OUTDIR}; shift 2
BUDGETS=${*:-16 24 40 80}
POLICY=${POLICY:-smart}
QUANT=${QUANT:-nf4}   # nf4 (QLoRA) or none (bf16 LoRA)
HF=${HF:-0}           # 1: also HF PEFT + gradient checkpointing (bf16) at the same length and budget
CONTEXT=${CONTEXT:-131072}  # the model's max_position_embeddings (Llama-3.1-8B's 131072; more: context extension,
                           # the config and tandem-cli bench --max-position raised alike, the RoPE scaling kept)
HF_SEARCH=${HF_SEARCH:-0}  # 1: also HF PEFT + gradient checkpointing's own longest sample under each budget:
                           # 1024 tokens doubled until out of memory, then 3 halvings of the gap (multiples of
                           # 256), in one process; then one warmup + one timed step there, OUT/hf-search-B.json
HOST_BUDGET=${HOST_BUDGET:-}  # GiB of pinned host memory smart checkpointing may take (tandem-cli --host-budget;
                              # default: half of the available RAM)
TRAIN_CAP=${TRAIN_CAP:-0}     # >0: train at most this many tokens (a step at the plan's longest may outlast the
                              # machine's time); the plan's longest is still reported
WARMUP=${WARMUP:-1}           # untimed steps before the timed one (0: the one step is timed, first-use costs in)
mkdir -p "$OUT/llama-3.1-8b"
hb=(); [ -n "$HOST_BUDGET" ] && hb=(--host-budget "$HOST_BUDGET")
echo "quantization $QUANT, checkpointing $POLICY"
python3 - "$OUT/llama-3.1-8b/config.json" "$CONTEXT" <<'PY'
import json, sys
json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
           "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
           "head_dim": 128, "vocab_size": 128256, "max_position_embeddings": int(sys.argv[2]), "rms_norm_eps": 1e-5,
           "rope_theta": 500000.0, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
           "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "tie_word_embeddings": False,
           "hidden_act": "silu", "attention_bias": False, "mlp_bias": False, "torch_dtype": "bfloat16",
           "bos_token_id": 128000, "eos_token_id": 128001}, open(sys.argv[1], "w"), indent=1)
PY
# HF PEFT + gradient checkpointing's longest sample under B GiB, searched in one process (the model built once:
# hf_peft_baseline.py --search-longest), then one warmup + one timed step at that length: OUT/hf-search-B.json.
# When that timed repeat runs out of memory (the search's fragmentation), it runs again in a fresh process, as a
# user would start it: OUT/hf-fresh-B.json.
hf_search() {
  local b=$1 j="$OUT/hf-search-$1.json" load=""
  [ "$QUANT" = nf4 ] && load=--load-in-4bit
  python3 bench/hf_peft_baseline.py --config llama-3.1-8b --batch 1 --seq-len 1024 --steps 1 --warmup 1 --gc on \
    --rank 32 --alpha 64 --vram-budget "$b" $load --search-longest "$CONTEXT" --sync-steps 0 --json "$j" \
    > "${j%.json}.log" 2>&1
  python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
print('  HF PEFT + GC longest sample under %s GiB: %s tokens (out of memory at %s)' % (sys.argv[2], j.get('longest_trained'), j.get('oom_at')))
if not j.get('oom'): print('    %.0f tokens/s, peak reserved %.2f GiB' % (j['tokens_per_s'], j['peak_reserved_gib']))
" "$j" "$b" 2>/dev/null || { echo "  HF PEFT + GC search failed: ${j%.json}.log"; return; }
  local n; n=$(python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(j['longest_trained'] if j.get('oom') and j.get('longest_trained') else 0)" "$j")
  if [ "$n" -gt 0 ]; then
    local f="$OUT/hf-fresh-$b.json"
    python3 bench/hf_peft_baseline.py --config llama-3.1-8b --batch 1 --seq-len "$n" --steps 1 --warmup 1 --gc on \
      --rank 32 --alpha 64 --vram-budget "$b" $load --sync-steps 0 --json "$f" > "${f%.json}.log" 2>&1
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('    fresh process at %s tokens:' % sys.argv[2], 'out of memory' if j.get('oom') else '%.0f tokens/s, peak reserved %.2f GiB' % (j['tokens_per_s'], j['peak_reserved_gib']))" "$f" "$n" 2>/dev/null || echo "    fresh process at $n tokens: no result"
  fi
}
# plan B FLAGS...: tandem-cli plan for this model and these settings under B GiB.
plan() {
  local b=$1; shift
  "$CLI" plan --model "$OUT/llama-3.1-8b" --quantization "$QUANT" --lora-r 32 --checkpointing "$POLICY" --device cuda \
    --vram-budget "$b" "${hb[@]}" "$@"
}
for b in $BUDGETS; do
  [ "$HF_SEARCH" = 1 ] && hf_search "$b"
  plan "$b" --max-context > "$OUT/plan-$b.txt" 2>&1
  n=$(sed -n 's/^longest sample that fits: \([0-9]*\).*/\1/p' "$OUT/plan-$b.txt" | head -1)
  att=auto; grep -q "attention: in-house kernels" "$OUT/plan-$b.txt" && att=inhouse
  echo "budget $b GiB: plan says ${n:-?} tokens (attention $att)"
  [ -n "$n" ] && [ "$n" -gt 0 ] || continue
  if [ "$TRAIN_CAP" -gt 0 ] && [ "$n" -gt "$TRAIN_CAP" ]; then
    n=$TRAIN_CAP  # the plan at that length says which attention kernels fit
    plan "$b" --batch-tokens "$n" --max-seq-len "$n" > "$OUT/plan-$b-cap.txt" 2>&1
    att=auto; grep -q "attention: in-house kernels" "$OUT/plan-$b-cap.txt" && att=inhouse
    echo "  training $n tokens (TRAIN_CAP; attention $att)"
  fi
  "$CLI" bench --config llama-3.1-8b --batch-tokens "$n" --seq-len "$n" --checkpointing "$POLICY" --quantization "$QUANT" \
    --rank 32 --alpha 64 --attention "$att" --vram-budget "$b" --max-position "$CONTEXT" --steps 1 --warmup "$WARMUP" \
    --json "$OUT/bench-$b.json" \
    > "$OUT/bench-$b.log" 2>&1 \
    || { echo "  bench at $n FAILED"; tail -3 "$OUT/bench-$b.log"; continue; }
  grep -E "throughput|memory  " "$OUT/bench-$b.log" | sed 's/^/  /'
  if [ "$HF" = 1 ]; then
    python3 bench/hf_peft_baseline.py --config llama-3.1-8b --batch 1 --seq-len "$n" --steps 1 --warmup 1 --gc on \
      --rank 32 --alpha 64 --vram-budget "$b" --json "$OUT/hf-$b.json" > "$OUT/hf-$b.log" 2>&1
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('  HF PEFT + GC:', 'out of memory' if j.get('oom') else '%.0f tokens/s, peak %.2f GiB' % (j['tokens_per_s'], j['peak_reserved_gib']))" "$OUT/hf-$b.json" 2>/dev/null || echo "  HF PEFT: no result"
  fi
done
