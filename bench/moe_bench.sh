#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# The mixture-of-experts benchmark: LoRA training of Qwen3-30B-A3B (preset qwen3-30b-a3b: 128 experts, 8 per
# token) with tandem-cli bench, the experts as grouped GEMMs over device offsets (--moe-routing sort) and as the
# per-expert loop ablation (--moe-routing loop), against HF PEFT on the same GPU; and the grouped GEMM
# micro-benchmark (tandem-cli bench --grouped-gemm: grouped against dense at the experts' shapes).
#   bench/moe_bench.sh TANDEM_CLI OUTDIR [LAYERS]
# LAYERS (default 24): the preset's config.json with num_hidden_layers = LAYERS, every other field as published
# (tandem-cli bench --layers, hf_peft_baseline.py --layers). All 48 layers hold 30.5B parameters, 61 GB of bf16
# weights, and LoRA r 16 on attention and on each of the 128 experts' gate_up_proj and down_proj (PEFT
# target_parameters; what the default targets resolve to) is 643M trainable parameters, another 10-12 GB of
# fp32 values, gradients and AdamW moments: on an 80 GB H100 that leaves no room for activations (HF PEFT also
# materialises every expert's B*A per layer and fp32 logits). 24 layers halve both (31 GB + 5-6 GB).
# Each step is 8 x 2048 tokens (Tandem: 16384 packed tokens of 2048-token samples; HF: batch 8 x 2048).
# Runs, in this order (RUNS selects), each writing OUTDIR/<run>.json and OUTDIR/<run>.log:
#   gemm         tandem-cli bench --grouped-gemm --json OUTDIR/gemm.json
#   tandem-sort  tandem-cli bench --config qwen3-30b-a3b --layers LAYERS --batch-tokens 16384 --seq-len 2048
#                  --warmup W --steps S --checkpointing CK --moe-routing sort --json OUTDIR/tandem-sort.json
#   tandem-loop  the same with --moe-routing loop (--json OUTDIR/tandem-loop.json)
#   hf-gcon      PYTHON bench/hf_peft_baseline.py --config qwen3-30b-a3b --layers LAYERS --batch 8 --seq-len 2048
#                  --warmup W --steps S --gc on --json OUTDIR/hf-gcon.json
# then OUTDIR/table.md: tokens/s, peak and device memory, MFU over active parameters (the formula of
# app/cli/cmd_bench.cpp, HF's from the same FLOPs per token and the peak GEMM rate Tandem measured), host syncs
# per step, the ratios Tandem / HF and sort / loop, and the grouped GEMM rates.
# Checkpointing CK: recompute (CHECKPOINTING overrides), the counterpart of HF's gradient checkpointing;
# tandem-cli bench takes off|selective|recompute|smart|smart-single (auto is the trainer's pick from the plan, not
# a bench option). Environment: PYTHON (python with torch, transformers 5, peft), WARMUP (2), STEPS (8),
# RUN_TIMEOUT (seconds per run, 600), CHECKPOINTING (recompute), RUNS (subset of "gemm sort loop hf"),
# TABLE_ONLY=1 (rebuild table.md from the files in OUTDIR), CONFIG (the preset, qwen3-30b-a3b; gpt-oss-20b too),
# HF_ATTN (HF's attn_implementation, sdpa; gpt-oss: eager, the only one of transformers' own that has its sinks).
set -uo pipefail
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  echo "usage: $0 TANDEM_CLI OUTDIR [LAYERS]" >&2
  exit 2
fi
cli=$1
out=$2
layers=${3:-24}
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}
warmup=${WARMUP:-2}
steps=${STEPS:-8}
run_timeout=${RUN_TIMEOUT:-600}
ck=${CHECKPOINTING:-recompute}
runs=${RUNS:-"gemm sort loop hf"}
cfg=${CONFIG:-qwen3-30b-a3b}
hf_attn=${HF_ATTN:-sdpa}
rows=8
seq_len=2048
tokens=$((rows * seq_len))
mkdir -p "$out"
[ -x "$cli" ] || { echo "$0: $cli is not an executable" >&2; exit 2; }

# run NAME COMMAND...: runs with a time limit, logs to OUTDIR/NAME.log, records the exit status.
run() {
  local name=$1
  shift
  local t0=$SECONDS
  rm -f "$out/$name.json"  # never report a stale result
  echo "+ $*" >"$out/$name.log"
  timeout "$run_timeout" "$@" >>"$out/$name.log" 2>&1
  local rc=$?
  echo "$rc" >"$out/$name.rc"
  printf '%-12s exit %3d  %4ds\n' "$name" "$rc" $((SECONDS - t0))
}

start=$SECONDS
if [ "${TABLE_ONLY:-0}" != 1 ]; then
  echo "moe_bench: $cfg with $layers layers, $rows x $seq_len tokens per step, checkpointing $ck, warmup $warmup, steps $steps"
  for r in $runs; do
    case $r in
      gemm) run gemm "$cli" bench --grouped-gemm --json "$out/gemm.json" ;;
      sort | loop)
        run "tandem-$r" "$cli" bench --config "$cfg" --layers "$layers" --batch-tokens "$tokens" --seq-len "$seq_len" \
          --warmup "$warmup" --steps "$steps" --checkpointing "$ck" --moe-routing "$r" --json "$out/tandem-$r.json" ;;
      hf)
        run hf-gcon "$python" "$here/hf_peft_baseline.py" --config "$cfg" --layers "$layers" --batch "$rows" \
          --seq-len "$seq_len" --warmup "$warmup" --steps "$steps" --gc on --attn "$hf_attn" --json "$out/hf-gcon.json" ;;
      *) echo "$0: unknown run '$r' (RUNS: gemm sort loop hf)" >&2; exit 2 ;;
    esac
  done
  echo "runs took $((SECONDS - start))s"
fi

"$python" - "$out" "$layers" "$cfg" <<'PY'
import json, os, platform, subprocess, sys, time

out, layers, cfg = sys.argv[1], sys.argv[2], sys.argv[3]

def load(name):
    rc_path = os.path.join(out, name + ".rc")
    rc = open(rc_path).read().strip() if os.path.exists(rc_path) else None
    try:
        with open(os.path.join(out, name + ".json")) as f:
            return json.load(f), rc
    except (OSError, ValueError):
        return None, rc

def gpu():
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
    except Exception:
        return "unknown GPU"

def ok(d):
    return d is not None and not d.get("oom") and "tokens_per_s" in d

runs = [("tandem", "tandem-sort", "Tandem, grouped GEMMs (sort)"),
        ("tandem", "tandem-loop", "Tandem, per-expert loop (ablation)"),
        ("hf", "hf-gcon", "HF PEFT, gc on")]
data = {name: load(name) for _, name, _ in runs}
# FLOPs per token and the peak GEMM rate come from a Tandem run (same shapes, same tokens).
ref = next((d for d, _ in (data["tandem-sort"], data["tandem-loop"]) if ok(d)), None)

lines = [
    f"# Mixture of experts: {cfg} LoRA training, Tandem vs HF PEFT",
    "",
    f"Machine: {gpu()}; host {platform.node()}; {time.strftime('%Y-%m-%d %H:%M')}.",
    f"Command: `bench/moe_bench.sh TANDEM_CLI {out} {layers}` (per run: the .json and .log files next to this table).",
]
if ref:
    lines.append(f"Model: {cfg} with {ref['layers']} of its {ref['layers_preset']} layers: "
                 f"{ref['parameters'] / 1e9:.2f}B parameters, {ref['active_parameters'] / 1e9:.2f}B active per token; "
                 f"{ref['experts']} experts, {ref['experts_per_token']} per token. LoRA r={ref['lora_r']} "
                 f"alpha={ref['lora_alpha']:g} on {', '.join(ref['lora_targets'])} "
                 f"({ref['lora_parameters'] / 1e6:.1f}M trainable, {ref['lora_parameters_active'] / 1e6:.1f}M per token). "
                 f"Steps of {ref['batch_tokens']} tokens (samples of {ref['seq_len']}), checkpointing "
                 f"{ref['checkpointing']}, {ref['warmup']} warmup + {ref['steps']} timed steps.")
lines += [
    "MFU: model FLOPs over ACTIVE parameters (app/cli/cmd_bench.cpp: the K routed experts and the router per MoE "
    "layer; recomputation not counted) / step time / the bf16 GEMM rate Tandem measured on this GPU. Peak GiB: "
    "Tandem's allocator high-water mark, HF's torch.cuda.max_memory_reserved. Device GiB: cudaMemGetInfo used.",
    "",
    "| run | tokens/s | step ms | vs HF | peak GiB | device GiB | MFU | host syncs / step | fwd / bwd / opt ms |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---|",
]
hf = data["hf-gcon"][0]
hf_tps = hf["tokens_per_s"] if ok(hf) else None
for system, name, label in runs:
    d, rc = data[name]
    if not ok(d):
        why = ("out of memory" if d and d.get("oom") else
               "not run" if rc is None else f"failed (exit {rc}, see {name}.log)")
        lines.append(f"| {label} | {why} | | | | | | | |")
        continue
    tps = d["tokens_per_s"]
    peak = d["peak_gib"] if system == "tandem" else d["peak_reserved_gib"]
    if system == "tandem":
        mfu = d["mfu"]
    elif ref:
        mfu = ref["model_flops_per_token"] * tps / ref["peak_bf16_gemm_flops_per_s"]
    else:
        mfu = None
    syncs = d.get("host_syncs_per_step")
    ratio = f"{tps / hf_tps:.2f}x" if hf_tps else "-"
    split = f"{d['forward_ms']:.0f} / {d['backward_ms']:.0f} / {d['optimizer_ms']:.0f}"
    lines.append(f"| {label} | {tps:,.0f} | {d['step_ms']['mean']:.0f} | {ratio} | {peak:.2f} | "
                 f"{d['device_used_gib']:.2f} | {'-' if mfu is None else f'{100 * mfu:.1f}%'} | "
                 f"{'-' if syncs is None else f'{syncs:.1f}'} | {split} |")
lines.append("")
s, l = data["tandem-sort"][0], data["tandem-loop"][0]
ratios = []
if ok(s) and hf_tps:
    ratios.append(f"Tandem (sort) / HF PEFT: {s['tokens_per_s'] / hf_tps:.2f}x tokens/s")
if ok(l) and hf_tps:
    ratios.append(f"Tandem (loop) / HF PEFT: {l['tokens_per_s'] / hf_tps:.2f}x")
if ok(s) and ok(l):
    ratios.append(f"sort / loop: {s['tokens_per_s'] / l['tokens_per_s']:.2f}x tokens/s, host syncs per step "
                  f"{s['host_syncs_per_step']:.1f} vs {l['host_syncs_per_step']:.1f}")
if ratios:
    lines.append("Ratios: " + "; ".join(ratios) + ".")
if ok(hf):
    v = hf.get("versions", {})
    lines.append(f"HF stack: torch {v.get('torch')}, transformers {v.get('transformers')}, peft {v.get('peft')} "
                 f"(CUDA {v.get('cuda')}); experts implementation {hf.get('experts_implementation')!r} "
                 f"({hf.get('experts_implementation_note')}); LoRA {hf.get('lora_dtype')} on the bf16 base, "
                 f"{hf.get('lora_parameters', 0) / 1e6:.1f}M trainable; host syncs: {hf.get('host_syncs_method')}.")
for name in ("tandem-sort", "tandem-loop"):
    d = data[name][0]
    if ok(d):
        cg = d.get("cuda_graphs", {})
        off = f" (off: {cg['disabled_reason']})" if cg.get("disabled_reason") else ""
        lines.append(f"{name}: attention {d.get('attention_backend')}, CUDA graphs {cg.get('replayed', 0)} replays{off}, "
                     f"memory "
                     f"measured/plan {d['memory']['ratio_device_used_vs_plan']:.2f} (device) "
                     f"{d['memory']['ratio_allocated_vs_plan']:.2f} (allocated), loss {d['loss_first']:.3f} -> "
                     f"{d['loss_last']:.3f}.")
if ref:
    lines.append(f"Peak bf16 GEMM (cuBLASLt 8192^3, measured): {ref['peak_bf16_gemm_flops_per_s'] / 1e12:.0f} TFLOP/s; "
                 f"model FLOPs {ref['model_flops_per_token'] / 1e9:.2f} GFLOP per token.")

g, rc = load("gemm")
lines += ["", "## Grouped GEMM vs one dense GEMM of the same FLOPs", ""]
if g and g.get("rows"):
    r0 = g["rows"][0]
    lines += [f"`tandem-cli bench --grouped-gemm`: {r0['rows']} rows (16384 tokens x 8) over {r0['experts']} experts "
              f"({r0['rows_per_expert']} rows each), bf16, fp32 accumulation; target grouped / dense >= "
              f"{g.get('target_ratio', 0.6):.2f}.", "",
              "| shape | direction | in -> out | grouped TFLOP/s | dense TFLOP/s | grouped / dense |",
              "|---|---|---|---:|---:|---:|"]
    for r in g["rows"]:
        lines.append(f"| {r['shape']} | {r['direction']} | {r['in']} -> {r['out']} | {r['grouped_tflops']:.1f} | "
                     f"{r['dense_tflops']:.1f} | {100 * r['ratio']:.1f}% |")
else:
    lines.append("not run" if rc is None else f"failed (exit {rc}, see gemm.log)")
text = "\n".join(lines) + "\n"
open(os.path.join(out, "table.md"), "w").write(text)
print(text)
PY
