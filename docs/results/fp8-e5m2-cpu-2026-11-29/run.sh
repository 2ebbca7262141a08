#!/usr/bin/env bash
# E4M3 vs E5M2 output gradients through the CPU backend's exact FP8 emulation: babyllama, alpaca_5000, same seed.
# Run as: STEPS=300 TOKENS=4096 run.sh (CLI: build/ci/app/cli/tandem-cli of main 8d16807, copied to /work/e5m2).
set -u
A=$(cd /work/main/../shared/assets && pwd)
CLI=/work/e5m2/tandem-cli
for spec in "e4m3 fp8" "e5m2 fp8" "fp32 bf16"; do
  set -- $spec
  rm -rf /work/e5m2/run-$1
  start=$(date +%s)
  TANDEM_FP8_GRADS=$([ $1 = e5m2 ] && echo e5m2 || echo e4m3) $CLI train --model $A/babyllama-tok105/hf \
    --dataset $A/datasets/alpaca_5000.json --out /work/e5m2/run-$1 --max-steps ${STEPS:-120} --batch-tokens ${TOKENS:-2048} \
    --max-seq-len 256 --lr 1e-3 --seed 1 --device cpu --precision $2 > /work/e5m2/$1.log 2>&1
  echo "$1 rc=$? $(( $(date +%s) - start )) s" >> /work/e5m2/times.txt
done
