#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# The "other way round" check of an adapter Tandem trains and exports: on a machine with torch, transformers
# and peft, fine-tune the real tiny Llama of the shared assets for a few steps with tandem-cli (so lora_B is
# non-zero), export the adapter, dump Tandem's logits with `tandem-cli eval`, and have PEFT load the same
# adapter and reproduce those logits (tests/reference/check_adapter.py, tolerance 1e-4).
#   tests/reference/check_exported_adapter.sh TANDEM_CLI ASSETS_DIR OUT_DIR
set -euo pipefail
cli=$1
assets=$2
out=$3
model=$assets/babyllama-tok105/hf
mkdir -p "$out"
rm -rf "$out/run"
"$cli" train --model "$model" --dataset "$assets/datasets/tinystories_train_head.txt" --out "$out/run" \
  --max-steps 10 --batch-tokens 1024 --max-seq-len 256 --lr 1e-2 --seed 5
"$cli" export --run "$out/run" --format peft --out "$out/adapter" --force
# Three sequences of the model's own ids (vocab 105), one of length 1.
echo '{"sequences": [[1, 34, 9, 22, 4, 3, 18, 20, 7, 9, 3, 5], [1, 3, 6, 10, 16, 4, 25], [1]]}' > "$out/sequences.json"
"$cli" eval --model "$model" --adapter "$out/adapter" --sequences "$out/sequences.json" --dump "$out/logits.safetensors"
python3 "$(dirname "$0")/check_adapter.py" --model "$model" --adapter "$out/adapter" \
  --sequences "$out/sequences.json" --logits "$out/logits.safetensors" --tol 1e-4
