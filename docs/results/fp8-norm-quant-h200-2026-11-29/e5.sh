#!/usr/bin/env bash
# Session 2026-11-29e, review mends: rmsnorm.cu's first passes shared by the fused and unfused kernels; one TANDEM_FP8_GRADS parser
set -u
O=$OUT/e5; mkdir -p $O
. tools/gpu-env.sh env
t0=$SECONDS
bash bench/gpu_checks.sh $O/checks .carry/assets build > $O/build.txt 2>&1 || { tail -50 $O/checks/build.log > $O/buildfail.txt; exit 1; }
echo "build $((SECONDS-t0)) s" >> $O/times.txt
CLI=build/gpu/app/cli/tandem-cli
for f in rmsnorm fp8 "step llama" "step qwen3" "step gemma"; do
  $CLI selftest --device cuda --fixtures tests/fixtures --filter "$f" > "$O/st-${f// /_}.log" 2>&1; echo "selftest '$f' rc $? $((SECONDS-t0)) s" >> $O/times.txt; tail -n 1 "$O/st-${f// /_}.log" >> $O/times.txt
done
for v in e5m2 foo; do
  TANDEM_FP8_GRADS=$v timeout 60 $CLI bench --config llama-3.1-8b --layers 2 --batch-tokens 4096 --seq-len 2048 --precision fp8 --warmup 0 --steps 1 > $O/env-$v.txt 2>&1; echo "TANDEM_FP8_GRADS=$v rc $?" >> $O/times.txt; tail -n 2 $O/env-$v.txt >> $O/times.txt
done
for p in bf16 fp8; do timeout 60 $CLI bench --config llama-3.1-8b --batch-tokens 4096 --seq-len 2048 --checkpointing off --precision $p $([ $p = fp8 ] && echo --fp8-transposed) --warmup 3 --steps 10 --json $O/b-$p.json > /dev/null 2>&1; done
python3 -c "import json;a=json.load(open('$O/b-bf16.json'))['tokens_per_s'];b=json.load(open('$O/b-fp8.json'))['tokens_per_s'];print(f'8B off bf16 {a:.0f} fp8 {b:.0f} ratio {b/a:.3f}')" >> $O/times.txt
echo "done $((SECONDS-t0)) s" >> $O/times.txt
