#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""Checks that a LoRA adapter loads in PEFT and reproduces given logits (the "other way round" check).

    python3 tests/reference/check_adapter.py --model tests/fixtures/models/llama \
        --adapter RUN/adapter --sequences tests/fixtures/models/llama/sequences.json \
        --logits LOGITS.safetensors [--key logits] [--tol 1e-4]

--model      a Hugging Face model folder (config.json + model.safetensors), loaded in float32 on the CPU (eager
             attention; mixture-of-experts models also with the "eager" experts loop).
--adapter    a PEFT LoRA adapter folder (adapter_config.json + adapter_model.safetensors), e.g. written by
             Tandem's exporter; loaded with peft.PeftModel.from_pretrained.
--sequences  JSON {"sequences": [[ids...], ...]}.
--logits     safetensors file whose tensor `--key` (default "logits") is F32 [total_tokens, vocab]: the logits
             of the sequences in order, concatenated (each sequence run separately, positions 0..len-1).
Prints max abs error, max relative error (|d| / max(|ref|, 1e-6)) and max|d| / max|ref|; exits 1 when the
max abs error is above --tol (or shapes differ), 0 otherwise.

Requires torch, transformers, peft, safetensors. No network (HF_HUB_OFFLINE=1 is set).
"""
import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


def is_moe_config(cfg):
    """True for a mixture-of-experts config (a config.json dict or a transformers config object)."""
    get = cfg.get if isinstance(cfg, dict) else (lambda k, d=None: getattr(cfg, k, d))
    return bool(get("num_local_experts") or get("num_experts"))


def force_eager_experts(model):
    """MoE models: run the experts with transformers' "eager" per-expert loop (fp32, deterministic, no grouped_mm
    kernels), the path the fixtures were computed with. Returns the implementation in effect (None if unknown)."""
    setter = getattr(model, "set_experts_implementation", None)
    if callable(setter):
        try:
            setter("eager")
        except Exception as e:  # noqa: BLE001
            print(f"  (warning: set_experts_implementation('eager') failed: {e!r})")
    seen = set()
    for m in model.modules():
        if "_experts_implementation" in vars(m):  # a per-module choice, where a version keeps one
            try:
                m._experts_implementation = "eager"
            except Exception:  # noqa: BLE001
                pass
        cfg = getattr(m, "config", None)
        if cfg is None or id(cfg) in seen or not hasattr(cfg, "model_type"):
            continue
        seen.add(id(cfg))
        for attr in ("_experts_implementation", "_experts_implementation_internal"):
            try:
                setattr(cfg, attr, "eager")
                break
            except Exception:  # noqa: BLE001  (read-only property: try the next spelling)
                continue
    cfg = getattr(model, "config", None)
    return getattr(cfg, "_experts_implementation", None) if cfg is not None else None


def load_base(model_dir):
    import torch
    from transformers import AutoModelForCausalLM
    kw = {"attn_implementation": "eager"}
    with open(os.path.join(model_dir, "config.json")) as f:
        moe = is_moe_config(json.load(f))
    if moe:
        kw["experts_implementation"] = "eager"
    model = None
    if moe:
        try:
            model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, **kw)
        except TypeError:  # no experts_implementation keyword: force_eager_experts below sets it
            kw.pop("experts_implementation")
    if model is None:
        try:
            model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, **kw)
        except TypeError:  # transformers < 4.56 calls it torch_dtype
            model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32, **kw)
    if moe:
        force_eager_experts(model)
    return model.float().eval()


def peft_logits(model_dir, adapter_dir, sequences):
    import torch
    from peft import PeftModel
    base = load_base(model_dir)
    model = PeftModel.from_pretrained(base, adapter_dir).float().eval()
    out = []
    with torch.no_grad():
        for seq in sequences:
            ids = torch.tensor([seq], dtype=torch.long)
            out.append(model(input_ids=ids).logits[0].float())
    return torch.cat(out, 0)


def compare(got, ref):
    """Returns (max_abs, max_rel, max_abs / max|ref|)."""
    d = (got - ref).abs()
    max_abs = d.max().item() if d.numel() else 0.0
    max_rel = (d / ref.abs().clamp_min(1e-6)).max().item() if d.numel() else 0.0
    scale = ref.abs().max().item() if ref.numel() else 0.0
    return max_abs, max_rel, (max_abs / scale if scale > 0 else max_abs)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--adapter", required=True)
    ap.add_argument("--sequences", required=True)
    ap.add_argument("--logits", required=True)
    ap.add_argument("--key", default="logits")
    ap.add_argument("--tol", type=float, default=1e-4)
    a = ap.parse_args(argv)

    from safetensors.torch import load_file
    with open(a.sequences) as f:
        sequences = json.load(f)["sequences"]
    ref = load_file(a.logits)[a.key].float()
    got = peft_logits(a.model, a.adapter, sequences)
    if tuple(got.shape) != tuple(ref.shape):
        print(json.dumps({"ok": False, "error": f"shape mismatch: PEFT {list(got.shape)} vs given {list(ref.shape)}"}))
        return 1
    max_abs, max_rel, norm = compare(got, ref)
    ok = max_abs <= a.tol
    print(json.dumps({"ok": ok, "max_abs": max_abs, "max_rel": max_rel, "max_abs_over_max_ref": norm,
                      "tol": a.tol, "tokens": got.shape[0], "vocab": got.shape[1]}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
