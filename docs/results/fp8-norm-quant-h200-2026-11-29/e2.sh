#!/usr/bin/env bash
# Session 2026-11-29e: memcheck of the FP8 training steps on branch fp8-norm-quant (e1's filter named no case)
set -u
O=$OUT/e2; mkdir -p $O
. tools/gpu-env.sh env
t0=$SECONDS
[ -x build/gpu/app/cli/tandem-cli ] || bash bench/gpu_checks.sh $O/checks .carry/assets build > $O/build.txt 2>&1
echo "build $((SECONDS-t0)) s" >> $O/times.txt
CLI=build/gpu/app/cli/tandem-cli
$CLI selftest --list 2>/dev/null | grep -E "^step (llama|qwen3)-fp8" | sed 's/:.*//' | sort -u > $O/cases.txt
for f in "step llama-fp8 checkpointing=recompute" "step llama-fp8 block-chunks=48 checkpointing=smart" "step qwen3-fp8 checkpointing=off"; do
  timeout 170 compute-sanitizer --tool memcheck --error-exitcode 9 $CLI selftest --device cuda --filter "$f" > "$O/memcheck-${f// /_}.log" 2>&1
  echo "memcheck '$f' rc $? $((SECONDS-t0)) s" >> $O/times.txt
  tail -n 2 "$O/memcheck-${f// /_}.log" >> $O/times.txt
done
