#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""How far do PyTorch's own bf16 LoRA gradients land from the fp32 fixtures? (the "bf16 floor")

For each tests/fixtures/models/<variant>: the same model, adapter and four sequences as
make_fixtures.py's expected.safetensors (fp32, CPU), run the way HF PEFT trains in bf16 on a GPU:
base weights bf16, PEFT's LoRA weights fp32 (its default upcast), forward under torch.autocast(bf16),
sdpa attention (eager for models with soft-capped attention scores, which transformers' sdpa path does not
apply: Gemma 2); mixture-of-experts models (qwen3-moe, mixtral) with transformers' default experts
implementation, the expert LoRA through PEFT's ParamWrapper (W + dW, in the base weights' bf16; a router that
picks another expert in bf16 than in fp32 shows up as a large floor). Reports, per variant, the error measures
Tandem's selftest uses against the fp32 reference: logits max|d|/max|ref|, the loss, and the worst LoRA gradient
max|d|/max|ref| over the LoRA tensors (variants without a fixture folder are skipped). Writes JSON (default
tests/fixtures/models/bf16_floor.json). Needs CUDA, torch, transformers, peft.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
from peft import PeftModel
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM


def rel(got, ref):
    return ((got.float() - ref.float()).abs().max() / ref.float().abs().max().clamp_min(1e-30)).item()


def run(d, device):
    seqs = json.load(open(os.path.join(d, "sequences.json")))["sequences"]
    exp = load_file(os.path.join(d, "expected.safetensors"))
    cfg = json.load(open(os.path.join(d, "config.json")))
    attn = "eager" if cfg.get("attn_logit_softcapping") else "sdpa"
    base = AutoModelForCausalLM.from_pretrained(d, dtype=torch.bfloat16, attn_implementation=attn).to(device)
    pm = PeftModel.from_pretrained(base, os.path.join(d, "adapter"), is_trainable=True).to(device)
    lora_dtype = str(next(p for n, p in pm.named_parameters() if p.requires_grad).dtype)
    pm.zero_grad(set_to_none=True)
    total, count, logits = None, 0, []
    with torch.autocast("cuda", dtype=torch.bfloat16):
        for seq in seqs:
            ids = torch.tensor([seq], device=device)
            lg = pm(input_ids=ids).logits[0].float()
            logits.append(lg)
            s = F.cross_entropy(lg[:-1], ids[0, 1:], reduction="sum")
            total = s if total is None else total + s
            count += len(seq) - 1
    loss = total / count
    loss.backward()
    worst, worst_name = 0.0, ""
    for n, p in pm.named_parameters():
        if not p.requires_grad:
            continue
        key = n.replace(".default", "") + ".grad"
        r = rel(p.grad.cpu(), exp[key])
        if r > worst:
            worst, worst_name = r, key
    return {
        "logits_rel": rel(torch.cat(logits).detach().cpu(), exp["logits"]),
        "loss_rel": abs(loss.item() - exp["loss"].item()) / abs(exp["loss"].item()),
        "lora_grads_worst_rel": worst,
        "worst_tensor": worst_name,
        "lora_dtype": lora_dtype,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--fixtures", default=os.path.join(os.path.dirname(__file__), "..", "fixtures", "models"))
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bf16_floor.py needs a CUDA GPU")
    import peft
    import transformers
    res = {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__,
           "gpu": torch.cuda.get_device_name(0), "variants": {}}
    for v in ("llama", "qwen2", "qwen3", "mistral", "mistral-window", "phi3", "gemma2", "gemma3", "qwen3-moe", "mixtral"):
        if not os.path.isfile(os.path.join(a.fixtures, v, "expected.safetensors")):
            print(v, "skipped: no fixture folder (make_fixtures.py --variants", v + ")")
            continue
        res["variants"][v] = run(os.path.join(a.fixtures, v), "cuda")
        print(v, json.dumps(res["variants"][v]))
    out = a.out or os.path.join(a.fixtures, "bf16_floor.json")
    with open(out, "w") as f:
        json.dump(res, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
