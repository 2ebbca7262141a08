#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""A random-weight bf16 checkpoint of a benchmark model, written by transformers with the real tokenizer.

    bench/random_checkpoint.py ASSETS OUT_DIR NAME [--device cuda|cpu]

NAME: llama-3.1-8b (tokenizer-llama3) or qwen3-0.6b (tokenizer-qwen3); ASSETS holds the tokenizer folders
(../shared/assets). transformers' own initialisation from torch.manual_seed(0) on --device (the weights differ
between cuda and cpu), then bf16. Nothing is written when OUT_DIR already holds a config.json."""
import argparse
import os
import shutil


def make(name):
    import transformers
    if name == "llama-3.1-8b":
        return "tokenizer-llama3", transformers.LlamaForCausalLM(transformers.LlamaConfig(
            hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
            num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072, rms_norm_eps=1e-5,
            rope_theta=500000.0, rope_scaling={"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                               "original_max_position_embeddings": 8192, "rope_type": "llama3"},
            bos_token_id=128000, eos_token_id=128001, tie_word_embeddings=False))
    if name == "qwen3-0.6b":
        return "tokenizer-qwen3", transformers.Qwen3ForCausalLM(transformers.Qwen3Config(
            hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
            num_key_value_heads=8, head_dim=128, vocab_size=151936, max_position_embeddings=40960,
            rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True, bos_token_id=151643,
            eos_token_id=151645))
    raise SystemExit(f"unknown model {name} (llama-3.1-8b or qwen3-0.6b)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("assets")
    ap.add_argument("out")
    ap.add_argument("name")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    a = ap.parse_args()
    if os.path.exists(os.path.join(a.out, "config.json")):
        return
    import torch
    torch.manual_seed(0)
    with torch.device(a.device):
        tok, m = make(a.name)
        m = m.to(torch.bfloat16)
    m.save_pretrained(a.out)
    del m
    for f in os.listdir(os.path.join(a.assets, tok)):
        if f.startswith("tokenizer"):
            shutil.copy(os.path.join(a.assets, tok, f), a.out)


if __name__ == "__main__":
    main()
