#!/usr/bin/env bash
# Session 2026-11-29c, call 4: the final tree (row quantization reverted to one item per half-warp): build, the
# FP8 and 4-bit self-test cases, and one 8B FP8 bench beside bf16.
set -u
O=$OUT/c4; mkdir -p $O
. tools/gpu-env.sh env
t0=$SECONDS
bash bench/gpu_checks.sh $O/checks .carry/assets build > $O/build.txt 2>&1 || { tail -50 $O/checks/build.log > $O/buildfail.txt; cd $OUT; tar czf c4.tgz c4; exit 1; }
echo "build $((SECONDS-t0)) s" >> $O/times.txt
CLI=build/gpu/app/cli/tandem-cli
$CLI selftest --device cuda --fixtures tests/fixtures --filter "fp8" > $O/selftest-fp8.log 2>&1; echo "fp8 rc $?" >> $O/times.txt; tail -1 $O/selftest-fp8.log >> $O/times.txt
$CLI selftest --device cuda --fixtures tests/fixtures --filter "nf4" > $O/selftest-nf4.log 2>&1; echo "nf4 rc $?" >> $O/times.txt; tail -1 $O/selftest-nf4.log >> $O/times.txt
for p in bf16 fp8; do extra=""; [ $p = fp8 ] && extra="--fp8-transposed"
  $CLI bench --config llama-3.1-8b --batch-tokens 4096 --seq-len 2048 --checkpointing off --precision $p $extra --warmup 3 --steps 10 > $O/b-$p.txt 2>&1
  grep throughput $O/b-$p.txt >> $O/times.txt; done
echo "done $((SECONDS-t0)) s" >> $O/times.txt
cd $OUT && tar czf c4.tgz c4 && rm -rf c4
