#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# Data parallelism on the GPUs of one machine (--devices): equivalence with one GPU, scaling, and HF PEFT + DDP on
# the same GPUs. Run on a machine with two or more NVIDIA GPUs; every result lands in OUTDIR.
#   bench/multi_gpu.sh CLI OUTDIR ASSETS [stage...]      stages: selftest equivalence scaling hf (default: all)
#   ASSETS: the shared assets folder (../shared/assets), holding babyllama-tok105/ and datasets/alpaca_5000.json.
# Environment: CONFIGS (scaling: "llama-3.1-8b:4096 qwen3-0.6b:16384", preset:tokens per GPU), STEPS, POLICY.
# NVLink multicast stays off wherever NCCL runs (NCCL_NVLS_ENABLE=0).
#  - equivalence: the tiny pretrained Llama on Alpaca, 20 steps of 2 micro-batches (LoRA dropout on), trained on
#    one GPU and on GPUs 0,1 over NCCL, over the peer transport, and over NCCL forced onto its socket transport
#    (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1): every step's loss and the final adapter against the one-GPU run.
#  - scaling: tandem-cli bench on one GPU and with --devices 0,1 (the same per-GPU batch), tokens/s ratio.
#  - hf: bench/hf_peft_baseline.py on one GPU and under torchrun on two (DDP), same shapes.
set -u -o pipefail
CLI=${1:?CLI}; OUT=${2:?OUTDIR}; ASSETS=${3:?ASSETS}; shift 3
STAGES=${*:-selftest equivalence scaling hf}
CONFIGS=${CONFIGS:-llama-3.1-8b:4096 qwen3-0.6b:16384}
STEPS=${STEPS:-12}
POLICY=${POLICY:-off}
PYTHON=${PYTHON:-python3}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
WORK=$OUT/work
mkdir -p "$OUT" "$WORK"
status=0
note() { echo "== $*" | tee -a "$OUT/summary.txt"; }

for stage in $STAGES; do
  case $stage in
  selftest)
    note "selftest: data parallel cases"
    "$CLI" selftest --device cuda --filter "data parallel" > "$OUT/selftest-dp.log" 2>&1; rc=$?
    note "selftest exit $rc"; tail -n 25 "$OUT/selftest-dp.log" | tee -a "$OUT/summary.txt"; [ $rc = 0 ] || status=1
    ;;
  equivalence)
    note "equivalence: babyllama x alpaca, 20 steps x 2 micro-batches, one GPU vs two"
    train() {  # train NAME [ENV...] -- [FLAGS...]
      local name=$1; shift
      local envs=()
      while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
      rm -rf "$WORK/eq-$name"
      env "${envs[@]}" "$CLI" train --device cuda --model "$ASSETS/babyllama-tok105/hf" \
        --dataset "$ASSETS/datasets/alpaca_5000.json" --out "$WORK/eq-$name" --max-steps 20 --batch-tokens 2048 \
        --max-seq-len 256 --grad-accum 2 --lr 1e-3 --lora-dropout 0.1 --seed 1 "$@" > "$OUT/eq-$name.log" 2>&1 \
        || { note "equivalence $name FAILED"; tail -n 15 "$OUT/eq-$name.log"; status=1; }
    }
    train one TANDEM_X=1 --
    train nccl TANDEM_X=1 -- --devices 0,1
    train peer TANDEM_DP_TRANSPORT=peer -- --devices 0,1
    train socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET -- --devices 0,1
    grep -h "data parallel\|NET/\|via NET\|Using network" "$OUT"/eq-*.log | sort | uniq -c | head -n 20 > "$OUT/eq-transports.txt"
    $PYTHON - "$WORK" <<'PY' | tee -a "$OUT/summary.txt" || status=1
import json, os, sys
from safetensors.torch import load_file
w = sys.argv[1]
def losses(n):
    return [json.loads(l)["loss"] for l in open(os.path.join(w, f"eq-{n}", "metrics.jsonl")) if '"loss"' in l]
def adapter(n):
    return load_file(os.path.join(w, f"eq-{n}", "adapter", "adapter_model.safetensors"))
ref, ref_a = losses("one"), adapter("one")
bad = False
for n in ("nccl", "peer", "socket"):
    try:
        got, a = losses(n), adapter(n)
    except Exception as e:  # noqa: BLE001
        print(f"{n}: missing ({e})"); bad = True; continue
    rel = max(abs(x - y) / abs(y) for x, y in zip(got, ref))
    worst = max(((a[k].float() - ref_a[k].float()).abs().max() / ref_a[k].float().abs().max()).item() for k in ref_a)
    ok = len(got) == len(ref) == 20 and rel <= 1e-3 and worst <= 1e-2
    bad |= not ok
    print(f"{n}: {len(got)} steps, worst loss rel diff {rel:.2e} (<= 1e-3), worst LoRA value diff {worst:.2e} of the "
          f"tensor's largest (<= 1e-2, bf16) -> {'ok' if ok else 'FAIL'}; loss step 1 {got[0]:.6f} vs {ref[0]:.6f}, "
          f"step 20 {got[-1]:.6f} vs {ref[-1]:.6f}")
sys.exit(1 if bad else 0)
PY
    ;;
  scaling)
    note "scaling: tandem-cli bench, one GPU vs --devices 0,1 ($POLICY)"
    for ct in $CONFIGS; do
      c=${ct%%:*}; t=${ct##*:}
      for d in 1 2; do
        flags=(); [ $d = 2 ] && flags=(--devices 0,1)
        "$CLI" bench --config "$c" --batch-tokens "$t" --seq-len 2048 --checkpointing "$POLICY" --steps "$STEPS" \
          --warmup 3 "${flags[@]}" --json "$OUT/tandem-$c-${d}gpu.json" > "$OUT/tandem-$c-${d}gpu.log" 2>&1 \
          || { note "bench $c $d GPU FAILED"; tail -n 15 "$OUT/tandem-$c-${d}gpu.log"; status=1; }
      done
    done
    ;;
  hf)
    note "hf: HF PEFT one GPU vs torchrun DDP on two (gc off)"
    for ct in $CONFIGS; do
      c=${ct%%:*}; t=${ct##*:}; b=$((t / 2048))
      $PYTHON bench/hf_peft_baseline.py --config "$c" --batch $b --seq-len 2048 --gc off --steps "$STEPS" --warmup 3 \
        --json "$OUT/hf-$c-1gpu.json" > "$OUT/hf-$c-1gpu.log" 2>&1 || { note "hf $c 1 GPU FAILED"; tail -n 5 "$OUT/hf-$c-1gpu.log"; }
      $PYTHON -m torch.distributed.run --standalone --nproc_per_node 2 bench/hf_peft_baseline.py --config "$c" \
        --batch $b --seq-len 2048 --gc off --steps "$STEPS" --warmup 3 --json "$OUT/hf-$c-2gpu.json" \
        > "$OUT/hf-$c-2gpu.log" 2>&1 || { note "hf $c 2 GPUs FAILED"; tail -n 5 "$OUT/hf-$c-2gpu.log"; }
    done
    ;;
  *) echo "unknown stage $stage"; exit 2 ;;
  esac
done

# The table of whatever ran.
$PYTHON - "$OUT" "$CONFIGS" <<'PY' | tee -a "$OUT/summary.txt"
import json, os, sys
d, configs = sys.argv[1], sys.argv[2].split()
def row(f):
    p = os.path.join(d, f)
    return json.load(open(p)) if os.path.exists(p) else None
print("| model | tokens per GPU | system | 1 GPU tok/s | 2 GPUs tok/s | scaling | peak GiB (GPU 0) | syncs/step (2 GPUs) |")
print("|---|---|---|---|---|---|---|---|")
for ct in configs:
    c, t = ct.split(":")
    for sysname, pre in (("Tandem", "tandem"), ("HF PEFT + DDP", "hf")):
        a, b = row(f"{pre}-{c}-1gpu.json"), row(f"{pre}-{c}-2gpu.json")
        if not a or not b or a.get("oom") or b.get("oom"):
            if a or b: print(f"| {c} | {t} | {sysname} | {a and a.get('tokens_per_s')} | {b and b.get('tokens_per_s')} | - | - | - |")
            continue
        peak = b.get("peak_gib", b.get("peak_reserved_gib", 0))
        print(f"| {c} | {t} | {sysname} | {a['tokens_per_s']:.0f} | {b['tokens_per_s']:.0f} | "
              f"{b['tokens_per_s'] / a['tokens_per_s']:.3f}x | {peak:.1f} | {b.get('host_syncs_per_step')} |")
    tb, hb = row(f"tandem-{c}-2gpu.json"), row(f"hf-{c}-2gpu.json")
    if tb and hb and not tb.get("oom") and not hb.get("oom"):
        print(f"| {c} | {t} | Tandem / HF on 2 GPUs | | | {tb['tokens_per_s'] / hb['tokens_per_s']:.2f}x | | |")
PY
exit $status
