#!/usr/bin/env bash
# Session 2026-11-29c, call 2: build, self-test, FP8 (faster row quantization) and NF4 + FP8 beside bf16 / NF4.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=$OUT/c2; mkdir -p $O
. tools/gpu-env.sh env
t0=$SECONDS
bash bench/gpu_checks.sh $O/checks .carry/assets build > $O/build.txt 2>&1 || { tail -50 $O/checks/build.log > $O/buildfail.txt; cd $OUT; tar czf c2.tgz c2; exit 1; }
echo "build $((SECONDS-t0)) s" >> $O/times.txt
CLI=build/gpu/app/cli/tandem-cli
$CLI selftest --device cuda --fixtures tests/fixtures --json $O/selftest.json > $O/selftest.log 2>&1; echo "selftest rc $? $((SECONDS-t0)) s" >> $O/times.txt
tail -8 $O/selftest.log >> $O/times.txt
compute-sanitizer --tool memcheck --error-exitcode 9 $CLI selftest --device cuda --filter "nf4 dequantize_4bit_fp8" > $O/sanitizer.log 2>&1; echo "sanitizer rc $?" >> $O/times.txt
compute-sanitizer --tool memcheck --error-exitcode 9 $CLI selftest --device cuda --filter "step qwen3-nf4-fp8 checkpointing=recompute" > $O/sanitizer2.log 2>&1; echo "sanitizer step rc $?" >> $O/times.txt
$CLI bench --fp8-gemm > $O/fp8gemm.txt 2>&1; echo "fp8gemm rc $? $((SECONDS-t0)) s" >> $O/times.txt
# 8B off: bf16, fp8, fp8, bf16 (and nf4 the same); the rest once each
for spec in "llama-3.1-8b 4096 off bf16 fp8 fp8 bf16" "llama-3.1-8b 4096 recompute bf16 fp8" "qwen3-0.6b 16384 off bf16 fp8" "qwen3-0.6b 16384 recompute bf16 fp8"; do
  set -- $spec
  m=$1; n=$2; pol=$3; shift 3
  for p in "$@"; do
    extra=""; [ $p = fp8 ] && extra="--fp8-transposed"
    timeout 60 $CLI bench --config $m --batch-tokens $n --seq-len 2048 --checkpointing $pol --precision $p $extra --warmup 3 --steps 10 --json $O/b-$m-$pol-$p-$RANDOM.json > $O/b-last.txt 2>&1 || tail -5 $O/b-last.txt >> $O/times.txt
    timeout 60 $CLI bench --config $m --batch-tokens $n --seq-len 2048 --checkpointing $pol --precision $p --quantization nf4 --warmup 3 --steps 10 --json $O/q-$m-$pol-$p-$RANDOM.json > $O/q-last.txt 2>&1 || tail -5 $O/q-last.txt >> $O/times.txt
  done
  echo "bench $m $pol $((SECONDS-t0)) s" >> $O/times.txt
done
python3 - $O >> $O/times.txt <<'PY'
import json, glob, sys, os, collections
d = sys.argv[1]
rows = collections.defaultdict(list)
for f in sorted(glob.glob(d + "/[bq]-*.json")):
    j = json.load(open(f)); k = os.path.basename(f).rsplit("-", 1)[0]
    rows[k].append((j["tokens_per_s"], j["memory"]["peak_allocated_bytes"] / 2**30))
for k, v in sorted(rows.items()): print(k, " ".join(f"{t:.0f} ({m:.2f} GiB)" for t, m in v))
PY
cd $OUT && tar czf c2.tgz c2 && rm -rf c2
