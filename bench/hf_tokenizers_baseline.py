#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""HF `tokenizers` baseline for bench_tokenizer: same inputs, same splitting, same MB/s definition.

    python3 bench/hf_tokenizers_baseline.py TOKENIZER_JSON FILE...
Text files are encoded line by line (each line with its '\n') and in ~1 MB chunks cut after a newline (as
bench_tokenizer does); .json files that are arrays of alpaca records are
encoded field by field (instruction, input, output). MB/s = UTF-8 bytes encoded / wall seconds. Reported twice:
one item at a time on one thread (what bench_tokenizer does), and encode_batch on all cores.
"""
import json
import os
import sys
import time

from tokenizers import Tokenizer


def load_items(path):
    if path.endswith(".json"):
        recs = json.load(open(path, encoding="utf-8"))
        return [r[k] for r in recs for k in ("instruction", "input", "output") if r.get(k)]
    return open(path, encoding="utf-8").read().splitlines(keepends=True)


def chunk_items(path, target=1000000):
    data = open(path, "rb").read()
    items, start = [], 0
    while start < len(data):
        end = min(len(data), start + target)
        if end < len(data):
            nl = data.find(b"\n", end)
            end = len(data) if nl < 0 else nl + 1
        items.append(data[start:end].decode("utf-8"))
        start = end
    return items


def timed(fn, min_seconds=2.0):
    reps, t0 = 0, time.perf_counter()
    while True:
        fn()
        reps += 1
        dt = time.perf_counter() - t0
        if dt >= min_seconds:
            return reps, dt


def main():
    tok = Tokenizer.from_file(sys.argv[1])
    for path in sys.argv[2:]:
        modes = [("fields", load_items(path))] if path.endswith(".json") else \
                [("lines", load_items(path)), ("1 MB chunks", chunk_items(path))]
        for mode, items in modes:
            measure(tok, path, mode, items)


def measure(tok, path, mode, items):
    nbytes = sum(len(s.encode("utf-8")) for s in items)
    ntok = sum(len(tok.encode(s, add_special_tokens=False).ids) for s in items)
    reps, dt = timed(lambda: [tok.encode(s, add_special_tokens=False) for s in items])
    print(f"hf-tokenizers single  {os.path.basename(os.path.dirname(sys.argv[1]))} {os.path.basename(path)} ({mode}): "
          f"{nbytes * reps / dt / 1e6:.2f} MB/s {ntok * reps / dt / 1e6:.3f} Mtok/s ({len(items)} items, {ntok} tokens)")
    reps, dt = timed(lambda: tok.encode_batch(items, add_special_tokens=False))
    print(f"hf-tokenizers batch   {os.path.basename(os.path.dirname(sys.argv[1]))} {os.path.basename(path)} ({mode}): "
          f"{nbytes * reps / dt / 1e6:.2f} MB/s {ntok * reps / dt / 1e6:.3f} Mtok/s (encode_batch, {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
