#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""Turns the files of bench/glue_bench.sh OUTDIR into OUTDIR/table.md (the glue-code tables of docs/benchmarks.md).

usage: bench/glue_table.py OUTDIR
Tables: metadata once vs per layer; checkpointing policies against HF PEFT + gradient checkpointing; per-layer
copy time c and compute time g from the timelines, with the predicted saving of double buffering (L-2)*min(c,g)
(the last two block inputs never leave the device) against the measured smart-single minus smart step time.
Missing runs show as "-", runs that ran out of memory as "OOM".
"""
import json
import os
import statistics
import sys

out = sys.argv[1]


def load(name):
    try:
        with open(os.path.join(out, name + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        rc_path = os.path.join(out, name + ".rc")
        if os.path.exists(rc_path) and open(rc_path).read().strip() == "3":
            return {"oom": True}
        return None


def tok(d):
    if d is None:
        return "-"
    return "OOM" if d.get("oom") else f"{d['tokens_per_s']:,.0f}"


def peak(d):
    if d is None or d.get("oom"):
        return "-"
    return f"{d['peak_gib']:.2f}" if "peak_gib" in d else f"{d['peak_reserved_gib']:.2f}"


def ok(d):
    return d is not None and not d.get("oom")


lines = ["# Issue 5: glue-code optimizations, measured", ""]
device = next((d["device"] for n in os.listdir(out) if n.endswith(".json")
               for d in [load(n[:-5])] if d and "device" in d), "unknown")
lines += [f"Device: {device}. Command: `bench/glue_bench.sh TANDEM_CLI {out}` then `bench/glue_table.py {out}`.", ""]

lines += ["## Metadata built once per batch vs rebuilt in every layer", "",
          "Samples of 32..320 tokens packed into the step's token budget, checkpointing off.", "",
          "| config | layers | tokens/step | samples | once tok/s | per layer tok/s | once / per layer | host syncs per step (once / per layer) |",
          "|---|---:|---:|---:|---:|---:|---:|---|"]
for tokens in [16384, 4096]:
  for cfg in ["qwen3-0.6b", "llama-3.2-1b"]:
    a, b = load(f"meta-{cfg}-{tokens}-once"), load(f"meta-{cfg}-{tokens}-per-layer")
    if not (ok(a) and ok(b)):
        lines.append(f"| {cfg} | - | {tokens} | - | {tok(a)} | {tok(b)} | - | - |")
        continue
    layers = a["model_config"]["num_hidden_layers"]
    lines.append(f"| {cfg} | {layers} | {tokens} | {a['samples']} | {tok(a)} | {tok(b)} | "
                 f"{a['tokens_per_s'] / b['tokens_per_s']:.3f}x | {a['host_syncs_per_step']:.0f} / {b['host_syncs_per_step']:.0f} |")

lines += ["", "## Checkpointing policies and HF PEFT + gradient checkpointing", "",
          "| config | tokens/step | policy | step ms | tokens/s | vs recompute | peak GiB | pinned host GiB | HF gc-on tok/s | HF peak GiB | Tandem / HF |",
          "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
shapes = [("qwen3-0.6b", "8x2048"), ("llama-3.2-1b", "8x2048"), ("llama-3.1-8b", "2x2048"), ("llama-3.1-8b", "1x16384"),
          ("llama-3.1-8b", "1x32768")]
for cfg, shape in shapes:
    rows, seq = map(int, shape.split("x"))
    h = load(f"hf-{cfg}-{shape}")
    rec = load(f"ckpt-{cfg}-{shape}-recompute")
    for ck in ["off", "recompute", "smart-single", "smart"]:
        d = load(f"ckpt-{cfg}-{shape}-{ck}")
        if d is None:
            continue
        step = f"{1e3 * rows * seq / d['tokens_per_s']:.1f}" if ok(d) else "-"
        vs = f"{(d['tokens_per_s'] / rec['tokens_per_s'] - 1) * 100:+.1f}%" if ok(d) and ok(rec) else "-"
        pinned = f"{d['plan'].get('pinned_host', 0) / 2**30:.2f}" if ok(d) and "plan" in d else "-"
        ratio = f"{d['tokens_per_s'] / h['tokens_per_s']:.2f}x" if ok(d) and ok(h) else ("HF OOM" if h and h.get("oom") and ok(d) else "-")
        lines.append(f"| {cfg} | {rows * seq} | {ck} | {step} | {tok(d)} | {vs} | {peak(d)} | {pinned} | {tok(h)} | {peak(h)} | {ratio} |")

lines += ["", "## Double buffering: per-layer copy time c, compute time g, predicted vs measured saving", "",
          "c: mean reload (host -> device) of one block input; offload: device -> host in forward. g: mean "
          "backward of one layer (recompute + backward), from smart-single's timeline (the copies do not overlap "
          "there). Predicted saving of smart over smart-single = (L-2) * min(c, g); measured = step time "
          "difference of the 1x16384 runs.", "",
          "| config | L | c reload ms | offload ms | g ms | predicted ms | measured ms |", "|---|---:|---:|---:|---:|---:|---:|"]
for cfg, shape in [("llama-3.1-8b", "1x16384")]:
    try:
        with open(os.path.join(out, "timeline-smart-single.json")) as f:
            t = json.load(f)
    except (OSError, ValueError):
        lines.append(f"| {cfg} {shape} | - | - | - | - | - | - |")
        continue
    spans = t["spans"]
    dur = lambda what: [s["end_ms"] - s["begin_ms"] for s in spans if s["what"] == what]
    c, off, g = dur("reload"), dur("offload"), dur("backward")
    L = max(s["layer"] for s in spans) + 1
    c_ms, g_ms = statistics.mean(c) if c else 0, statistics.mean(g) if g else 0
    pred = (L - 2) * min(c_ms, g_ms)
    a, b = load(f"ckpt-{cfg}-{shape}-smart-single"), load(f"ckpt-{cfg}-{shape}-smart")
    rows, seq = map(int, shape.split("x"))
    meas = (1e3 * rows * seq / a["tokens_per_s"] - 1e3 * rows * seq / b["tokens_per_s"]) if ok(a) and ok(b) else float("nan")
    lines.append(f"| {cfg} {shape} | {L} | {c_ms:.2f} | {statistics.mean(off) if off else 0:.2f} | {g_ms:.2f} | {pred:.1f} | {meas:.1f} |")

open(os.path.join(out, "table.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
