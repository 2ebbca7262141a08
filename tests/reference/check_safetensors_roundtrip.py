#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""Cross-checks Tandem's safetensors reader and writer against the reference Python library.

  --write FILE   writes the fixture tests/fixtures/safetensors/torch_written.safetensors with
                 safetensors.torch.save_file (the C++ test test_safetensors::torchWrittenFixture reads it).
  --check FILE   loads a file written by Tandem's writer (e.g. tests/fixtures/safetensors/tandem_written.safetensors)
                 with safetensors.torch, prints every tensor, and asserts the values below when the file
                 holds the fixture tensors.

The fixture (both files hold exactly these, metadata {"format": "pt"}):
  f32    float32  [2, 3]     arange(6) * 0.5 - 1.0         = [[-1, -0.5, 0], [0.5, 1, 1.5]]
  f16    float16  [2, 2, 2]  arange(8) * 0.25 - 1.0        = -1.0 ... 0.75 (exact in f16)
  bf16   bfloat16 [5]        arange(5) * 1.5 - 3.0         = [-3, -1.5, 0, 1.5, 3] (exact in bf16)
  i64    int64    [4]        arange(4) * 10**12 - 5        = [-5, 999999999995, 1999999999995, 2999999999995]
  scalar float32  []         3.25 (a 0-dim tensor)
  empty  float32  [0, 4]     no elements
Written by the reference library, the data order is dtype-size descending then name: i64, empty, f32,
scalar, bf16, f16. Tandem's writer must produce the same bytes for the same tensors.

Requires: torch, safetensors (pip install torch safetensors).
"""
import argparse
import os
import sys
import tempfile

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file


def fixture_tensors():
    return {
        "f32": (torch.arange(6, dtype=torch.float32) * 0.5 - 1.0).reshape(2, 3),
        "f16": (torch.arange(8, dtype=torch.float32) * 0.25 - 1.0).to(torch.float16).reshape(2, 2, 2),
        "bf16": (torch.arange(5, dtype=torch.float32) * 1.5 - 3.0).to(torch.bfloat16),
        "i64": torch.arange(4, dtype=torch.int64) * 10**12 - 5,
        "scalar": torch.tensor(3.25, dtype=torch.float32),
        "empty": torch.zeros((0, 4), dtype=torch.float32),
    }


FIXTURE_METADATA = {"format": "pt"}


def write(path):
    save_file(fixture_tensors(), path, metadata=FIXTURE_METADATA)
    print(f"wrote {path}")


def check(path):
    tensors = load_file(path)
    with safe_open(path, framework="pt") as f:
        metadata = f.metadata()
    print(f"{path}: {len(tensors)} tensors, metadata {metadata}")
    for name in sorted(tensors):
        t = tensors[name]
        values = t.float().flatten().tolist() if t.is_floating_point() else t.flatten().tolist()
        if len(values) > 16:
            values = values[:16] + ["..."]
        print(f"  {name}: {t.dtype} {list(t.shape)} {values}")

    expected = fixture_tensors()
    if set(tensors) != set(expected):
        print("(not the fixture tensor set: printed only, nothing asserted)")
        return 0
    failures = []
    if metadata != FIXTURE_METADATA:
        failures.append(f"metadata {metadata} != {FIXTURE_METADATA}")
    for name, want in expected.items():
        got = tensors[name]
        if got.dtype != want.dtype or list(got.shape) != list(want.shape) or not torch.equal(got, want):
            failures.append(f"{name}: got {got.dtype} {list(got.shape)} {got.flatten().tolist()}, "
                            f"want {want.dtype} {list(want.shape)} {want.flatten().tolist()}")
    # Byte-for-byte: the reference writer, given the same tensors, must produce the same file.
    with tempfile.TemporaryDirectory() as d:
        ref = os.path.join(d, "ref.safetensors")
        save_file(expected, ref, metadata=FIXTURE_METADATA)
        with open(ref, "rb") as a, open(path, "rb") as b:
            if a.read() != b.read():
                failures.append("file bytes differ from safetensors.torch.save_file of the same tensors")
    if failures:
        print("FAIL\n  " + "\n  ".join(failures))
        return 1
    print("OK: values, dtypes, shapes, metadata and bytes match the reference library")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--check", metavar="FILE", help="load a Tandem-written file with safetensors.torch")
    g.add_argument("--write", metavar="FILE", help="write the torch fixture with safetensors.torch.save_file")
    args = ap.parse_args()
    if args.write:
        write(args.write)
        return 0
    return check(args.check)


if __name__ == "__main__":
    sys.exit(main())
