#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""Greedy continuations of the fixture models with transformers (+ PEFT): the reference of Tandem's KV-cache
inference engine (tests/test_infer.cpp, fixture_reference).

    python3 tests/reference/make_greedy_reference.py --fixtures tests/fixtures \
        [--variants llama,qwen3] [--new-tokens 40] [--out tests/fixtures/models/greedy_reference.json] [--merge]

--merge keeps the cases of the variants not run from the existing --out file (e.g. --variants qwen3-moe,mixtral
--merge adds the MoE cases and leaves the others as they are); without it the file holds the variants run only.

For every variant under FIXTURES/models/<variant>/ (config.json + model.safetensors + adapter/), with the base
model alone and with the PEFT adapter, and for prompts 0 and 2 of its sequences.json (9 and 17 tokens): greedy
decoding of --new-tokens tokens through transformers' KV cache (one forward over the prompt, then one token per
step with past_key_values, argmax of the last logits; EOS does not stop it, as Tandem's stop_at_eos = false).
Each step also records its margin (largest minus second-largest logit): a step whose margin is tiny may flip
between two correct fp32 implementations, and the C++ test allows a first difference only there.
A second pass re-runs every case without the cache (the whole sequence per step) and reports a problem when
the two disagree on a step with a margin above 1e-4.

float32, CPU, one thread, eager attention (as make_fixtures.py); the mixture-of-experts variants (qwen3-moe,
mixtral, gpt-oss) also with transformers' "eager" experts loop (experts_implementation="eager", no grouped_mm kernels),
loaded as check_adapter.py's load_base does, the path their fixtures were made with. Requires torch,
transformers, peft, safetensors; no network. Writes one small JSON file (sorted keys, no floats but the margins).
"""
import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # check_adapter.py beside this file

VARIANTS = ("llama", "qwen2", "qwen3", "mistral", "mistral-window", "phi3", "phi3-long", "gemma2", "gemma3",
            "qwen3-moe", "mixtral", "gpt-oss")
PROMPTS = (0, 2)
CACHE_DIFFERS = ("phi3-long",)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixtures", required=True, help="the fixture root (holds models/<variant>/)")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--new-tokens", type=int, default=40)
    ap.add_argument("--out", default=None, help="default: FIXTURES/models/greedy_reference.json")
    ap.add_argument("--merge", action="store_true", help="keep the existing file's cases of the other variants")
    a = ap.parse_args(argv)
    a.variants = [v for v in a.variants.split(",") if v]
    for v in a.variants:
        if v not in VARIANTS:
            ap.error(f"unknown variant {v!r}")
    return a


def load(model_dir, adapter_dir):
    import torch
    from transformers import AutoModelForCausalLM

    import check_adapter

    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    moe = check_adapter.is_moe_config(cfg)
    if moe:  # eager attention and the eager experts loop (fp32, deterministic), as the fixtures were made
        model = check_adapter.load_base(model_dir)
    else:
        kw = {"attn_implementation": "eager"}
        try:
            model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, **kw)
        except TypeError:  # transformers < 4.56 spells it torch_dtype
            model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32, **kw)
        model = model.float().eval()
    if adapter_dir:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter_dir).float().eval()
    if moe:
        c = getattr(model, "config", None)
        experts = cfg.get("num_experts") or cfg.get("num_local_experts")
        impl = getattr(c, "_experts_implementation", None)
        print(f"  {os.path.basename(os.path.normpath(model_dir))}: mixture of experts ({experts} experts, top-"
              f"{cfg.get('num_experts_per_tok')}), experts implementation {impl!r}, attention "
              f"{getattr(c, '_attn_implementation', None)!r}, adapter {adapter_dir or 'none'}", flush=True)
        if impl not in (None, "eager"):
            print(f"  warning: the experts run with {impl!r}, not 'eager'; the continuations may differ from the "
                  "fixtures' fp32 path", flush=True)
    return model


def margin(row):
    top2 = row.topk(2).values
    return float(top2[0] - top2[1])


def greedy_cached(model, prompt, n):
    import torch

    ids, margins = [], []
    with torch.no_grad():
        x = torch.tensor([prompt], dtype=torch.long)
        out = model(input_ids=x, use_cache=True)
        past = out.past_key_values
        for step in range(n):
            row = out.logits[0, -1].float()
            nxt = int(torch.argmax(row))  # the first maximum, as Tandem's greedy
            ids.append(nxt)
            margins.append(margin(row))
            if step + 1 == n:
                break
            pos = len(prompt) + step
            out = model(input_ids=torch.tensor([[nxt]], dtype=torch.long), past_key_values=past, use_cache=True,
                        cache_position=torch.tensor([pos], dtype=torch.long))
            past = out.past_key_values
    return ids, margins


def greedy_full(model, prompt, n):
    import torch

    seq, ids = list(prompt), []
    with torch.no_grad():
        for _ in range(n):
            row = model(input_ids=torch.tensor([seq], dtype=torch.long), use_cache=False).logits[0, -1].float()
            nxt = int(torch.argmax(row))
            ids.append(nxt)
            seq.append(nxt)
    return ids


def main(argv=None):
    a = parse_args(argv)
    import peft
    import torch
    import transformers

    torch.manual_seed(0)
    torch.set_num_threads(1)
    root = os.path.join(a.fixtures, "models")
    cases, problems = [], []
    for v in a.variants:
        d = os.path.join(root, v)
        with open(os.path.join(d, "sequences.json")) as f:
            seqs = json.load(f)["sequences"]
        for with_adapter in (False, True):
            model = load(d, os.path.join(d, "adapter") if with_adapter else None)
            for p in PROMPTS:
                prompt = seqs[p]
                ids, margins = greedy_cached(model, prompt, a.new_tokens)
                full = greedy_full(model, prompt, a.new_tokens)
                # LongRoPE past the original length: the cache keeps keys rotated with the short factors, a full
                # recompute rotates every key with the long ones, so the two may differ by design.
                for i, (x, y) in enumerate(zip(ids, full) if v not in CACHE_DIFFERS else []):
                    if x != y:
                        if margins[i] > 1e-4:
                            problems.append(f"{v} adapter={with_adapter} prompt {p}: cached and full greedy differ "
                                            f"at step {i} (margin {margins[i]:.3g})")
                        break
                cases.append({
                    "variant": v,
                    "adapter": with_adapter,
                    "prompt_index": p,
                    "prompt_ids": prompt,
                    "greedy_new_ids": ids,
                    "margins": [float(f"{m:.6g}") for m in margins],
                })
                print(f"{v:15s} adapter={int(with_adapter)} prompt {p}: {len(ids)} tokens, min margin "
                      f"{min(margins):.3g}", flush=True)
    out = a.out or os.path.join(root, "greedy_reference.json")
    if os.path.isfile(out):
        with open(out) as f:
            old = json.load(f)
        others = [c for c in old.get("cases", []) if c["variant"] not in a.variants]
        names = sorted({c["variant"] for c in others})
        if a.merge and others:
            print(f"keeping {len(others)} cases of {', '.join(names)} from {out} (made with "
                  f"{old.get('versions')}, new_tokens {old.get('new_tokens')})")
            if old.get("new_tokens") != a.new_tokens:
                print(f"warning: those cases have new_tokens {old.get('new_tokens')}, these {a.new_tokens}")
            order = {v: i for i, v in enumerate(VARIANTS)}  # the file's order: VARIANTS (stable within one)
            cases = sorted(others + cases, key=lambda c: order.get(c["variant"], len(order)))
        elif others:
            print(f"dropping {len(others)} cases of {', '.join(names)} that {out} holds (--merge keeps them)")
    doc = {
        "note": "Greedy continuations with transformers' KV cache (fp32, CPU, eager attention; MoE: the eager "
                "experts loop), base and PEFT adapter; margins = top1 - top2 logit per step. Made by "
                "tests/reference/make_greedy_reference.py.",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__},
        "new_tokens": a.new_tokens,
        "cases": cases,
    }
    with open(out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {out} ({len(cases)} cases)")
    for p in problems:
        print("PROBLEM: " + p)
    return 2 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
