#!/usr/bin/env bash
# Session 2026-11-29b, call 3: QLoRA at 24 GiB (context extended), then bf16 LoRA at 24 / 40 / 80 GiB.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=$OUT/s3; mkdir -p $O
. tools/gpu-env.sh env
t0=$SECONDS
bash bench/gpu_checks.sh $O/checks .carry/assets build > $O/build.txt 2>&1 || { tail -50 $O/checks/build.log > $O/buildfail.txt; cd $OUT; tar czf s3.tgz s3; exit 1; }
echo "build $((SECONDS-t0)) s" >> $O/times.txt
CLI=build/gpu/app/cli/tandem-cli
CONTEXT=262144 WARMUP=0 timeout 260 bash bench/long_context.sh $CLI $O/lc24 24 > $O/lc24.txt 2>&1; echo "lc24 rc $? $((SECONDS-t0)) s" >> $O/times.txt
QUANT=none WARMUP=0 timeout $((575 - SECONDS)) bash bench/long_context.sh $CLI $O/bf16 24 40 80 > $O/bf16.txt 2>&1; echo "bf16 rc $? $((SECONDS-t0)) s" >> $O/times.txt
cd $OUT && tar czf s3.tgz s3 && rm -rf s3
