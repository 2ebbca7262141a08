#!/usr/bin/env bash
# Session 2026-11-29c, call 1: build, full self-test, plans vs golden, ncu kernel split of bf16 vs FP8 steps.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=$OUT/c1; mkdir -p $O
. tools/gpu-env.sh env
t0=$SECONDS
bash bench/gpu_checks.sh $O/checks .carry/assets build > $O/build.txt 2>&1 || { tail -50 $O/checks/build.log > $O/buildfail.txt; cd $OUT; tar czf c1.tgz c1; exit 1; }
echo "build $((SECONDS-t0)) s" >> $O/times.txt
CLI=build/gpu/app/cli/tandem-cli
$CLI selftest --device cuda --fixtures tests/fixtures --json $O/selftest.json > $O/selftest.log 2>&1; echo "selftest rc $? $((SECONDS-t0)) s" >> $O/times.txt
tail -5 $O/selftest.log >> $O/times.txt
$CLI bench --plans $O/plans.json > /dev/null 2>&1; cmp $O/plans.json tests/fixtures/plans/cuda_plans.json >> $O/times.txt 2>&1 && echo "plans identical" >> $O/times.txt
nvidia-smi --query-gpu=name,memory.total --format=csv >> $O/times.txt
for spec in "llama-3.1-8b 4096 bf16" "llama-3.1-8b 4096 fp8" "qwen3-0.6b 16384 bf16" "qwen3-0.6b 16384 fp8"; do
  set -- $spec
  extra=""; [ $3 = fp8 ] && extra="--fp8-transposed"
  timeout 150 ncu --metrics gpu__time_duration.sum --csv --print-units base --log-file $O/ncu-$1-$3.csv \
    $CLI bench --config $1 --layers 4 --batch-tokens $2 --seq-len 2048 --checkpointing off --precision $3 $extra \
    --warmup 0 --steps 1 --cuda-graphs off > $O/ncu-$1-$3.txt 2>&1
  echo "ncu $spec rc $? $((SECONDS-t0)) s" >> $O/times.txt
done
for spec in "llama-3.1-8b 4096" "qwen3-0.6b 16384"; do
  set -- $spec
  for p in bf16 fp8; do
    extra=""; [ $p = fp8 ] && extra="--fp8-transposed"
    $CLI bench --config $1 --batch-tokens $2 --seq-len 2048 --checkpointing off --precision $p $extra --warmup 3 --steps 8 --json $O/b-$1-$p.json > $O/b-$1-$p.txt 2>&1
    echo "bench $1 $p rc $? $((SECONDS-t0)) s" >> $O/times.txt
  done
done
cd $OUT && tar czf c1.tgz c1 && rm -rf c1
