#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""An adapter Tandem trained on a 4-bit base loads in PEFT on top of the same bitsandbytes 4-bit model and gives
Tandem's logits. Needs a CUDA GPU, torch, transformers, peft and bitsandbytes (tools/bnb-reference.sh build).

    PYTHONPATH=.carry/bnb-src python3 tests/reference/check_qlora_adapter.py --cli build/gpu/app/cli/tandem-cli \
        --model ../shared/assets/babyllama-tok105/hf --dataset ../shared/assets/datasets/alpaca_5000.json --out OUT

1. transformers + bitsandbytes quantize the float model (nf4, double quantization, compute fp32) and save it:
   a *-bnb-4bit checkpoint as the Hub has them.
2. tandem-cli trains LoRA on that checkpoint (QLoRA, 30 steps, CPU and CUDA) and writes its PEFT adapter.
3. tandem-cli eval --dump gives Tandem's logits of a few sequences with the adapter (CPU, fp32).
4. PEFT loads the adapter on the bitsandbytes model; its logits on the same sequences are compared.
Prints one JSON object (also OUT/result.json).
"""
import argparse
import json
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import torch
    import transformers
    from peft import PeftModel
    from safetensors.torch import load_file

    os.makedirs(a.out, exist_ok=True)
    bnb_dir = os.path.join(a.out, "bnb4")
    qc = transformers.BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                         bnb_4bit_compute_dtype=torch.float32)
    base = transformers.AutoModelForCausalLM.from_pretrained(a.model, quantization_config=qc, dtype=torch.float32,
                                                             device_map={"": 0})
    base.save_pretrained(bnb_dir)
    tok = transformers.AutoTokenizer.from_pretrained(a.model)
    tok.save_pretrained(bnb_dir)
    result = {"versions": {"torch": torch.__version__, "transformers": transformers.__version__}}
    texts = ["Once upon a time there was a little dog.", "The sun was hot and the girl was happy to swim."]
    seqs = [tok(t)["input_ids"] for t in texts]
    with open(os.path.join(a.out, "sequences.json"), "w") as f:
        json.dump({"sequences": seqs}, f)
    for device in ("cpu", "cuda"):
        run = os.path.join(a.out, "run-" + device)
        subprocess.run([a.cli, "train", "--model", bnb_dir, "--dataset", a.dataset, "--out", run, "--device", device,
                        "--max-steps", "30", "--batch-tokens", "2048", "--max-seq-len", "256", "--lr", "1e-3",
                        "--seed", "1"], check=True, capture_output=True)
        dump = os.path.join(a.out, "tandem-" + device + ".safetensors")
        subprocess.run([a.cli, "eval", "--model", bnb_dir, "--adapter", os.path.join(run, "adapter"), "--sequences",
                        os.path.join(a.out, "sequences.json"), "--dump", dump, "--device", "cpu"], check=True,
                       capture_output=True)
        ours = load_file(dump)["logits"].float()
        pm = PeftModel.from_pretrained(base, os.path.join(run, "adapter"))
        pm.eval()
        with torch.no_grad():
            theirs = torch.cat([pm(input_ids=torch.tensor([s], device="cuda")).logits[0].float().cpu() for s in seqs])
        err = (ours - theirs).abs().max().item()
        with pm.disable_adapter(), torch.no_grad():
            no_lora = torch.cat([pm(input_ids=torch.tensor([s], device="cuda")).logits[0].float().cpu() for s in seqs])
        result[device] = {"trained_on": "bnb-4bit checkpoint", "max_abs_logit_err_vs_peft_bnb": err,
                          "max_abs_logit": theirs.abs().max().item(),
                          "adapter_effect": (theirs - no_lora).abs().max().item(),
                          "top1_agree": float((ours.argmax(-1) == theirs.argmax(-1)).float().mean())}
        base = pm.unload()
    print(json.dumps(result, indent=1))
    with open(os.path.join(a.out, "result.json"), "w") as f:
        json.dump(result, f, indent=1)
    ok = all(result[d]["max_abs_logit_err_vs_peft_bnb"] <= 1e-3 * max(1.0, result[d]["max_abs_logit"]) and
             result[d]["adapter_effect"] > 1e-2 for d in ("cpu", "cuda"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
