#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""Draws the timeline JSON of `tandem-cli bench --timeline FILE` as a PNG: one lane per stream (compute, copy,
and with --devices the communication stream), one bar per layer's forward / backward / offload / reload /
all-reduce, so a reader sees whether copies and sums overlap compute.
usage: bench/timeline_plot.py OUT.png TIMELINE.json [TIMELINE.json ...] (one panel per file)."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"forward": "#4c72b0", "backward": "#dd8452", "offload": "#55a868", "reload": "#c44e52",
          "allreduce": "#8172b3"}
LANES = {"copy": (0, "copy stream"), "compute": (1, "compute stream"), "comm": (2, "comm stream")}

png, files = sys.argv[1], sys.argv[2:]
fig, axes = plt.subplots(len(files), 1, figsize=(14, 2.2 * len(files)), squeeze=False)
for ax, path in zip(axes[:, 0], files):
    t = json.load(open(path))
    used = sorted({s["stream"] for s in t["spans"]} | {"compute"}, key=lambda k: LANES[k][0])
    lanes = {k: i for i, k in enumerate(used)}
    for s in t["spans"]:
        y = lanes[s["stream"]]
        ax.broken_barh([(s["begin_ms"], s["end_ms"] - s["begin_ms"])], (y - 0.4, 0.8),
                       facecolors=COLORS[s["what"]], edgecolor="white", linewidth=0.3)
    ax.set_yticks(range(len(used)), [LANES[k][1] for k in used])
    gpus = f", {t['devices']} GPUs (GPU 0 shown)" if t.get("devices", 1) > 1 else ""
    ax.set_title(f"{t['config']}, {t['batch_tokens']} tokens{' per GPU' if gpus else ''}, checkpointing "
                 f"{t['checkpointing']}{gpus} ({t['device']})", fontsize=10)
    ax.set_xlabel("ms from the start of the micro-batch")
    ax.grid(axis="x", alpha=0.3)
handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLORS.values()]
fig.legend(handles, list(COLORS), loc="upper right", ncol=5, fontsize=9)
fig.tight_layout(rect=(0, 0, 1, 0.95))
fig.savefig(png, dpi=110)
print(png)
