#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""Checks that the built-in demo model (tandem-cli demo) is an ordinary Hugging Face model folder.

    tandem-cli demo --out DEMO
    python3 tests/reference/check_demo_model.py DEMO TANDEM_CLI
Loads it with transformers (AutoConfig, AutoModelForCausalLM, AutoTokenizer), runs a forward pass, and compares
tokenization and chat-template rendering between HF (tokenizers / transformers) and `tandem-cli tokenize` /
`tandem-cli chat` on a few strings and conversations. Prints one JSON line with the results; exits 1 on any
mismatch.
"""
import json
import subprocess
import sys

import torch
from tokenizers import Tokenizer
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

TEXTS = ["Hello world", "  two  spaces", "caf\u00e9 \u65e5\u672c \U0001F44D", "<|im_start|>user\nhi<|im_end|>",
         "line\nbreak\ttab", ""]
CONVS = [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
          {"role": "assistant", "content": "Hello!"}]]


def cli(args, lines):
    out = subprocess.run(args, input="".join(json.dumps(x) + "\n" for x in lines), capture_output=True, text=True,
                         check=True).stdout
    return [json.loads(l) for l in out.splitlines() if l.strip()]


def main():
    demo, tandem = sys.argv[1], sys.argv[2]
    cfg = AutoConfig.from_pretrained(demo)
    model = AutoModelForCausalLM.from_pretrained(demo, torch_dtype=torch.bfloat16)
    tok = AutoTokenizer.from_pretrained(demo)
    raw = Tokenizer.from_file(f"{demo}/tokenizer.json")
    hf_ids = [raw.encode(t, add_special_tokens=False).ids for t in TEXTS]
    our_ids = cli([tandem, "tokenize", "--tokenizer", demo], TEXTS)
    hf_decoded = [raw.decode(i, skip_special_tokens=False) for i in hf_ids]
    our_decoded = cli([tandem, "tokenize", "--tokenizer", demo, "--decode"], hf_ids)
    hf_chat = [tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in CONVS]
    our_chat = cli([tandem, "chat", "--tokenizer", demo, "--add-generation-prompt"], CONVS)
    with torch.no_grad():
        logits = model(torch.tensor([hf_ids[0]])).logits
    result = {
        "architecture": cfg.architectures[0],
        "parameters": sum(p.numel() for p in model.parameters()),
        "logits_shape": list(logits.shape),
        "logits_finite": bool(torch.isfinite(logits).all()),
        "encode_equal": hf_ids == our_ids,
        "decode_equal": hf_decoded == our_decoded,
        "chat_equal": hf_chat == our_chat,
    }
    print(json.dumps(result))
    ok = result["encode_equal"] and result["decode_equal"] and result["chat_equal"] and result["logits_finite"]
    if not ok:
        print("hf ids", hf_ids, "\nours  ", our_ids, "\nhf dec", hf_decoded, "\nours  ", our_decoded,
              "\nhf chat", hf_chat, "\nours   ", our_chat, file=sys.stderr)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
