#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# Tokenizer throughput, Tandem vs HF `tokenizers`, in one run on one machine (docs/benchmarks.md).
#   bench/tokenizer_bench.sh [ASSETS_DIR] [BUILD_DIR]
# Builds bench_tokenizer (Release) if needed, then for each real tokenizer encodes tinyshakespeare (line by
# line and in ~1 MB chunks) and the Alpaca subset (field by field) with both. Needs python3 + tokenizers.
set -euo pipefail
assets=${1:-../shared/assets}
build=${2:-build/bench}
if [ ! -x "$build/bench/bench_tokenizer" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_UI=OFF -DTANDEM_TESTS=OFF -DTANDEM_CUDA=OFF >/dev/null
  cmake --build "$build" --target bench_tokenizer >/dev/null
fi
files=("$assets/datasets/tinyshakespeare_input.txt" "$assets/datasets/alpaca_5000.json")
echo "machine: $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) cores); $(python3 -c 'import tokenizers; print("HF tokenizers", tokenizers.__version__)')"
for t in tokenizer-qwen3 tokenizer-llama3 tokenizer-llama2 tokenizer-mistral-v0.1; do
  "$build/bench/bench_tokenizer" "$assets/$t/tokenizer.json" "${files[@]}"
  python3 bench/hf_tokenizers_baseline.py "$assets/$t/tokenizer.json" "${files[@]}"
done
