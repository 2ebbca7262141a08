#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# Issue 4's benchmark: LoRA training throughput of tandem-cli bench against HF PEFT on the same GPU.
#   bench/gpu_bench.sh TANDEM_CLI OUTDIR
# For each config (qwen3-0.6b 8x2048, llama-3.2-1b 8x2048, llama-3.1-8b 2x2048 tokens per step) it runs
# tandem-cli bench with checkpointing off and recompute, and bench/hf_peft_baseline.py with gradient
# checkpointing on and off; each run writes OUTDIR/<system>-<config>-<variant>.json (+ .log), and
# OUTDIR/table.md gets one row per run: tokens/s, ratio against HF with gc on (the usual HF setting),
# peak GiB (Tandem: allocator high-water mark; HF: max_memory_reserved), device GiB (cudaMemGetInfo used,
# CUDA context included) and MFU (one FLOP formula for both, documented in app/cli/cmd_bench.cpp, over the
# peak bf16 GEMM rate tandem-cli bench measures on this GPU).
# Few steps (warmup 2, timed 8) keep the whole sweep under ~8 minutes on an H100. Environment overrides:
# PYTHON (python with torch, transformers, peft), WARMUP, STEPS, RUN_TIMEOUT (seconds per run), CONFIGS
# (space-separated subset, e.g. "qwen3-0.6b"), TABLE_ONLY=1 (rebuild table.md from the files in OUTDIR).
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 TANDEM_CLI OUTDIR" >&2
  exit 2
fi
cli=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}
warmup=${WARMUP:-2}
steps=${STEPS:-8}
run_timeout=${RUN_TIMEOUT:-240}
configs=${CONFIGS:-"qwen3-0.6b llama-3.2-1b llama-3.1-8b"}
seq_len=2048
mkdir -p "$out"
[ -x "$cli" ] || { echo "$0: $cli is not an executable" >&2; exit 2; }

rows_for() {  # tokens per step = rows x 2048
  case $1 in
    llama-3.1-8b) echo 2 ;;
    *) echo 8 ;;
  esac
}

# run NAME COMMAND...: runs with a time limit, logs to OUTDIR/NAME.log, records the exit status.
run() {
  local name=$1
  shift
  local t0=$SECONDS
  rm -f "$out/$name.json"  # never report a stale result
  timeout "$run_timeout" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  echo "$rc" >"$out/$name.rc"
  printf '%-36s exit %3d  %4ds\n' "$name" "$rc" $((SECONDS - t0))
}

start=$SECONDS
for cfg in $configs; do
  [ "${TABLE_ONLY:-0}" = 1 ] && break
  rows=$(rows_for "$cfg")
  tokens=$((rows * seq_len))
  for ck in off recompute; do
    run "tandem-$cfg-$ck" "$cli" bench --config "$cfg" --batch-tokens "$tokens" --seq-len "$seq_len" \
      --warmup "$warmup" --steps "$steps" --checkpointing "$ck" --json "$out/tandem-$cfg-$ck.json"
  done
  for gc in on off; do
    run "hf-$cfg-gc$gc" "$python" "$here/hf_peft_baseline.py" --config "$cfg" --batch "$rows" \
      --seq-len "$seq_len" --warmup "$warmup" --steps "$steps" --gc "$gc" --json "$out/hf-$cfg-gc$gc.json"
  done
done
echo "runs took $((SECONDS - start))s"

"$python" - "$out" "$configs" <<'PY'
import json, os, platform, subprocess, sys, time

out, configs = sys.argv[1], sys.argv[2].split()

def load(name):
    path = os.path.join(out, name + ".json")
    rc_path = os.path.join(out, name + ".rc")
    rc = open(rc_path).read().strip() if os.path.exists(rc_path) else "?"
    try:
        with open(path) as f:
            return json.load(f), rc
    except (OSError, ValueError):
        return None, rc

def gpu():
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
    except Exception:
        return "unknown GPU"

lines = [
    "# Tandem vs HF PEFT: LoRA training throughput",
    "",
    f"Machine: {gpu()}; host {platform.node()}; {time.strftime('%Y-%m-%d %H:%M')}.",
    f"Command: `bench/gpu_bench.sh TANDEM_CLI {out}` (per run: see the .json and .log files next to this table).",
    "LoRA r=16 alpha=32 on all seven projections, AdamW lr 1e-4, clip 1.0, random weights, sequences of 2048 tokens.",
    "Ratio: tokens/s over HF PEFT with gradient checkpointing on. Peak GiB: Tandem's allocator high-water mark, "
    "HF's torch.cuda.max_memory_reserved. Device GiB: used device memory (CUDA context included). "
    "MFU: model FLOPs (formula in app/cli/cmd_bench.cpp; recomputation not counted) / step time / measured peak "
    "bf16 GEMM rate.",
    "",
    "| config | system | tokens/step | tokens/s | vs HF gc-on | peak GiB | device GiB | MFU | fwd / bwd / opt ms |",
    "|---|---|---:|---:|---:|---:|---:|---:|---|",
]
versions = None
for cfg in configs:
    runs = [("tandem", f"tandem-{cfg}-off", "Tandem, checkpointing off"),
            ("tandem", f"tandem-{cfg}-recompute", "Tandem, recompute"),
            ("hf", f"hf-{cfg}-gcon", "HF PEFT, gc on"),
            ("hf", f"hf-{cfg}-gcoff", "HF PEFT, gc off")]
    data = {name: load(name) for _, name, _ in runs}
    hf_on = data[f"hf-{cfg}-gcon"][0]
    base = hf_on["tokens_per_s"] if hf_on and not hf_on.get("oom") else None
    # FLOPs per token and peak rate come from a Tandem run of the same config (same shapes, same tokens).
    ref = next((d for d, _ in (data[f"tandem-{cfg}-off"], data[f"tandem-{cfg}-recompute"])
                if d and "model_flops_per_token" in d), None)
    for system, name, label in runs:
        d, rc = data[name]
        if d is None or d.get("oom"):
            why = "out of memory" if d and d.get("oom") else f"failed (exit {rc}, see {name}.log)"
            tokens = d.get("batch_tokens", "") if d else ""
            lines.append(f"| {cfg} | {label} | {tokens} | {why} | | | | | |")
            continue
        if system == "hf" and versions is None:
            versions = d.get("versions"), d.get("lora_dtype")
        tps = d["tokens_per_s"]
        ratio = f"{tps / base:.2f}x" if base else "-"
        peak = d["peak_gib"] if system == "tandem" else d["peak_reserved_gib"]
        dev = d.get("device_used_gib")
        if system == "tandem":
            mfu = d["mfu"]
        elif ref:
            mfu = ref["model_flops_per_token"] * tps / ref["peak_bf16_gemm_flops_per_s"]
        else:
            mfu = None
        split = f"{d['forward_ms']:.1f} / {d['backward_ms']:.1f} / {d['optimizer_ms']:.1f}"
        lines.append(f"| {cfg} | {label} | {d['batch_tokens']} | {tps:,.0f} | {ratio} | {peak:.2f} | "
                     f"{dev:.2f} | {'-' if mfu is None else f'{100 * mfu:.1f}%'} | {split} |")
lines.append("")
if versions:
    v, lora_dtype = versions
    lines.append(f"HF stack: torch {v.get('torch')}, transformers {v.get('transformers')}, peft {v.get('peft')} "
                 f"(CUDA {v.get('cuda')}); PEFT's LoRA weights were {lora_dtype} on the bf16 base.")
for cfg in configs:
    d = next((d for d, _ in (load(f"tandem-{cfg}-off"), load(f"tandem-{cfg}-recompute")) if d and not d.get("oom")),
             None)
    if d:
        lines.append(f"Tandem {cfg}: attention {d.get('attention_backend')}, peak GEMM "
                     f"{d['peak_bf16_gemm_flops_per_s'] / 1e12:.0f} TFLOP/s, memory measured/plan "
                     f"{d['memory']['ratio_device_used_vs_plan']:.2f} (device) "
                     f"{d['memory']['ratio_allocated_vs_plan']:.2f} (allocated).")
text = "\n".join(lines) + "\n"
open(os.path.join(out, "table.md"), "w").write(text)
print(text)
PY
