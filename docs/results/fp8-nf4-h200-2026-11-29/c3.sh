#!/usr/bin/env bash
# Session 2026-11-29c, call 3: the row quantization kernel under ncu; long context after lnf / d_lnf moved;
# loss curves of QLoRA with FP8 GEMMs against QLoRA.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=$OUT/c3; mkdir -p $O
. tools/gpu-env.sh env
t0=$SECONDS
bash bench/gpu_checks.sh $O/checks .carry/assets build > $O/build.txt 2>&1 || { tail -50 $O/checks/build.log > $O/buildfail.txt; cd $OUT; tar czf c3.tgz c3; exit 1; }
echo "build $((SECONDS-t0)) s" >> $O/times.txt
CLI=build/gpu/app/cli/tandem-cli
timeout 120 ncu --launch-count 150 --kernel-name regex:quantize_rows --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed --csv --print-units base --log-file $O/ncu-quant.csv $CLI bench --fp8-gemm > $O/ncu-quant.txt 2>&1
echo "ncu quant rc $? $((SECONDS-t0)) s" >> $O/times.txt
WARMUP=0 timeout 150 bash bench/long_context.sh $CLI $O/lc16 16 > $O/lc16.txt 2>&1; echo "lc16 $((SECONDS-t0)) s" >> $O/times.txt
for q in nf4 none; do for b in 16 24 40; do
  echo "== $q $b GiB" >> $O/plans.txt
  timeout 40 $CLI plan --model $O/lc16/llama-3.1-8b --quantization $q --lora-r 32 --checkpointing smart --device cuda --vram-budget $b --max-context >> $O/plans.txt 2>&1
done; done
echo "plans $((SECONDS-t0)) s" >> $O/times.txt
QUANT=nf4 timeout $((570 - SECONDS)) bash bench/fp8_bench.sh $CLI $O/curves .carry/assets curves > $O/curves.txt 2>&1; echo "curves rc $? $((SECONDS-t0)) s" >> $O/times.txt
cd $OUT && tar czf c3.tgz c3 && rm -rf c3
