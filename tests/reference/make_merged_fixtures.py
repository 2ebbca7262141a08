#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""Merged-model fixtures: PEFT's own merge of each fixture adapter into its fp32 base model.

For tests/fixtures/models/<variant> (default: llama, phi3, gemma3): loads model.safetensors + config.json with
transformers in float32, the adapter/ with PEFT, calls merge_and_unload(), and writes every tensor the merge
changed to <variant>/merged_reference.safetensors (float32), with the logits of the merged model on the fixture
sequences ("logits", to compare with expected.safetensors' PEFT logits). Tandem's merged export (engine/export/
merged.*) is checked against these tensors in test_peft_adapter. Needs torch, transformers, peft, safetensors.
"""
import argparse
import json
import os

import torch
from peft import PeftModel
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--fixtures", default=os.path.join(os.path.dirname(__file__), "..", "fixtures", "models"))
    ap.add_argument("--variants", default="llama,phi3,gemma3")
    a = ap.parse_args()
    for v in a.variants.split(","):
        d = os.path.join(a.fixtures, v)
        base_sd = load_file(os.path.join(d, "model.safetensors"))
        model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
        merged = PeftModel.from_pretrained(model, os.path.join(d, "adapter")).merge_and_unload()
        sd = {k: t.detach().contiguous() for k, t in merged.state_dict().items()}
        changed = {k: t for k, t in sd.items() if k in base_sd and not torch.equal(t, base_sd[k].float())}
        seqs = json.load(open(os.path.join(d, "sequences.json")))["sequences"]
        with torch.no_grad():
            logits = torch.cat([merged(input_ids=torch.tensor([s])).logits[0].float() for s in seqs], 0)
        exp = load_file(os.path.join(d, "expected.safetensors"))["logits"]
        err = ((logits - exp).abs().max() / exp.abs().max()).item()
        out = dict(changed)
        out["logits"] = logits.contiguous()
        save_file(out, os.path.join(d, "merged_reference.safetensors"),
                  metadata={"what": "PEFT merge_and_unload of adapter/ into the fp32 base", "logits_rel_vs_peft": str(err)})
        print(f"{v}: {len(changed)} merged tensors, merged-model logits vs PEFT logits rel {err:.2e}")


if __name__ == "__main__":
    main()
