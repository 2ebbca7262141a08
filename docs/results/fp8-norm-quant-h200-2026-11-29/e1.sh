#!/usr/bin/env bash
# Session 2026-11-29d (next GPU call, on branch fp8-norm-quant): the block norms quantize their outputs (rmsnorm_forward_fp8) and the residual gradients (rmsnorm_backward_fp8) for the FP8 GEMMs they feed
# full self-test, memcheck of the new ops and of FP8 steps, FP8 beside bf16 in one call, the kernel split again.
set -u
O=$OUT/e1; mkdir -p $O
. tools/gpu-env.sh env
t0=$SECONDS
bash bench/gpu_checks.sh $O/checks .carry/assets build > $O/build.txt 2>&1 || { tail -50 $O/checks/build.log > $O/buildfail.txt; cd $OUT; tar czf e1.tgz e1; exit 1; }
echo "build $((SECONDS-t0)) s" >> $O/times.txt
CLI=build/gpu/app/cli/tandem-cli
$CLI selftest --device cuda --fixtures tests/fixtures --json $O/selftest.json > $O/selftest.log 2>&1; echo "selftest rc $? $((SECONDS-t0)) s" >> $O/times.txt
tail -4 $O/selftest.log >> $O/times.txt
compute-sanitizer --tool memcheck --error-exitcode 9 $CLI selftest --device cuda --filter "fp8 rmsnorm" > $O/sanitizer.log 2>&1; echo "sanitizer ops rc $?" >> $O/times.txt
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $CLI selftest --device cuda --filter "step llama-fp8 checkpointing=off" > $O/sanitizer2.log 2>&1; echo "sanitizer step rc $? $((SECONDS-t0)) s" >> $O/times.txt
for spec in "llama-3.1-8b 4096 off none bf16 fp8 fp8 bf16" "llama-3.1-8b 4096 recompute none bf16 fp8 fp8 bf16" "llama-3.1-8b 4096 off nf4 bf16 fp8" "qwen3-0.6b 16384 off none bf16 fp8" "qwen3-0.6b 16384 recompute none bf16 fp8"; do
  set -- $spec
  m=$1; n=$2; pol=$3; q=$4; shift 4
  for p in "$@"; do
    extra=""; [ $p = fp8 ] && [ $q = none ] && extra="--fp8-transposed"
    timeout 60 $CLI bench --config $m --batch-tokens $n --seq-len 2048 --checkpointing $pol --precision $p --quantization $q $extra --warmup 3 --steps 10 --json $O/b-$m-$pol-$q-$p-$RANDOM.json > $O/b-last.txt 2>&1 || tail -5 $O/b-last.txt >> $O/times.txt
  done
  echo "bench $m $pol $q $((SECONDS-t0)) s" >> $O/times.txt
done
python3 - $O >> $O/times.txt <<'PY'
import json, glob, sys, os, collections
d = sys.argv[1]
rows = collections.defaultdict(list)
for f in sorted(glob.glob(d + "/b-*.json"), key=os.path.getmtime):
    j = json.load(open(f)); k = os.path.basename(f).rsplit("-", 1)[0]
    rows[k].append((j["tokens_per_s"], j["memory"]["peak_allocated_bytes"] / 2**30))
for k, v in sorted(rows.items()): print(k, " ".join(f"{t:.0f} ({m:.2f} GiB)" for t, m in v))
PY
timeout 100 ncu --metrics gpu__time_duration.sum --csv --print-units base --log-file $O/ncu-llama-3.1-8b-fp8.csv \
  $CLI bench --config llama-3.1-8b --layers 4 --batch-tokens 4096 --seq-len 2048 --checkpointing off --precision fp8 --fp8-transposed \
  --warmup 0 --steps 1 --cuda-graphs off > $O/ncu.txt 2>&1; echo "ncu rc $? $((SECONDS-t0)) s" >> $O/times.txt
cd $OUT && tar czf e1.tgz e1 && rm -rf e1
