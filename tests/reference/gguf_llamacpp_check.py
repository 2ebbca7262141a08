#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tandem's GGUF export checked by outside tools: llama.cpp (built from source by gguf_llamacpp_check.sh) and
transformers + PEFT + gguf-py. Run through gguf_llamacpp_check.sh; needs torch, transformers, peft, numpy, no
network.

For each family (the fixture configs of tests/fixtures/models, resized so every weight row fills whole 256-value
k-quant blocks, random weights, the real character-level tokenizer of ../shared/assets/babyllama-tok105):
  - a Tandem run folder with a PEFT adapter (random lora_B; rsLoRA on llama), and one with lora_B = 0 (the base);
  - transformers' logits of PEFT's merge_and_unload() on a fixed text (fp32, eager attention): the reference;
  - `tandem-cli export --format gguf --quant Q` for every quant; llama.cpp's logits of each file on the same ids:
    max / mean absolute error and top-1 agreement against the reference;
  - `--format gguf-lora` applied with llama.cpp's LoRA on the base GGUF (lora_B = 0, f16) against the merged f16
    GGUF and against the reference;
  - gguf-py (llama.cpp's gguf package, from the source tree) reads every file.
Tokenizers: for the real tokenizers of ../shared/assets (babyllama, Qwen3, Llama 3, Llama 2, Mistral) a small
model with that vocabulary is exported; llama.cpp's tokenizer on the embedded vocabulary must give the ids HF
tokenizers gives on a few strings.
Results: OUT/results.json (and a summary on stdout). Exit status 0 even when checks differ: read the JSON.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import traceback

import numpy as np
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

QUANTS = ["f16", "bf16", "q8_0", "q6_k", "q5_k_m", "q4_k_m"]
# The MoE families also in f32: 16-bit rounding can flip a near-tie of the router for a token (a large error on
# that token's logits), f32 cannot, so f32 checks the expert tensors' layout to float precision.
MOE_QUANTS = ["f32"] + QUANTS
TEXT = ("Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine. "
        "One day, she saw a big red ball in the park.")
TOKEN_STRINGS = ["Hello world", " leading space and  two spaces", "numbers 12345 and 3.14159",
                 "unicode: héllo wörld 日本語 🚀", "line one\nline two\n\n\ttabbed", "Once upon a time"]
FAMILIES = ["llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3", "qwen3-moe", "mixtral", "gpt-oss"]
MOE = ("qwen3-moe", "mixtral", "gpt-oss")  # experts as llama.cpp's ffn_*_exps; LoRA on attention and every expert


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} -> {r.returncode}\n{r.stderr[-3000:]}")
    return r.stdout


def make_model(variant, fixtures, tok_dir, dst, vocab=None, small=False):
    cfg = AutoConfig.from_pretrained(os.path.join(fixtures, variant))
    over = dict(hidden_size=64 if small else 256, intermediate_size=128 if small else 512,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16 if small else 64,
                num_hidden_layers=1 if small else 4, vocab_size=vocab or 105, bos_token_id=1, eos_token_id=2,
                pad_token_id=None, max_position_embeddings=256, tie_word_embeddings=variant.startswith("gemma"))
    if variant.startswith("gemma"):
        over["query_pre_attn_scalar"] = over["head_dim"]
    if variant == "gemma3":
        over["layer_types"] = ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]
    if variant == "gemma2":
        over["layer_types"] = ["sliding_attention", "full_attention"] * 2
    if variant in ("mistral", "qwen2", "qwen3", "llama") and getattr(cfg, "sliding_window", None):
        over["sliding_window"] = 4096  # llama.cpp's llama/qwen graphs have no window: keep it beyond the text
    if getattr(cfg, "layer_types", None) and "layer_types" not in over:
        over["layer_types"] = [cfg.layer_types[0]] * over["num_hidden_layers"]
    if variant == "phi3":  # longrope factors: one per rotary pair of the new head_dim
        rp = dict(cfg.rope_parameters)
        n = over["head_dim"] // 2
        for k in ("long_factor", "short_factor"):
            old = rp[k]
            rp[k] = [old[i * len(old) // n] for i in range(n)]
        over["rope_parameters"] = rp
    if variant == "qwen3-moe":  # every layer routes (llama.cpp's qwen3moe has no dense layers)
        over.update(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=256, mlp_only_layers=[],
                    decoder_sparse_step=1, norm_topk_prob=True)
    if variant == "mixtral":
        over.update(num_local_experts=4, num_experts_per_tok=2)
    if variant == "gpt-oss":
        # alternating sliding / full layers as released; YaRN with truncate=true, the only correction range
        # llama.cpp computes (released gpt-oss says false: llama.cpp's own deviation, not the export's)
        over.update(num_local_experts=4, num_experts_per_tok=2,
                    layer_types=["sliding_attention", "full_attention"] * 2)
        over["rope_parameters"] = dict(cfg.rope_parameters, truncate=True)
    if small:
        over.pop("layer_types", None)
    for k, v in over.items():
        setattr(cfg, k, v)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if p.dim() > 1:
                p.normal_(0, 0.08)
            elif "norm" in n:
                base = 0.0 if variant.startswith("gemma") else 1.0
                p.copy_(base + 0.1 * torch.randn_like(p))
            else:
                p.normal_(0, 0.05)
    model.save_pretrained(dst, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model"):
        if os.path.exists(os.path.join(tok_dir, f)):
            shutil.copy(os.path.join(tok_dir, f), dst)
    return cfg


def make_run(model_dir, run_dir, targets, zero_b, rslora, target_parameters=None):
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    kw = {"target_parameters": target_parameters} if target_parameters else {}
    pc = LoraConfig(r=8, lora_alpha=16, target_modules=targets, use_rslora=rslora, lora_dropout=0.0, **kw)
    pm = get_peft_model(model, pc)
    if not zero_b:
        torch.manual_seed(1)
        with torch.no_grad():
            for n, p in pm.named_parameters():
                if "lora_B" in n:
                    p.normal_(0, 0.05)
    pm.save_pretrained(os.path.join(run_dir, "adapter"))
    with open(os.path.join(run_dir, "config.json"), "w") as f:
        json.dump({"model": os.path.abspath(model_dir), "data": {"dataset": "unused.jsonl"},
                   "lora": {"r": 8, "alpha": 16, "use_rslora": rslora,
                            "target_modules": targets + list(target_parameters or [])},
                   "output_dir": os.path.abspath(run_dir)}, f, indent=2)
    return pm.merge_and_unload().eval()


def export(cli, run_dir, out_dir, fmt, quant):
    run([cli, "export", run_dir, "--out", out_dir, "--format", fmt, "--quant", quant, "--force"])
    files = [f for f in os.listdir(out_dir) if f.endswith(".gguf")]
    assert len(files) == 1, files
    return os.path.join(out_dir, files[0])


def llama_logits(driver, gguf, ids, work, lora=None):
    ids_file = os.path.join(work, "ids.txt")
    with open(ids_file, "w") as f:
        f.write(" ".join(map(str, ids)))
    out = os.path.join(work, "logits.f32")
    run([driver, "logits", gguf, ids_file, out] + ([lora] if lora else []))
    return np.fromfile(out, dtype=np.float32).reshape(len(ids), -1)


def compare(got, ref):
    d = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    return {"max_abs_err": float(d.max()), "mean_abs_err": float(d.mean()),
            "max_abs_ref": float(np.abs(ref).max()),
            "top1_agreement": float((got.argmax(-1) == ref.argmax(-1)).mean())}


def gguf_py_read(gguf_mod, path):
    r = gguf_mod.GGUFReader(path)
    arch = r.fields["general.architecture"]
    return {"ok": True, "tensors": len(r.tensors), "fields": len(r.fields),
            "architecture": bytes(arch.parts[arch.data[0]]).decode(),
            "bytes_checked": int(sum(int(t.n_bytes) for t in r.tensors))}


def dequant_check(gguf_mod, path, ref_path):
    """gguf-py's own dequantization (llama.cpp's reference numpy code) of every tensor of `path` against the
    same tensor of the f16 file `ref_path`: relative RMS error per GGUF tensor type (a block-layout check
    independent of llama.cpp's matmuls, which also quantize the activations)."""
    import numpy as np
    from gguf.quants import dequantize
    ref = {t.name: np.asarray(t.data, dtype=np.float32).reshape(-1) for t in gguf_mod.GGUFReader(ref_path).tensors}
    by_type = {}
    for t in gguf_mod.GGUFReader(path).tensors:
        if t.name not in ref:
            continue
        got = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(-1)
        want = ref[t.name]
        if got.size != want.size:
            by_type.setdefault(t.tensor_type.name, []).append(float("inf"))
            continue
        denom = float(np.sqrt(np.mean(want.astype(np.float64) ** 2))) or 1.0
        by_type.setdefault(t.tensor_type.name, []).append(
            float(np.sqrt(np.mean((got.astype(np.float64) - want) ** 2))) / denom)
    return {k: {"tensors": len(v), "max_rel_rms": max(v), "mean_rel_rms": sum(v) / len(v)} for k, v in by_type.items()}


def check_family(variant, a, gguf_mod, work):
    res = {}
    fam = os.path.join(work, variant)
    os.makedirs(fam, exist_ok=True)
    model_dir = os.path.join(fam, "model")
    make_model(variant, a.fixtures, a.tok_dir, model_dir)
    targets = json.load(open(os.path.join(a.fixtures, variant, "adapter", "adapter_config.json")))["target_modules"]
    if isinstance(targets, str):
        targets = ["q_proj", "v_proj"]
    rslora = variant == "llama"
    tp = ["mlp.experts.gate_up_proj", "mlp.experts.down_proj"] if variant in MOE else None
    merged = make_run(model_dir, os.path.join(fam, "run"), targets, False, rslora, tp)
    make_run(model_dir, os.path.join(fam, "run-base"), targets, True, False, tp)
    tok = AutoTokenizer.from_pretrained(model_dir)
    ids = tok(TEXT)["input_ids"]
    with torch.no_grad():
        ref = merged(input_ids=torch.tensor([ids])).logits[0].float().numpy()
    res["n_tokens"] = len(ids)
    res["targets"] = targets
    res["rslora"] = rslora
    res["quants"] = {}
    f16 = None
    for q in (MOE_QUANTS if variant in MOE else QUANTS):
        try:
            g = export(a.tandem_cli, os.path.join(fam, "run"), os.path.join(fam, "gguf-" + q), "gguf", q)
            r = compare(llama_logits(a.driver, g, ids, fam), ref)
            r["file_bytes"] = os.path.getsize(g)
            r["gguf_py"] = gguf_py_read(gguf_mod, g) if gguf_mod else None
            res["quants"][q] = r
            if q == "f16":
                f16 = g
        except Exception as e:  # noqa: BLE001 - every failure is a result
            res["quants"][q] = {"error": str(e)[-2000:]}
    if gguf_mod and f16:
        for q in QUANTS:
            if q in ("f16", "bf16") or "error" in res["quants"].get(q, {"error": 1}):
                continue
            try:
                g = [os.path.join(fam, "gguf-" + q, f) for f in os.listdir(os.path.join(fam, "gguf-" + q))
                     if f.endswith(".gguf")][0]
                res["quants"][q]["gguf_py_dequant_vs_f16"] = dequant_check(gguf_mod, g, f16)
            except Exception as e:  # noqa: BLE001
                res["quants"][q]["gguf_py_dequant_vs_f16"] = {"error": str(e)[-500:]}
    try:
        base = export(a.tandem_cli, os.path.join(fam, "run-base"), os.path.join(fam, "gguf-base"), "gguf", "f16")
        lres = {}
        for lq in ("f32", "f16"):
            ad = export(a.tandem_cli, os.path.join(fam, "run"), os.path.join(fam, "lora-" + lq), "gguf-lora", lq)
            with_lora = llama_logits(a.driver, base, ids, fam, lora=ad)
            lres[lq] = {"vs_reference": compare(with_lora, ref),
                        "gguf_py": gguf_py_read(gguf_mod, ad) if gguf_mod else None}
            if f16:
                lres[lq]["vs_merged_f16_gguf"] = compare(with_lora, llama_logits(a.driver, f16, ids, fam))
        lres["base_without_lora_vs_reference"] = compare(llama_logits(a.driver, base, ids, fam), ref)
        res["lora"] = lres
    except Exception as e:  # noqa: BLE001
        res["lora"] = {"error": str(e)[-2000:]}
    return res


def check_tokenizer(name, tok_dir, a, work):
    d = os.path.join(work, "tok-" + name)
    os.makedirs(d, exist_ok=True)
    hf = AutoTokenizer.from_pretrained(tok_dir)
    vocab = max(len(hf), max(hf.get_vocab().values()) + 1)
    model_dir = os.path.join(d, "model")
    make_model("llama", a.fixtures, tok_dir, model_dir, vocab=vocab, small=True)
    make_run(model_dir, os.path.join(d, "run"), ["q_proj"], True, False)
    g = export(a.tandem_cli, os.path.join(d, "run"), os.path.join(d, "gguf"), "gguf", "f16")
    out = {"vocab": vocab, "strings": []}
    for s in TOKEN_STRINGS + (["<|im_start|>user\nhi<|im_end|>"] if "<|im_start|>" in hf.get_vocab() else []):
        tf = os.path.join(d, "text.txt")
        with open(tf, "w", encoding="utf-8") as f:
            f.write(s)
        got = [int(x) for x in run([a.driver, "tokenize", g, tf, "0"]).split()]
        want = hf(s, add_special_tokens=False)["input_ids"]
        out["strings"].append({"text": s, "equal": got == want, "llama_cpp": got, "hf": want})
    tf = os.path.join(d, "text.txt")
    with open(tf, "w", encoding="utf-8") as f:
        f.write(TOKEN_STRINGS[0])
    got = [int(x) for x in run([a.driver, "tokenize", g, tf, "1"]).split()]
    want = hf(TOKEN_STRINGS[0])["input_ids"]
    out["with_special_tokens"] = {"equal": got == want, "llama_cpp": got, "hf": want}
    out["all_equal"] = all(x["equal"] for x in out["strings"]) and out["with_special_tokens"]["equal"]
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.abspath(os.path.join(here, "..", ".."))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-src", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tandem-cli", required=True)
    ap.add_argument("--driver", required=True, help="gguf_llamacpp_logits built against --llama-src")
    ap.add_argument("--assets", default=os.path.join(repo, "..", "shared", "assets"))
    ap.add_argument("--fixtures", default=os.path.join(repo, "tests", "fixtures", "models"))
    ap.add_argument("--families", default=",".join(FAMILIES))
    a = ap.parse_args()
    a.tok_dir = os.path.join(a.assets, "babyllama-tok105", "hf")
    work = os.path.join(a.out, "work")
    os.makedirs(work, exist_ok=True)
    torch.set_num_threads(min(8, os.cpu_count() or 1))
    sys.path.insert(0, os.path.join(a.llama_src, "gguf-py"))
    try:
        import gguf as gguf_mod
    except Exception:  # noqa: BLE001
        gguf_mod = None
    import transformers
    import peft
    results = {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__,
               "gguf_py_importable": gguf_mod is not None, "text": TEXT, "families": {}, "tokenizers": {}}
    for fam in a.families.split(","):
        print(f"== {fam}", flush=True)
        try:
            results["families"][fam] = check_family(fam, a, gguf_mod, work)
        except Exception:  # noqa: BLE001
            results["families"][fam] = {"error": traceback.format_exc()[-3000:]}
        json.dump(results, open(os.path.join(a.out, "results.json"), "w"), indent=1)
    tokenizers = [("babyllama", "babyllama-tok105/hf"), ("qwen3", "tokenizer-qwen3"), ("llama3", "tokenizer-llama3"),
                  ("llama2", "tokenizer-llama2"), ("mistral-v0.1", "tokenizer-mistral-v0.1")]
    for name, sub in [] if os.environ.get("SKIP_TOKENIZERS") else tokenizers:  # SKIP_TOKENIZERS=1: families only
        print(f"== tokenizer {name}", flush=True)
        try:
            results["tokenizers"][name] = check_tokenizer(name, os.path.join(a.assets, sub), a, work)
        except Exception:  # noqa: BLE001
            results["tokenizers"][name] = {"error": traceback.format_exc()[-3000:]}
        json.dump(results, open(os.path.join(a.out, "results.json"), "w"), indent=1)
    # Summary
    for fam, r in results["families"].items():
        if "error" in r:
            print(f"{fam}: ERROR {r['error'].splitlines()[-1]}")
            continue
        for q, x in r["quants"].items():
            if "error" in x:
                print(f"{fam:8s} {q:7s} ERROR {x['error'].splitlines()[-1][:200]}")
            else:
                print(f"{fam:8s} {q:7s} max {x['max_abs_err']:.4f} mean {x['mean_abs_err']:.5f} "
                      f"top1 {x['top1_agreement']:.3f} (|ref| max {x['max_abs_ref']:.2f})")
        lr = r.get("lora", {})
        if "error" in lr:
            print(f"{fam:8s} lora    ERROR {lr['error'].splitlines()[-1][:200]}")
        else:
            for lq in ("f32", "f16"):
                if lq in lr and "vs_merged_f16_gguf" in lr[lq]:
                    x = lr[lq]["vs_merged_f16_gguf"]
                    print(f"{fam:8s} lora-{lq} vs merged f16: max {x['max_abs_err']:.4f} top1 {x['top1_agreement']:.3f}")
    for name, r in results["tokenizers"].items():
        print(f"tokenizer {name}: " + ("ERROR" if "error" in r else ("equal" if r["all_equal"] else "DIFFERENT")))
    json.dump(results, open(os.path.join(a.out, "results.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
