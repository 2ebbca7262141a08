#!/usr/bin/env bash
# Session 2026-11-29b, call 5: QLoRA at 40 GiB at the plan's longest (context extended to 1M positions).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=$OUT/s5; mkdir -p $O
. tools/gpu-env.sh env
t0=$SECONDS
bash bench/gpu_checks.sh $O/checks .carry/assets build > $O/build.txt 2>&1 || { tail -50 $O/checks/build.log > $O/buildfail.txt; cd $OUT; tar czf s5.tgz s5; exit 1; }
echo "build $((SECONDS-t0)) s" >> $O/times.txt
CLI=build/gpu/app/cli/tandem-cli
CONTEXT=1048576 WARMUP=0 timeout $((400 - SECONDS)) bash bench/long_context.sh $CLI $O/lc40 40 > $O/lc40.txt 2>&1; echo "lc40 rc $? $((SECONDS-t0)) s" >> $O/times.txt
cd $OUT && tar czf s5.tgz s5 && rm -rf s5
