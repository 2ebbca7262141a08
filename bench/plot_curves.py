#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""Loss curves of training runs overlaid, as an SVG (standard library only).

    bench/plot_curves.py OUT.svg TITLE LABEL=metrics.jsonl [LABEL=metrics.jsonl ...] [--panel TITLE LABEL=... ...]

Each metrics.jsonl is a run's (one JSON object per step with "step" and "loss"). Every --panel starts a new
panel to the right; each panel draws its runs' per-step loss (thin) and a 20-step moving average (thick)."""
import json
import sys

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]


def panels_of(args):
    panels, cur = [], None
    i = 0
    while i < len(args):
        if args[i] == "--panel":
            cur = {"title": args[i + 1], "runs": []}
            panels.append(cur)
            i += 2
            continue
        if cur is None:
            cur = {"title": args[i], "runs": []}
            panels.append(cur)
            i += 1
            continue
        label, path = args[i].split("=", 1)
        rows = [json.loads(l) for l in open(path) if l.strip()]
        cur["runs"].append((label, [(r["step"], r["loss"]) for r in rows if r.get("loss") is not None]))
        i += 1
    return panels


def smooth(points, n=20):
    out = []
    for i in range(len(points)):
        window = [p[1] for p in points[max(0, i - n + 1): i + 1]]
        out.append((points[i][0], sum(window) / len(window)))
    return out


def main():
    out = sys.argv[1]
    panels = panels_of(sys.argv[2:])
    W, H, M = 460, 320, 60
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W * len(panels)}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W * len(panels)}" height="{H}" fill="white"/>']
    for k, p in enumerate(panels):
        x0 = k * W
        pts = [q for _, r in p["runs"] for q in r]
        xs, ys = [q[0] for q in pts], [q[1] for q in pts]
        xmin, xmax, ymin, ymax = min(xs), max(xs), min(ys), max(ys)
        pad = 0.05 * (ymax - ymin or 1)
        ymin, ymax = ymin - pad, ymax + pad
        fx = lambda x: x0 + M + (x - xmin) / (xmax - xmin or 1) * (W - 2 * M)
        fy = lambda y: H - M + -(y - ymin) / (ymax - ymin) * (H - 2 * M)
        svg.append(f'<text x="{x0 + W / 2}" y="20" text-anchor="middle" font-size="14">{p["title"]}</text>')
        svg.append(f'<line x1="{fx(xmin)}" y1="{fy(ymin)}" x2="{fx(xmax)}" y2="{fy(ymin)}" stroke="black"/>')
        svg.append(f'<line x1="{fx(xmin)}" y1="{fy(ymin)}" x2="{fx(xmin)}" y2="{fy(ymax)}" stroke="black"/>')
        for t in range(5):
            y = ymin + (ymax - ymin) * t / 4
            svg.append(f'<text x="{fx(xmin) - 6}" y="{fy(y) + 4}" text-anchor="end">{y:.2f}</text>')
            x = xmin + (xmax - xmin) * t / 4
            svg.append(f'<text x="{fx(x)}" y="{fy(ymin) + 16}" text-anchor="middle">{x:.0f}</text>')
        svg.append(f'<text x="{x0 + W / 2}" y="{H - 8}" text-anchor="middle">step</text>')
        svg.append(f'<text x="{x0 + 14}" y="{H / 2}" transform="rotate(-90 {x0 + 14} {H / 2})" text-anchor="middle">loss</text>')
        for j, (label, r) in enumerate(p["runs"]):
            c = COLOURS[j % len(COLOURS)]
            raw = " ".join(f"{fx(x):.1f},{fy(y):.1f}" for x, y in r)
            sm = " ".join(f"{fx(x):.1f},{fy(y):.1f}" for x, y in smooth(r))
            svg.append(f'<polyline points="{raw}" fill="none" stroke="{c}" stroke-opacity="0.25" stroke-width="1"/>')
            svg.append(f'<polyline points="{sm}" fill="none" stroke="{c}" stroke-width="2"/>')
            svg.append(f'<text x="{x0 + W - M}" y="{40 + 16 * j}" text-anchor="end" fill="{c}">{label}</text>')
    svg.append("</svg>")
    open(out, "w").write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
