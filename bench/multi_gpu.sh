#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# Data parallelism on the GPUs of one machine (--devices): equivalence with one GPU, scaling, and HF PEFT + DDP on
# the same GPUs. Run on a machine with two or more NVIDIA GPUs; every result lands in OUTDIR.
#   bench/multi_gpu.sh CLI OUTDIR ASSETS [stage...]  stages: selftest equivalence nodes scaling timeline hf (default: all)
#   ASSETS: the shared assets folder (../shared/assets), holding babyllama-tok105/ and datasets/alpaca_5000.json.
# Environment: CONFIGS (scaling: "llama-3.1-8b:4096 qwen3-0.6b:16384", preset:tokens per GPU), STEPS, POLICY.
# NVLink multicast stays off wherever NCCL runs (NCCL_NVLS_ENABLE=0).
#  - equivalence: the tiny pretrained Llama on Alpaca, 20 steps of 2 micro-batches (LoRA dropout on), trained on
#    one GPU and on GPUs 0,1 over NCCL, over the peer transport, and over NCCL forced onto its socket transport
#    (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1): every step's loss and the final adapter against the one-GPU run.
#  - nodes: the same training as two processes (--nodes 2, one GPU each through CUDA_VISIBLE_DEVICES, NCCL's id over
#    the rendezvous), with NCCL on its socket transport and on its default one, against the one-GPU run; then node
#    rank 1 is killed mid-run and node 0 must stop promptly with an error naming the failure (never hang); then
#    Ctrl-C on node rank 1 must stop both after the same step (exit 130), node 0 writing the checkpoint.
#  - scaling: tandem-cli bench on one GPU and with --devices 0,1 (the same per-GPU batch), tokens/s ratio.
#  - timeline: GPU 0's compute and communication streams in one step of the first CONFIGS entry on two GPUs
#    (tandem-cli bench --devices 0,1 --timeline; bench/timeline_plot.py draws timeline.png): do the per-layer
#    all-reduces hide behind the backward?
#  - hf: bench/hf_peft_baseline.py on one GPU and under torchrun on two (DDP), same shapes.
set -u -o pipefail
CLI=${1:?CLI}; OUT=${2:?OUTDIR}; ASSETS=${3:?ASSETS}; shift 3
STAGES=${*:-selftest equivalence nodes scaling timeline hf}
CONFIGS=${CONFIGS:-llama-3.1-8b:4096 qwen3-0.6b:16384}
STEPS=${STEPS:-12}
POLICY=${POLICY:-off}
PYTHON=${PYTHON:-python3}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
WORK=$OUT/work
mkdir -p "$OUT" "$WORK"
status=0
# The equivalence runs' settings: the tiny pretrained Llama on Alpaca, 2 micro-batches a step, LoRA dropout on.
eq_args() {  # eq_args OUTFOLDER STEPS
  echo --device cuda --model "$ASSETS/babyllama-tok105/hf" --dataset "$ASSETS/datasets/alpaca_5000.json" --out "$1" \
    --max-steps "$2" --batch-tokens 2048 --max-seq-len 256 --grad-accum 2 --lr 1e-3 --lora-dropout 0.1 --seed 1
}
note() { echo "== $*" | tee -a "$OUT/summary.txt"; }
# Two nodes (GPU 0 and GPU 1) of a long run in $WORK/NAME on 127.0.0.1:PORT, in the background (pids p0, p1);
# returns once node 0 has written 30 steps.
long_pair() {  # long_pair NAME PORT [FLAGS...]
  local name=$1 port=$2; shift 2
  rm -rf "$WORK/$name"
  # Node 1 runs bare (the tests signal it: a signal to `timeout` would not reach a killed one's child).
  CUDA_VISIBLE_DEVICES=0 timeout 240 "$CLI" train $(eq_args "$WORK/$name" 100000) --nodes 2 --node-rank 0 \
    --rendezvous 127.0.0.1:$port "$@" > "$OUT/$name-0.log" 2>&1 &
  p0=$!
  CUDA_VISIBLE_DEVICES=1 "$CLI" train $(eq_args "$WORK/$name" 100000) --nodes 2 --node-rank 1 \
    --rendezvous 127.0.0.1:$port "$@" > "$OUT/$name-1.log" 2>&1 &
  p1=$!
  for _ in $(seq 120); do
    [ -f "$WORK/$name/metrics.jsonl" ] && [ "$(wc -l < "$WORK/$name/metrics.jsonl")" -ge 30 ] && break
    sleep 0.5
  done
}

compare() {  # compare RUN...: each run's losses and adapter against eq-one's
  $PYTHON - "$WORK" "$@" <<'PY' | tee -a "$OUT/summary.txt" || status=1
import json, os, sys
from safetensors.torch import load_file
w = sys.argv[1]
def losses(n):
    return [json.loads(l)["loss"] for l in open(os.path.join(w, f"eq-{n}", "metrics.jsonl")) if '"loss"' in l]
def adapter(n):
    return load_file(os.path.join(w, f"eq-{n}", "adapter", "adapter_model.safetensors"))
ref, ref_a = losses("one"), adapter("one")
bad = False
for n in sys.argv[2:]:
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
}

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
      env "${envs[@]}" "$CLI" train $(eq_args "$WORK/eq-$name" 20) "$@" > "$OUT/eq-$name.log" 2>&1 \
        || { note "equivalence $name FAILED"; tail -n 15 "$OUT/eq-$name.log"; status=1; }
    }
    train one TANDEM_X=1 --
    train nccl TANDEM_X=1 -- --devices 0,1
    train peer TANDEM_DP_TRANSPORT=peer -- --devices 0,1
    train socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET -- --devices 0,1
    grep -h "data parallel\|NET/\|via NET\|Using network" "$OUT"/eq-*.log | sort | uniq -c | head -n 20 > "$OUT/eq-transports.txt"
    compare nccl peer socket
    ;;
  nodes)
    note "nodes: two processes (one GPU each, NCCL id over the rendezvous) vs one GPU"
    [ -f "$WORK/eq-one/adapter/adapter_model.safetensors" ] ||
      "$CLI" train $(eq_args "$WORK/eq-one" 20) > "$OUT/eq-one.log" 2>&1
    port=29517
    for v in socket default; do
      envs=(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET)
      [ $v = socket ] && envs+=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1)
      rm -rf "$WORK/eq-nodes-$v"
      for r in 1 0; do
        env "${envs[@]}" CUDA_VISIBLE_DEVICES=$r timeout 300 "$CLI" train $(eq_args "$WORK/eq-nodes-$v" 20) \
          --nodes 2 --node-rank $r --rendezvous 127.0.0.1:$port > "$OUT/nodes-$v-$r.log" 2>&1 &
      done
      wait
      grep -h "Using network\|via P2P\|via SHM\|NET/Socket : Using\|data parallel" "$OUT"/nodes-$v-*.log | sed 's/^[^ ]* //' |
        sort | uniq -c | head -n 12 | tee -a "$OUT/summary.txt"
      port=$((port + 1))
    done
    compare nodes-socket nodes-default
    note "nodes: node rank 1 killed (SIGKILL) mid-run"
    long_pair kill $port
    kill -9 $p1
    t0=$(date +%s.%N)
    wait $p0; rc=$?
    t1=$(date +%s.%N)
    echo "node 0 exited $rc $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") s after node 1 was killed (after step $(wc -l < "$WORK/kill/metrics.jsonl"))" |
      tee -a "$OUT/summary.txt"
    grep -i "error\|fail\|stopp\|checkpoint" "$OUT/kill-0.log" | tail -n 4 | tee -a "$OUT/summary.txt"
    [ $rc != 0 ] && [ $rc != 124 ] || { note "kill: node 0 did not stop with an error (exit $rc)"; status=1; }
    # Timed checkpoints every 0.3 s: node 0 collects those steps at once while node 1 runs a step ahead, so the two
    # learn of the stop at different points (the trainer's lockstep rule makes them stop after the same step).
    note "nodes: Ctrl-C (SIGINT) on node rank 1 mid-run, timed checkpoints on node 0: both stop after the same step"
    port=$((port + 1))
    long_pair int $port --checkpoint-minutes 0.005
    kill -INT $p1
    wait $p1; rc1=$?
    wait $p0; rc0=$?
    echo "SIGINT on node 1: node 0 exit $rc0, node 1 exit $rc1; steps in metrics $(wc -l < "$WORK/int/metrics.jsonl");" \
      "checkpoints: $(ls "$WORK/int/checkpoints" 2>/dev/null | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
    grep -h "stopp" "$OUT"/int-*.log | tail -n 4 | tee -a "$OUT/summary.txt"
    [ $rc0 = 130 ] && [ $rc1 = 130 ] || { note "SIGINT: expected both to exit 130"; status=1; }
    s0=$(grep -o "stopped at step [0-9]*" "$OUT/int-0.log" | tail -n 1)
    s1=$(grep -o "stopped at step [0-9]*" "$OUT/int-1.log" | tail -n 1)
    [ -n "$s0" ] && [ "$s0" = "$s1" ] || { note "SIGINT: node 0 '$s0', node 1 '$s1': not the same step"; status=1; }
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
  timeline)
    ct=${CONFIGS%% *}; c=${ct%%:*}; t=${ct##*:}
    note "timeline: $c, $t tokens per GPU, GPUs 0,1"
    "$CLI" bench --config "$c" --batch-tokens "$t" --seq-len 2048 --checkpointing "$POLICY" --steps 3 --warmup 2 \
      --devices 0,1 --timeline "$OUT/timeline-$c-2gpu.json" > "$OUT/timeline-$c-2gpu.log" 2>&1 \
      || { note "timeline FAILED"; tail -n 15 "$OUT/timeline-$c-2gpu.log"; status=1; }
    $PYTHON bench/timeline_plot.py "$OUT/timeline-$c-2gpu.png" "$OUT/timeline-$c-2gpu.json" > /dev/null || status=1
    $PYTHON - "$OUT/timeline-$c-2gpu.json" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
t = json.load(open(sys.argv[1]))
comp = [s for s in t["spans"] if s["stream"] == "compute"]
comm = [s for s in t["spans"] if s["stream"] == "comm"]
end = max(s["end_ms"] for s in comp)
busy = sum(s["end_ms"] - s["begin_ms"] for s in comm)
after = sum(max(0.0, s["end_ms"] - max(s["begin_ms"], end)) for s in comm)
print(f"compute ends at {end:.2f} ms; {len(comm)} all-reduces, {busy:.2f} ms on the comm stream, "
      f"{after:.2f} ms of it after the compute stream's last span (exposed); last sum ends at "
      f"{max(s['end_ms'] for s in comm):.2f} ms")
PY
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
