#!/usr/bin/env bash
# Session 2026-11-29b, call 4: HF PEFT + gradient checkpointing's longest bf16 sample under 24 / 40 / 80 GiB
# (one process per budget: the model built once), beside Tandem's bf16 table of call 3.
set -u
O=$OUT/s4; mkdir -p $O
t0=$SECONDS
for b in 24 40 80; do
  j=$O/hf-search-$b.json
  timeout $((450 - SECONDS)) python3 bench/hf_peft_baseline.py --config llama-3.1-8b --batch 1 --seq-len 1024 --steps 1 --warmup 1 --gc on \
    --rank 32 --alpha 64 --vram-budget $b --search-longest 131072 --sync-steps 0 --json $j > $O/hf-search-$b.log 2>&1
  echo "hf $b rc $? $((SECONDS-t0)) s" >> $O/times.txt
done
cd $OUT && tar czf s4.tgz s4 && rm -rf s4
