#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""The MoE load-balancing loss as transformers computes it: the reference of Tandem's moe_aux_stats / moe_aux_loss.

    python3 tests/reference/make_moe_aux_fixture.py --fixtures tests/fixtures [--coef 0.05]

Takes tests/fixtures/models/qwen3-moe (tiny Qwen3-MoE, its PEFT adapter with target_parameters and its four
sequences), turns on output_router_logits with router_aux_loss_coef = --coef, and runs the four sequences as ONE
right-padded batch with an attention mask (transformers' load_balancing_loss_func then counts every real token of
every MoE layer together, as Tandem counts a packed batch's real rows), labels = the ids (padding -100). Writes
tests/fixtures/models/qwen3-moe/aux_expected.safetensors: "loss" (transformers' loss: the mean cross-entropy +
coef * aux), "aux" (the unscaled load-balancing loss), "ce" and the gradient of every LoRA tensor (PEFT names,
".grad"); and aux_meta.json (coef, versions). fp32, CPU, one thread, eager attention and eager experts.
"""
import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--coef", type=float, default=0.05)
    a = ap.parse_args()
    import torch
    import torch.nn.functional as F
    import peft
    import transformers
    from peft import PeftModel
    from safetensors.torch import save_file
    from check_adapter import load_base

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    d = os.path.join(a.fixtures, "models", "qwen3-moe")
    seqs = json.load(open(os.path.join(d, "sequences.json")))["sequences"]
    base = load_base(d)
    base.config.output_router_logits = True
    base.config.router_aux_loss_coef = a.coef
    base.router_aux_loss_coef = a.coef  # the CausalLM reads it from its config once, at construction
    model = PeftModel.from_pretrained(base, os.path.join(d, "adapter"), is_trainable=True).float()
    model.train()  # no dropout anywhere (PEFT's LoRA on experts has none; the attention has none)
    n = max(len(s) for s in seqs)
    ids = torch.zeros(len(seqs), n, dtype=torch.long)
    mask = torch.zeros(len(seqs), n, dtype=torch.long)
    labels = torch.full((len(seqs), n), -100, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
        labels[i, : len(s)] = torch.tensor(s)
    model.zero_grad(set_to_none=True)
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    aux = out.aux_loss
    # The cross-entropy alone, as transformers computes its mean over the shifted labels.
    lg = out.logits[:, :-1].reshape(-1, out.logits.shape[-1])
    ce = F.cross_entropy(lg, labels[:, 1:].reshape(-1), ignore_index=-100)
    print(f"loss {out.loss.item():.9f} = ce {ce.item():.9f} + {a.coef} * aux {aux.item():.9f}")
    assert abs(out.loss.item() - (ce.item() + a.coef * aux.item())) < 1e-5, "transformers' loss is not ce + coef * aux"
    out.loss.backward()
    tensors = {"loss": out.loss.detach().reshape(1), "aux": aux.detach().reshape(1), "ce": ce.detach().reshape(1)}
    for name, p in model.named_parameters():
        if p.requires_grad:
            tensors[name.replace(".default", "") + ".grad"] = p.grad.detach().contiguous()
    print(f"{len(tensors) - 3} LoRA gradients")
    save_file(tensors, os.path.join(d, "aux_expected.safetensors"))
    with open(os.path.join(d, "aux_meta.json"), "w") as f:
        json.dump({"router_aux_loss_coef": a.coef, "output_router_logits": True, "batch": "the four sequences, "
                   "right-padded, attention_mask", "torch": torch.__version__, "transformers": transformers.__version__,
                   "peft": peft.__version__}, f, indent=2, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
