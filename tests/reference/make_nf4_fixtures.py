#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""4-bit (QLoRA) fixtures made with the real bitsandbytes, transformers and PEFT on a CUDA GPU.

    PYTHONPATH=BNB_SRC python3 tests/reference/make_nf4_fixtures.py --out tests/fixtures \
        --real ../shared/assets/babyllama-tok105/hf

BNB_SRC is a bitsandbytes source tree whose CUDA library was built in place (tools/bnb-reference.sh). Writes:
  nf4/quantize.safetensors + nf4/cases.json  quantize_4bit(..., blocksize=64, compress_statistics, quant_type)
        of random and real weights on the GPU: input, packed codes, absmax (8-bit + nested absmax + nested code +
        offset, or fp32), the code table (quant_map), and dequantize_4bit's output in the input's dtype.
  models/llama-nf4/  models/llama (fp32) loaded by transformers with BitsAndBytesConfig(nf4, double quant,
        compute fp32) and saved: the *-bnb-4bit checkpoint layout; expected.safetensors: logits, loss and every
        LoRA gradient of PEFT with models/llama/adapter on that 4-bit model, on models/llama/sequences.json.
"""
import argparse
import json
import os
import shutil
import sys


def save_st(path, tensors, meta):
    from safetensors.torch import save_file
    save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, path,
              metadata={"meta": json.dumps(meta)})


def quantize_cases(root, real_dir, log):
    import torch
    import bitsandbytes as bnb
    import bitsandbytes.functional as F
    from safetensors.torch import load_file

    g = torch.Generator().manual_seed(4242)
    cases = []
    w = torch.randn(192, 320, generator=g) * 0.02
    w[3, 64:128] = 0.0             # a block of zeros (absmax 0)
    w[5, 7] = 0.9                  # an outlier
    cases.append(("randn_bf16", w.to(torch.bfloat16), True, "nf4"))
    cases.append(("randn_f16", (torch.randn(96, 200, generator=g) * 0.05).to(torch.float16), True, "nf4"))
    cases.append(("odd_f32", torch.randn(33, 31, generator=g), True, "nf4"))
    cases.append(("plain_bf16", (torch.randn(64, 192, generator=g) * 0.02).to(torch.bfloat16), False, "nf4"))
    cases.append(("fp4_bf16", (torch.randn(64, 128, generator=g) * 0.02).to(torch.bfloat16), True, "fp4"))
    if real_dir:
        sd = load_file(os.path.join(real_dir, "model.safetensors"))
        cases.append(("real_gate_f32", sd["model.layers.0.mlp.gate_proj.weight"].float(), True, "nf4"))
        cases.append(("real_q_bf16", sd["model.layers.2.self_attn.q_proj.weight"].to(torch.bfloat16), True, "nf4"))

    out, meta = {}, []
    for name, a, nested, qt in cases:
        dev = a.cuda()
        q, st = F.quantize_4bit(dev, blocksize=64, compress_statistics=nested, quant_type=qt)
        deq = F.dequantize_4bit(q, st)
        out[name + ".input"] = a
        out[name + ".codes"] = q.reshape(-1)
        out[name + ".code"] = st.code.float()
        out[name + ".dequant"] = deq
        m = {"name": name, "dtype": str(a.dtype).replace("torch.", ""), "shape": list(a.shape), "n": a.numel(),
             "blocksize": st.blocksize, "quant_type": qt, "nested": nested}
        if nested:
            out[name + ".absmax"] = st.absmax.reshape(-1)
            out[name + ".nested_absmax"] = st.state2.absmax.reshape(-1)
            out[name + ".nested_code"] = st.state2.code.float()
            out[name + ".offset"] = st.offset.reshape(1).float()
            m.update(nested_blocksize=st.state2.blocksize, offset=st.offset.item())
            # the fp32 absmax before double quantization, and bitsandbytes' dequantized absmax
            _, st_plain = F.quantize_4bit(dev, blocksize=64, compress_statistics=False, quant_type=qt)
            out[name + ".absmax_f32"] = st_plain.absmax.reshape(-1)
            deq_abs = F.dequantize_blockwise(st.absmax, st.state2) + st.offset
            out[name + ".absmax_dequant"] = deq_abs.reshape(-1)
            # what the offset would be summed in float64 (how Tandem computes it)
            m["offset_f64_mean"] = float(st_plain.absmax.double().mean().float().item())
        else:
            out[name + ".absmax"] = st.absmax.reshape(-1).float()
        meta.append(m)
        log.append(f"nf4/{name}: n {a.numel()} blocks {st.absmax.numel()} offset {m.get('offset')} "
                   f"f64 mean {m.get('offset_f64_mean')}")
    os.makedirs(os.path.join(root, "nf4"), exist_ok=True)
    save_st(os.path.join(root, "nf4", "quantize.safetensors"), out, {"bitsandbytes": bnb.__version__})
    with open(os.path.join(root, "nf4", "cases.json"), "w") as f:
        json.dump({"bitsandbytes": bnb.__version__, "torch": torch.__version__, "cases": meta}, f, indent=1)
        f.write("\n")


def qlora_model(root, log):
    import torch
    import transformers
    from peft import PeftModel
    import torch.nn.functional as Fn

    src = os.path.join(root, "models", "llama")
    d = os.path.join(root, "models", "llama-nf4")
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    qc = transformers.BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                         bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.float32)
    model = transformers.AutoModelForCausalLM.from_pretrained(src, quantization_config=qc, dtype=torch.float32,
                                                              device_map={"": 0}, attn_implementation="eager")
    model.save_pretrained(d, safe_serialization=True)
    for f in os.listdir(d):
        if f not in ("config.json", "model.safetensors"):
            os.remove(os.path.join(d, f))
    pm = PeftModel.from_pretrained(model, os.path.join(src, "adapter"), is_trainable=True)
    pm.eval()
    with open(os.path.join(src, "sequences.json")) as f:
        sequences = json.load(f)["sequences"]
    total, count, logits_all = None, 0, []
    for seq in sequences:
        ids = torch.tensor([seq], dtype=torch.long, device="cuda")
        logits = pm(input_ids=ids).logits[0].float()
        logits_all.append(logits)
        if len(seq) > 1:
            s = Fn.cross_entropy(logits[:-1], ids[0, 1:], reduction="sum")
            total = s if total is None else total + s
            count += len(seq) - 1
    loss = total / count
    loss.backward()
    exp = {"logits": torch.cat(logits_all, 0), "loss": loss.detach().reshape(1), "loss_sum": total.detach().reshape(1),
           "num_predicted": torch.tensor([count])}
    n_grads = 0
    for n, p in pm.named_parameters():
        if not p.requires_grad:
            continue
        key = n.replace(".default", "")
        exp[key + ".grad"] = p.grad.detach().float()
        n_grads += 1
    save_st(os.path.join(d, "expected.safetensors"), exp, {"loss": loss.item(), "count": count})
    meta = {"source": "models/llama quantized by transformers + bitsandbytes (nf4, double quant, blocksize 64, "
                      "compute fp32) and saved with save_pretrained",
            "adapter": "models/llama/adapter", "sequences": "models/llama/sequences.json", "loss": loss.item(),
            "num_predicted": count, "lora_grads": n_grads,
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__}}
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    log.append(f"models/llama-nf4: loss {loss.item():.6f} count {count} grads {n_grads}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--real", default="", help="a real model folder (babyllama-tok105/hf) for real-weight cases")
    a = ap.parse_args()
    log = []
    quantize_cases(a.out, a.real, log)
    qlora_model(a.out, log)
    print("\n".join(log))


if __name__ == "__main__":
    sys.exit(main())
