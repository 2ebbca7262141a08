#!/usr/bin/env bash
# Session 2026-11-29b, call 1: build, self-test (block chunks at 4k, qwen3-moe-wide), memcheck of a chunked step,
# the plans' longest QLoRA / bf16 samples, then QLoRA steps at 16 GiB and 40 GiB (context extended).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=$OUT/s1; mkdir -p $O
. tools/gpu-env.sh env
t0=$SECONDS
bash bench/gpu_checks.sh $O/checks .carry/assets build > $O/build.txt 2>&1 || { tail -50 $O/checks/build.log > $O/buildfail.txt; cd $OUT; tar czf s1.tgz s1; exit 1; }
echo "build $((SECONDS-t0)) s" >> $O/times.txt
CLI=build/gpu/app/cli/tandem-cli
free -g > $O/free.txt; grep MemAvailable /proc/meminfo >> $O/free.txt
$CLI selftest --device cuda --fixtures tests/fixtures --json $O/selftest.json > $O/selftest.log 2>&1; echo "selftest rc $? $((SECONDS-t0)) s" >> $O/times.txt
tail -3 $O/selftest.log > $O/selftest-tail.txt; grep "^FAIL" $O/selftest.log | head -40 > $O/selftest-fail.txt
grep -E "llama-4k|qwen3-moe-wide|mlp-chunks" $O/selftest.log > $O/selftest-new.txt
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $CLI selftest --device cuda --filter "step llama-4k block-chunks=1024 checkpointing=smart" > $O/sanitizer-4k.log 2>&1; echo "memcheck rc $? $((SECONDS-t0)) s" >> $O/times.txt
# The plans' longest sample per budget (QLoRA and bf16; context extended to 1M positions; host budget 100 GiB).
mkdir -p $O/plans/llama-3.1-8b
python3 - $O/plans/llama-3.1-8b/config.json <<'PY'
import json, sys
json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
           "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
           "head_dim": 128, "vocab_size": 128256, "max_position_embeddings": 1048576, "rms_norm_eps": 1e-5,
           "rope_theta": 500000.0, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
           "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "tie_word_embeddings": False,
           "hidden_act": "silu", "attention_bias": False, "mlp_bias": False, "torch_dtype": "bfloat16"}, open(sys.argv[1], "w"))
PY
for q in nf4 none; do for b in 16 24 40 80; do
  h=(); [ $b = 80 ] && h=(--host-budget 100)
  echo "== $q $b GiB ${h[*]}" >> $O/plans.txt
  timeout 40 $CLI plan --model $O/plans/llama-3.1-8b --quantization $q --lora-r 32 --checkpointing smart --device cuda --vram-budget $b "${h[@]}" --max-context >> $O/plans.txt 2>&1
done; done
echo "plans $((SECONDS-t0)) s" >> $O/times.txt
WARMUP=0 timeout 120 bash bench/long_context.sh $CLI $O/lc16 16 > $O/lc16.txt 2>&1; echo "lc16 $((SECONDS-t0)) s" >> $O/times.txt
CONTEXT=262144 TRAIN_CAP=163840 WARMUP=0 timeout 240 bash bench/long_context.sh $CLI $O/lc40 40 > $O/lc40.txt 2>&1; echo "lc40 $((SECONDS-t0)) s" >> $O/times.txt
cd $OUT && tar czf s1.tgz s1 && rm -rf s1
