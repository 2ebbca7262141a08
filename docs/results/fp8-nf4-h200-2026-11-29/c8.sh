#!/usr/bin/env bash
# Session 2026-11-29c, call 8: the FP8 row-quantization buffer sized by the rows quantized: FP8 self-test cases,
# the longest FP8 sample at 24 GiB, one 8B step pair.
set -u
O=$OUT/c8; mkdir -p $O
. tools/gpu-env.sh env
t0=$SECONDS
bash bench/gpu_checks.sh $O/checks .carry/assets build > $O/build.txt 2>&1 || { tail -50 $O/checks/build.log > $O/buildfail.txt; cd $OUT; tar czf c8.tgz c8; exit 1; }
echo "build $((SECONDS-t0)) s" >> $O/times.txt
CLI=build/gpu/app/cli/tandem-cli
$CLI selftest --device cuda --fixtures tests/fixtures --filter "fp8" > $O/selftest-fp8.log 2>&1; echo "fp8 rc $?" >> $O/times.txt; tail -1 $O/selftest-fp8.log >> $O/times.txt
$CLI selftest --device cuda --fixtures tests/fixtures --filter "block-chunks" > $O/selftest-chunks.log 2>&1; echo "chunks rc $?" >> $O/times.txt; tail -1 $O/selftest-chunks.log >> $O/times.txt
mkdir -p $O/m && WARMUP=0 timeout 8 bash bench/long_context.sh $CLI $O/m 1 > /dev/null 2>&1
for p in bf16 fp8; do echo "== $p 24 GiB" >> $O/plans.txt
  timeout 40 $CLI plan --model $O/m/llama-3.1-8b --lora-r 32 --checkpointing smart --device cuda --vram-budget 24 --precision $p --max-context >> $O/plans.txt 2>&1; done
echo "plans $((SECONDS-t0)) s" >> $O/times.txt
for p in bf16 fp8; do extra=""; [ $p = fp8 ] && extra="--fp8-transposed"
  timeout 60 $CLI bench --config llama-3.1-8b --batch-tokens 4096 --seq-len 2048 --checkpointing off --precision $p $extra --warmup 3 --steps 10 > $O/b-$p.txt 2>&1
  grep throughput $O/b-$p.txt >> $O/times.txt; done
echo "done $((SECONDS-t0)) s" >> $O/times.txt
cd $OUT && tar czf c8.tgz c8 && rm -rf c8
