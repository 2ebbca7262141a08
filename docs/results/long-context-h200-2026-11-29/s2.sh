#!/usr/bin/env bash
# Session 2026-11-29b, call 2: QLoRA at 80 GiB past the model's context (344,064 tokens, host budget 100 GiB),
# then HF PEFT + GC's longest bf16 sample under 24 GiB if time is left.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=$OUT/s2; mkdir -p $O
. tools/gpu-env.sh env
t0=$SECONDS
bash bench/gpu_checks.sh $O/checks .carry/assets build > $O/build.txt 2>&1 || { tail -50 $O/checks/build.log > $O/buildfail.txt; cd $OUT; tar czf s2.tgz s2; exit 1; }
echo "build $((SECONDS-t0)) s" >> $O/times.txt
CLI=build/gpu/app/cli/tandem-cli
CONTEXT=524288 HOST_BUDGET=100 TRAIN_CAP=344064 WARMUP=0 timeout $((570 - SECONDS)) bash bench/long_context.sh $CLI $O/lc80 80 > $O/lc80.txt 2>&1; echo "lc80 rc $? $((SECONDS-t0)) s" >> $O/times.txt
cd $OUT && tar czf s2.tgz s2 && rm -rf s2
