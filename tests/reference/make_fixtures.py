#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""Reference fixtures for Tandem's CPU kernels and model code, made with torch, transformers and PEFT.

    python3 tests/reference/make_fixtures.py --out tests/fixtures          # everything
    python3 tests/reference/make_fixtures.py --out DIR --only ops          # or: --only models
    python3 tests/reference/make_fixtures.py --out DIR --variants llama,qwen3
    python3 tests/reference/make_fixtures.py --out DIR --only models --variants qwen3-moe,mixtral   # the MoE ones

Writes (see tests/fixtures/README.md for the exact conventions):
  DIR/ops/<op>.safetensors          per-op inputs, outputs and gradients (fp32 CPU autograd)
  DIR/models/<variant>/             tiny random HF model + PEFT LoRA adapter + expected logits, loss, LoRA
                                    gradients, a 10-step AdamW loss curve, meta.json
Deterministic: fixed seeds, float32, CPU only, one thread, torch.use_deterministic_algorithms(True).
After writing each model it reloads model + adapter from disk with PEFT (check_adapter.py) and asserts the
logits match what it saved. Requires torch, transformers, peft, safetensors; no network.
The mixture-of-experts variants (qwen3-moe, mixtral) are made by make_moe_model (see there): LoRA on the fused expert
parameters through PEFT's target_parameters, router near-ties excluded by reseeding, and the two checkpoint layouts
(fused / per-expert) written and reloaded.
"""
import argparse
import json
import math
import os
import re
import shutil
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # check_adapter.py beside this file

VARIANTS = ("llama", "qwen2", "qwen3", "mistral", "mistral-window", "phi3", "phi3-partial", "phi3-long", "gemma2", "gemma3",
            "qwen3-moe", "mixtral", "gpt-oss")
OPS_SEED = 1234
PROBLEMS = []  # checks that failed; reported at the end (exit 2) instead of aborting the run


def problem(msg):
    print("  PROBLEM: " + msg, flush=True)
    PROBLEMS.append(msg)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="fixture root (creates ops/ and models/ under it)")
    ap.add_argument("--only", choices=("all", "ops", "models"), default="all")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated subset of " + ",".join(VARIANTS))
    a = ap.parse_args(argv)
    a.variants = [v for v in a.variants.split(",") if v]
    for v in a.variants:
        if v not in VARIANTS:
            ap.error(f"unknown variant {v!r}")
    return a


# ----------------------------------------------------------------------------------------------------------
# common


def setup_torch():
    import torch
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.set_default_dtype(torch.float32)
    return torch


def versions():
    import torch
    out = {"python": sys.version.split()[0], "torch": torch.__version__}
    for name in ("transformers", "peft", "safetensors"):
        try:
            out[name] = __import__(name).__version__
        except Exception:  # noqa: BLE001
            out[name] = None
    return out


def save_st(path, tensors, params):
    """tensors: dict name -> tensor (float -> F32, integer -> I32); params: JSON-able dict."""
    import torch
    from safetensors.torch import save_file
    conv = {}
    for k, t in tensors.items():
        t = t.detach().cpu()
        if t.is_floating_point():
            t = t.to(torch.float32)
        else:
            t = t.to(torch.int32)
        conv[k] = t.contiguous()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    save_file(conv, path, metadata={"format": "pt", "params": json.dumps(params, sort_keys=True)})


def rand(g, *shape, scale=1.0, shift=0.0):
    import torch
    return torch.randn(*shape, generator=g, dtype=torch.float32) * scale + shift


# ----------------------------------------------------------------------------------------------------------
# ops


def rms_norm(x, w, eps):
    import torch
    xf = x.to(torch.float32)
    var = xf.pow(2).mean(-1, keepdim=True)
    return w * (xf * torch.rsqrt(var + eps))


def rotate_half(x):
    import torch
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def inv_freq_default(theta, dim):
    import torch
    return 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def inv_freq_llama3(theta, dim, factor, low_freq_factor, high_freq_factor, old_context_len):
    """transformers' _compute_llama3_parameters, written out."""
    import torch
    inv_freq = inv_freq_default(theta, dim)
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, inv_freq_llama)


def inv_freq_yarn(theta, dim, s):
    """YaRN (the paper's NTK-by-parts with the 0.1 ln(s) + 1 attention factor), written out here independently:
    frequencies whose wavelength fits beta_fast times into the original context keep inv_freq, those fitting fewer
    than beta_slow times take inv_freq / factor, a linear ramp over the dimensions between."""
    import torch
    base = torch.arange(0, dim, 2, dtype=torch.float32) / dim
    pos = float(theta) ** base
    orig = s["original_max_position_embeddings"]

    def dim_of(rot):
        return dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(theta))
    lo, hi = dim_of(s["beta_fast"]), dim_of(s["beta_slow"])
    if s.get("truncate", True):
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, dim - 1)
    ramp = ((torch.arange(dim // 2, dtype=torch.float32) - lo) / (hi - lo)).clamp(0, 1)
    keep = 1 - ramp
    inv = (1.0 / (s["factor"] * pos)) * (1 - keep) + (1.0 / pos) * keep
    return inv, 0.1 * math.log(s["factor"]) + 1.0


E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def mxfp4_quantize(w):
    """w [..., OUT, IN] -> (blocks uint8 [..., OUT, IN/32, 16], scales uint8 [..., OUT, IN/32], dequantized w):
    per 32 values the power of two 2^k (k = ceil(log2(amax / 6))) and each value's nearest E2M1 code of w / 2^k (the
    OCP MX format, as gpt-oss stores its experts; the low nibble holds the even element)."""
    import torch
    *pre, out, inn = w.shape
    x = w.reshape(*pre, out, inn // 32, 32).double()
    amax = x.abs().amax(-1, keepdim=True).clamp_min(1e-30)
    k = torch.ceil(torch.log2(amax / 6.0))
    y = x / torch.pow(2.0, k)
    mags = torch.tensor(E2M1, dtype=torch.float64)
    code = (y.abs().unsqueeze(-1) - mags).abs().argmin(-1)  # nearest magnitude (ties: the smaller)
    code = code + 8 * (y < 0).long()
    deq = (torch.where(code >= 8, -mags[code - 8 * (code >= 8).long()], mags[code % 8]) * torch.pow(2.0, k))
    blocks = (code[..., 0::2] | (code[..., 1::2] << 4)).to(torch.uint8)
    scales = (k.squeeze(-1) + 127).to(torch.uint8)
    return blocks, scales, deq.reshape(w.shape).float()


def make_gpt_oss_mxfp4(model):
    """Every expert weight ([E, in, out] parameters) replaced by its MXFP4 round trip (quantized along `in` of each
    output, as released checkpoints store it): the bf16/fp32 checkpoint and the MXFP4 one then hold the same model."""
    import torch
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 3:
                _, _, deq = mxfp4_quantize(p.detach().transpose(1, 2).contiguous())
                p.copy_(deq.transpose(1, 2))


def write_gpt_oss_mxfp4(src_dir, dst_dir):
    """dst_dir: src_dir's config.json with quantization_config mxfp4 and model.safetensors with the experts as
    <name>_blocks / <name>_scales; checked with transformers' own convert_moe_packed_tensors."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors
    os.makedirs(dst_dir, exist_ok=True)
    with open(os.path.join(src_dir, "config.json")) as f:
        cfg = json.load(f)
    cfg["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn",
                                  "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    with open(os.path.join(dst_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
        f.write("\n")
    sd = load_file(os.path.join(src_dir, "model.safetensors"))
    out, worst = {}, 0.0
    for k, v in sd.items():
        if v.dim() == 3 and k.endswith(("gate_up_proj", "down_proj")):
            blocks, scales, deq = mxfp4_quantize(v.transpose(1, 2).contiguous())
            out[k + "_blocks"], out[k + "_scales"] = blocks, scales
            theirs = convert_moe_packed_tensors(blocks, scales, dtype=torch.float32)  # [E, in, out]
            worst = max(worst, (theirs - v).abs().max().item(), (deq.transpose(1, 2) - v).abs().max().item())
        else:
            out[k] = v
    if worst != 0.0:
        problem(f"gpt-oss: the MXFP4 checkpoint does not hold the same experts (max abs {worst:.2e})")
    save_file(out, os.path.join(dst_dir, "model.safetensors"), metadata={"format": "pt"})
    return worst


def cos_sin(inv_freq, positions):
    """HF LlamaRotaryEmbedding.forward: freqs = inv_freq (fp32) x float(pos) (fp32), emb = cat(freqs, freqs)."""
    import torch
    inv = inv_freq[None, :, None].float()
    pos = positions[None, None, :].float()
    freqs = (inv @ pos).transpose(1, 2)[0]  # [T, D/2]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def hf_cos_sin(rope_parameters, theta, dim, heads, positions):
    """cos/sin from transformers' own LlamaRotaryEmbedding (None if the API is not the expected one)."""
    import torch
    try:
        import transformers
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
        kw = dict(hidden_size=dim * heads, num_attention_heads=heads, num_key_value_heads=heads, head_dim=dim,
                  intermediate_size=8, num_hidden_layers=1, vocab_size=8, max_position_embeddings=256)
        kw.update(rope_kwargs(rope_parameters, theta))
        cfg = LlamaConfig(**kw)
        emb = LlamaRotaryEmbedding(config=cfg)
        x = torch.zeros(1, 1, positions.shape[0], dim)
        cos, sin = emb(x, positions[None].long())
        return (cos[0].float(), sin[0].float(), float(getattr(emb, "attention_scaling", 1.0)),
                transformers.__version__, emb.inv_freq.detach().float().clone())
    except Exception as e:  # noqa: BLE001
        print(f"  (warning: transformers rotary embedding cross-check unavailable: {e!r})")
        return None


def rope_kwargs(scaling, theta):
    """Config kwargs for rope in the installed transformers (v5: rope_parameters; v4: rope_theta + rope_scaling)."""
    import transformers
    major = int(transformers.__version__.split(".")[0])
    if major >= 5:
        rp = {"rope_type": "default", "rope_theta": float(theta)}
        if scaling:
            rp.update(scaling)
        return {"rope_parameters": rp}
    kw = {"rope_theta": float(theta)}
    if scaling:
        kw["rope_scaling"] = dict(scaling)
    return kw


def make_ops(root, log):
    import torch
    import torch.nn.functional as F
    g = torch.Generator().manual_seed(OPS_SEED)
    d = os.path.join(root, "ops")
    os.makedirs(d, exist_ok=True)

    def leaf(t):
        return t.clone().requires_grad_(True)

    # rmsnorm [N, C]
    eps = 1e-6
    x = leaf(rand(g, 7, 37))
    w = leaf(rand(g, 37, scale=0.2, shift=1.0))
    y = rms_norm(x, w, eps)
    go = rand(g, *y.shape)
    gx, gw = torch.autograd.grad(y, (x, w), go)
    save_st(os.path.join(d, "rmsnorm.safetensors"),
            {"in.x": x, "in.weight": w, "grad_out.y": go, "out.y": y, "grad_in.x": gx, "grad_in.weight": gw},
            {"eps": eps})
    log.append("ops/rmsnorm")

    # rmsnorm over heads (Qwen3 q_norm / k_norm): x [T, H, D], weight [D]
    x = leaf(rand(g, 5, 3, 16))
    w = leaf(rand(g, 16, scale=0.2, shift=1.0))
    y = rms_norm(x, w, eps)
    go = rand(g, *y.shape)
    gx, gw = torch.autograd.grad(y, (x, w), go)
    save_st(os.path.join(d, "rmsnorm_heads.safetensors"),
            {"in.x": x, "in.weight": w, "grad_out.y": go, "out.y": y, "grad_in.x": gx, "grad_in.weight": gw},
            {"eps": eps})
    log.append("ops/rmsnorm_heads")

    # rope
    def rope_file(name, positions, theta, scaling):
        T, H, D = positions.shape[0], 3, 16
        x = leaf(rand(g, T, H, D))
        if scaling:
            inv = inv_freq_llama3(theta, D, scaling["factor"], scaling["low_freq_factor"],
                                  scaling["high_freq_factor"], scaling["original_max_position_embeddings"])
        else:
            inv = inv_freq_default(theta, D)
        cos, sin = cos_sin(inv, positions)
        hf = hf_cos_sin(scaling, theta, D, H, positions)
        params = {"theta": theta, "head_dim": D, "rope_type": scaling["rope_type"] if scaling else "default"}
        if scaling:
            params.update({k: v for k, v in scaling.items() if k != "rope_type"})
        if hf is not None:
            hcos, hsin, att_scale, tv, hinv = hf
            err = max((hcos - cos).abs().max().item(), (hsin - sin).abs().max().item())
            ierr = (hinv - inv).abs().max().item()
            if att_scale != 1.0:
                problem(f"{name}: transformers attention_scaling {att_scale} != 1")
            if err > 1e-6 or ierr > 1e-7:
                problem(f"{name}: own formula vs transformers: cos/sin {err:.2e}, inv_freq {ierr:.2e} (using HF's)")
            inv, cos, sin = hinv, hcos, hsin
            params["cos_sin_from"] = (f"transformers {tv} LlamaRotaryEmbedding (the formula in the README agrees: "
                                      f"cos/sin max abs diff {err:.1e}, inv_freq {ierr:.1e})")
        else:
            params["cos_sin_from"] = "own formula (transformers cross-check unavailable)"
        y = x * cos[:, None, :] + rotate_half(x) * sin[:, None, :]
        go = rand(g, *y.shape)
        (gx,) = torch.autograd.grad(y, (x,), go)
        save_st(os.path.join(d, name + ".safetensors"),
                {"in.x": x, "in.positions": positions, "grad_out.y": go, "out.y": y, "grad_in.x": gx,
                 "out.inv_freq": inv, "out.cos": cos, "out.sin": sin}, params)
        log.append("ops/" + name)

    rope_file("rope", torch.tensor([0, 1, 2, 3, 0, 1, 2, 0, 1, 2, 3], dtype=torch.int64), 10000.0, None)
    rope_file("rope_llama3", torch.tensor([0, 1, 2, 17, 255, 1000, 2047, 4095, 8191, 8192, 9001], dtype=torch.int64),
              500000.0, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192})

    # attention: packed varlen causal GQA
    T, Hq, Hkv, D = 13, 4, 2, 16
    cu = [0, 5, 6, 13]
    scale = 1.0 / math.sqrt(D)
    q, k, v = leaf(rand(g, T, Hq, D)), leaf(rand(g, T, Hkv, D)), leaf(rand(g, T, Hkv, D))
    outs, lses = [], []
    rep = Hq // Hkv
    for s, e in zip(cu[:-1], cu[1:]):
        qs = q[s:e].transpose(0, 1)                                    # [Hq, L, D]
        ks = k[s:e].transpose(0, 1).repeat_interleave(rep, dim=0)      # [Hq, L, D]; q head h uses kv head h // rep
        vs = v[s:e].transpose(0, 1).repeat_interleave(rep, dim=0)
        o = F.scaled_dot_product_attention(qs[None], ks[None], vs[None], is_causal=True, scale=scale)[0]
        outs.append(o.transpose(0, 1))                                 # [L, Hq, D]
        L = e - s
        sc = (qs @ ks.transpose(1, 2)) * scale
        sc = sc.masked_fill(torch.triu(torch.ones(L, L, dtype=torch.bool), 1), float("-inf"))
        lses.append(torch.logsumexp(sc, -1).transpose(0, 1))           # [L, Hq]
    o = torch.cat(outs, 0)
    lse = torch.cat(lses, 0)
    go = rand(g, *o.shape)
    gq, gk, gv = torch.autograd.grad(o, (q, k, v), go)
    save_st(os.path.join(d, "attention.safetensors"),
            {"in.q": q, "in.k": k, "in.v": v, "in.cu_seqlens": torch.tensor(cu), "grad_out.o": go, "out.o": o,
             "out.lse": lse.detach(), "grad_in.q": gq, "grad_in.k": gk, "grad_in.v": gv},
            {"scale": scale, "causal": True, "num_q_heads": Hq, "num_kv_heads": Hkv, "head_dim": D,
             "max_seqlen": max(b - a for a, b in zip(cu[:-1], cu[1:]))})
    log.append("ops/attention")

    # swiglu
    gate, up = leaf(rand(g, 9, 23)), leaf(rand(g, 9, 23))
    y = F.silu(gate) * up
    go = rand(g, *y.shape)
    gg, gu = torch.autograd.grad(y, (gate, up), go)
    save_st(os.path.join(d, "swiglu.safetensors"),
            {"in.gate": gate, "in.up": up, "grad_out.y": go, "out.y": y, "grad_in.gate": gg, "grad_in.up": gu}, {})
    log.append("ops/swiglu")

    # lora_linear
    N, IN, OUT, R, alpha = 6, 19, 21, 4, 8.0
    scaling = alpha / R
    x = leaf(rand(g, N, IN))
    W = rand(g, OUT, IN, scale=0.2)
    b = rand(g, OUT, scale=0.1)
    A = leaf(rand(g, R, IN, scale=0.2))
    B = leaf(rand(g, OUT, R, scale=0.2))
    xa = F.linear(x, A)
    y = F.linear(x, W, b) + scaling * F.linear(xa, B)
    go = rand(g, *y.shape)
    gx, gA, gB = torch.autograd.grad(y, (x, A, B), go)
    save_st(os.path.join(d, "lora_linear.safetensors"),
            {"in.x": x, "in.weight": W, "in.bias": b, "in.lora_a": A, "in.lora_b": B, "grad_out.y": go,
             "out.y": y, "out.xa": xa, "grad_in.x": gx, "grad_in.lora_a": gA, "grad_in.lora_b": gB},
            {"alpha": alpha, "r": R, "scaling": scaling})
    log.append("ops/lora_linear")

    # lm_head + cross-entropy (labels already per-row targets; -100 ignored)
    N, C, V = 10, 24, 53
    h = leaf(rand(g, N, C))
    Wl = leaf(rand(g, V, C, scale=0.3))
    labels = torch.randint(0, V, (N,), generator=g)
    labels[[1, 4, 5, 9]] = -100
    logits = h @ Wl.t()
    loss_sum = F.cross_entropy(logits, labels, ignore_index=-100, reduction="sum")
    gh, gW = torch.autograd.grad(loss_sum, (h, Wl))
    save_st(os.path.join(d, "lm_head_cross_entropy.safetensors"),
            {"in.hidden": h, "in.weight": Wl, "in.labels": labels, "out.loss_sum": loss_sum.reshape(1),
             "out.count": (labels != -100).sum().reshape(1), "out.lse": torch.logsumexp(logits, -1).detach(),
             "grad_in.hidden": gh, "grad_in.weight": gW},
            {"ignore_index": -100, "grad_out": "d loss_sum = 1.0 (no grad_out tensor)"})
    log.append("ops/lm_head_cross_entropy")

    # embedding
    Wt = leaf(rand(g, 17, 5))
    ids = torch.tensor([3, 0, 16, 3, 7, 7, 7, 1])
    y = F.embedding(ids, Wt)
    go = rand(g, *y.shape)
    (gW,) = torch.autograd.grad(y, (Wt,), go)
    save_st(os.path.join(d, "embedding.safetensors"),
            {"in.weight": Wt, "in.ids": ids, "grad_out.y": go, "out.y": y, "grad_in.weight": gW}, {})
    log.append("ops/embedding")

    # adamw: one torch.optim.AdamW step from a state as after 2 steps
    P = 29
    lr, betas, eps_a, wd = 1e-3, (0.9, 0.999), 1e-8, 0.01
    p0, gr = rand(g, P), rand(g, P)
    m0 = rand(g, P, scale=0.1)
    v0 = rand(g, P, scale=0.1).pow(2)
    p = torch.nn.Parameter(p0.clone())
    opt = torch.optim.AdamW([p], lr=lr, betas=betas, eps=eps_a, weight_decay=wd, foreach=False)
    p.grad = gr.clone()
    opt.state[p]["step"] = torch.tensor(2.0)
    opt.state[p]["exp_avg"] = m0.clone()
    opt.state[p]["exp_avg_sq"] = v0.clone()
    opt.step()
    st = opt.state[p]
    assert float(st["step"]) == 3.0
    save_st(os.path.join(d, "adamw.safetensors"),
            {"in.param": p0, "in.grad": gr, "in.exp_avg": m0, "in.exp_avg_sq": v0,
             "out.param": p.detach(), "out.exp_avg": st["exp_avg"], "out.exp_avg_sq": st["exp_avg_sq"]},
            {"lr": lr, "betas": list(betas), "eps": eps_a, "weight_decay": wd, "step": 3, "amsgrad": False,
             "maximize": False})
    log.append("ops/adamw")


# ----------------------------------------------------------------------------------------------------------
# models

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
SEQ_LENS = [9, 1, 17, 6]
COMMON = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, vocab_size=101, max_position_embeddings=256,
              rms_norm_eps=1e-6, num_attention_heads=4, num_key_value_heads=2, hidden_act="silu",
              initializer_range=0.02, bos_token_id=1, eos_token_id=2, pad_token_id=None, use_cache=False)
LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 8192}
# variant -> (config class name, model class name, seed, extra config kwargs, rope theta, rope scaling, use_rslora)
SPECS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", 101, dict(tie_word_embeddings=False), 500000.0, LLAMA3_SCALING,
              False),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", 202, dict(tie_word_embeddings=True), 10000.0, None, False),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", 303, dict(tie_word_embeddings=False, head_dim=32), 1000000.0, None,
              True),
    "mistral": ("MistralConfig", "MistralForCausalLM", 404, dict(tie_word_embeddings=False), 10000.0, None, False),
    # Mistral with a sliding window shorter than two of the sequences (SEQ_LENS 9 and 17): the window's mask
    "mistral-window": ("MistralConfig", "MistralForCausalLM", 505, dict(tie_word_embeddings=False, sliding_window=8),
                       10000.0, None, False),
    # Phi-3: fused qkv_proj / gate_up_proj (LoRA on the fused modules, PEFT's names) and LongRoPE with
    # max_position_embeddings = 2 x original (attention factor sqrt(1 + ln 2 / ln 128)); every sequence is
    # shorter than the original 128 positions, so transformers uses the short factors.
    "phi3": ("Phi3Config", "Phi3ForCausalLM", 606, dict(tie_word_embeddings=False, original_max_position_embeddings=128),
             10000.0, {"rope_type": "longrope", "short_factor": [1.0, 1.1, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0],
                       "long_factor": [1.0, 2.0, 4.0, 8.0, 16.0, 24.0, 32.0, 48.0]}, False),
    # Phi-4-mini's RoPE: partial rotary (partial_rotary_factor 0.75: 12 of head_dim 16 channels rotate, the rest
    # pass through) with LongRoPE factors per rotated pair (6).
    "phi3-partial": ("Phi3Config", "Phi3ForCausalLM", 616,
                     dict(tie_word_embeddings=False, original_max_position_embeddings=128, partial_rotary_factor=0.75),
                     10000.0, {"rope_type": "longrope", "short_factor": [1.0, 1.1, 1.25, 1.5, 2.0, 2.5],
                               "long_factor": [1.0, 2.0, 4.0, 8.0, 16.0, 24.0], "partial_rotary_factor": 0.75}, False),
    # Phi-3 past its original length: original_max_position_embeddings 12, so transformers rotates the 17-token
    # sequence with the long factors (its forward's largest position + 1 > 12) and the 9-, 1- and 6-token ones
    # with the short factors; greedy decoding crosses position 12 (the long factors from there on).
    "phi3-long": ("Phi3Config", "Phi3ForCausalLM", 626, dict(tie_word_embeddings=False, original_max_position_embeddings=12),
                  10000.0, {"rope_type": "longrope", "short_factor": [1.0, 1.1, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0],
                            "long_factor": [1.0, 2.0, 4.0, 8.0, 16.0, 24.0, 32.0, 48.0]}, False),
    # Gemma 2: (1 + w) RMSNorms incl. the sandwich norms around attention and MLP, GeGLU (tanh), the embedding
    # times sqrt(hidden), query_pre_attn_scalar != head_dim, attention and final logit soft-capping (caps small
    # enough that tanh bends), layer 0 sliding (window 8, shorter than two sequences), layer 1 full.
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", 707,
               dict(tie_word_embeddings=True, head_dim=16, hidden_activation="gelu_pytorch_tanh",
                    query_pre_attn_scalar=24, sliding_window=8, attn_logit_softcapping=2.0,
                    final_logit_softcapping=1.5, layer_types=["sliding_attention", "full_attention"]),
               10000.0, None, False),
    # Gemma 3 (text): Gemma 2's block with (1 + w) q/k norms, no soft-capping, and a RoPE per layer type: the
    # sliding layer 0 with base 10000, the full layer 1 with base 1e6 and linear scaling x8 (as the 4B+ models).
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", 808,
               dict(tie_word_embeddings=True, head_dim=16, hidden_activation="gelu_pytorch_tanh",
                    query_pre_attn_scalar=24, sliding_window=8, layer_types=["sliding_attention", "full_attention"]),
               1000000.0, {"rope_type": "linear", "factor": 8.0}, False),
    # Mixture of experts (made by make_moe_model). Qwen3-MoE: q/k norms as qwen3, 8 experts of 32, top-2 with the
    # top-k probabilities renormalised, layer 1 a dense MLP (mlp_only_layers, intermediate 96) between two MoE layers.
    "qwen3-moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", 909,
                  dict(tie_word_embeddings=False, head_dim=16, num_hidden_layers=3, num_experts=8,
                       num_experts_per_tok=2, moe_intermediate_size=32, norm_topk_prob=True, decoder_sparse_step=1,
                       mlp_only_layers=[1], output_router_logits=False, use_sliding_window=False),
                  1000000.0, None, False),
    # Mixtral: 4 experts of 48, top-2 (Mixtral always renormalises the top-k), no sliding window, rsLoRA.
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", 1010,
                dict(tie_word_embeddings=False, head_dim=16, num_local_experts=4, num_experts_per_tok=2,
                     intermediate_size=48, sliding_window=None, output_router_logits=False, router_jitter_noise=0.0),
                1000000.0, None, True),
    # gpt-oss: biased attention with sinks, layer 0 sliding (window 8, shorter than two sequences), layer 1 full,
    # YaRN RoPE (factor 4 over 64 original positions, truncate false as the released model), a biased router over
    # 4 experts of 96 (MXFP4 needs multiples of 32; no square expert matrix), top-2 softmaxed among themselves, experts [E, H, 2I] with
    # interleaved gate / up columns and biases, the clamped SwiGLU (limit 7: GPT_OSS_CLAMPED pushes some gate / up
    # values past it). The experts' weights are made MXFP4-exact (make_gpt_oss_mxfp4), so models/gpt-oss/mxfp4/
    # holds the same model as released checkpoints store it.
    "gpt-oss": ("GptOssConfig", "GptOssForCausalLM", 1111,
                dict(tie_word_embeddings=False, head_dim=16, num_local_experts=4, num_experts_per_tok=2,
                     intermediate_size=96, sliding_window=8, layer_types=["sliding_attention", "full_attention"],
                     output_router_logits=False, attention_bias=True, rms_norm_eps=1e-5),
                150000.0, {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0,
                           "original_max_position_embeddings": 64, "truncate": False}, False),
}
# gpt-oss's expert biases: (expert, column of gate_up_proj_bias, added) so that some gate values pass the clamp's
# limit 7 (even columns: gate) and some up values pass -7 / +7 (odd columns: up), in every layer.
GPT_OSS_CLAMPED = [(0, 0, 9.0), (1, 6, 8.0), (2, 3, -9.0), (3, 9, 8.5), (1, 11, -8.0)]
SINK_STD = 1.0             # gpt-oss's attention sinks: logits of the order of the scores
GEMMA = ("gemma2", "gemma3")
GEMMA3_LOCAL_THETA = 10000.0
# PEFT target_modules per variant (the checkpoint's module names).
FUSED_TARGETS = {"phi3": ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"],
                 "phi3-partial": ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"],
                 "phi3-long": ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]}
WEIGHT_STD = 0.02          # every Linear / embedding weight, like HF init ...
QK_STD = 0.125             # ... except q_proj / k_proj: attention scores O(1) so causal mask and RoPE matter
BIAS_STD = 0.1             # qwen2 q/k/v biases
NORM_SHIFT, NORM_STD = 1.0, 0.2   # every RMSNorm weight = 1 + 0.2 * randn
LORA_B_STD = 0.05          # lora_B non-zero so the adapter changes the outputs
TRAIN = {"optimizer": "AdamW", "lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0, "steps": 10}
# Mixture-of-experts variants: LoRA on attention (target_modules) and on the fused expert parameters
# (target_parameters; PEFT's ParamWrapper: no dropout). r differs from the number of experts in both (r * E is one
# dimension of the expert LoRA tensors: r == E would hide an (E, r) / (r, E) mix-up). "expert_layout" is the layout
# model.safetensors gets: between them the two fixtures cover transformers 5's fused tensors and the Hub's
# per-expert tensors (Mixtral's block_sparse_moe.experts.E.w1/w2/w3).
MOE = {
    "qwen3-moe": {"r": 4, "lora_alpha": 8, "expert_layout": "fused"},
    "mixtral": {"r": 8, "lora_alpha": 8, "expert_layout": "per_expert"},
    # gpt-oss: 4 experts, top-2, biased router: no seed in 200 keeps every top-2 gap above 1e-3 over the 12 passes;
    # 1e-4 is still 100x the CPU's error on the router's logits (the CUDA self-test injects the fixture's routing).
    "gpt-oss": {"r": 4, "lora_alpha": 8, "expert_layout": "fused", "min_gap": 1e-4},
}
MOE_ATTN_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]
ROUTER_NAME = re.compile(r"\.(mlp|block_sparse_moe)\.(gate|router)\.weight$")
ROUTER_STD = 0.2           # router logits of order 1-2: routing decided by the weights, not by rounding
EXPERT_STD = WEIGHT_STD    # fused expert weights, like the dense MLPs
ROUTER_MIN_GAP = 1e-3      # every token: p(K-th expert) - p((K+1)-th expert) > this, in every MoE layer and pass
MOE_SEED_STRIDE = 7919     # attempt k builds the model with seed + k * stride (sequences stay those of the seed)
MOE_MAX_ATTEMPTS = 200


def build_model(variant, seed=None):
    """The variant's tiny random model (seed: SPECS' seed unless given; the MoE variants reseed)."""
    import torch
    import transformers
    cfg_name, model_name, spec_seed, extra, theta, scaling, _ = SPECS[variant]
    seed = spec_seed if seed is None else seed
    kw = dict(COMMON)
    kw.update(extra)
    rk = rope_kwargs(scaling, theta)
    if variant == "gemma3" and "rope_parameters" in rk:  # transformers 5: one RoPE per layer type
        rk = {"rope_parameters": {"full_attention": rk["rope_parameters"],
                                  "sliding_attention": {"rope_type": "default", "rope_theta": GEMMA3_LOCAL_THETA}}}
    elif variant == "gemma3":
        rk = dict(rk, rope_local_base_freq=GEMMA3_LOCAL_THETA)
    if variant in MOE and "head_dim" in kw and kw["head_dim"] == kw["hidden_size"] // kw["num_attention_heads"]:
        try:  # a config class without a head_dim field (strict dataclass) may refuse it; it is the default anyway
            cfg = getattr(transformers, cfg_name)(**dict(kw, **rk))
        except Exception as e:  # noqa: BLE001
            print(f"  (warning: {cfg_name} refused head_dim={kw['head_dim']} ({e!r}); leaving it to the default)")
            kw.pop("head_dim")
    try:
        cfg = getattr(transformers, cfg_name)(**dict(kw, **rk))
    except Exception as e:  # noqa: BLE001  (other major version than expected: try the classic keys)
        print(f"  (warning: {cfg_name} with rope kwargs {rope_kwargs(scaling, theta)} failed: {e!r})")
        classic = {"rope_theta": theta}
        if scaling:
            classic["rope_scaling"] = dict(scaling)
        cfg = getattr(transformers, cfg_name)(**dict(kw, **classic))
    torch.manual_seed(seed)
    cls = getattr(transformers, model_name)
    model = None
    if variant in MOE:  # the experts' plain per-expert loop (no grouped_mm kernels): fp32, deterministic
        try:
            cfg._experts_implementation = "eager"
        except Exception:  # noqa: BLE001
            pass
        try:
            model = cls._from_config(cfg, attn_implementation="eager", experts_implementation="eager")
        except Exception as e:  # noqa: BLE001
            print(f"  (warning: _from_config(experts_implementation='eager') failed: {e!r}; setting it afterwards)")
    if model is None:
        try:
            model = cls._from_config(cfg, attn_implementation="eager")
        except Exception as e:  # noqa: BLE001
            print(f"  (warning: eager attention not selectable: {e!r}; using the default)")
            model = cls(cfg)
    if variant in MOE:
        import check_adapter
        check_adapter.force_eager_experts(model)
    model = model.float().eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():  # tied lm_head appears once (as embed_tokens)
            if p.dim() == 1 and "norm" in name:  # Gemma stores w of (1 + w): centred on 0
                p.copy_(rand(g, *p.shape, scale=NORM_STD, shift=0.0 if variant in GEMMA else NORM_SHIFT))
            elif name.endswith(".sinks"):
                p.copy_(rand(g, *p.shape, scale=SINK_STD))
            elif name.endswith(("gate_up_proj_bias", "down_proj_bias")):  # gpt-oss's expert biases [E, out]
                p.copy_(rand(g, *p.shape, scale=BIAS_STD))
                if name.endswith("gate_up_proj_bias"):
                    for e, col, add in GPT_OSS_CLAMPED:
                        p[e, col] += add
            elif name.endswith(".bias"):
                p.copy_(rand(g, *p.shape, scale=BIAS_STD))
            elif name.endswith(("q_proj.weight", "k_proj.weight", "qkv_proj.weight")):
                p.copy_(rand(g, *p.shape, scale=QK_STD))
            elif variant in MOE and ROUTER_NAME.search(name):
                p.copy_(rand(g, *p.shape, scale=ROUTER_STD))
            elif variant in MOE and p.dim() == 3:  # fused experts [E, 2F, H] / [E, H, F]
                p.copy_(rand(g, *p.shape, scale=EXPERT_STD))
            elif p.dim() == 2:
                p.copy_(rand(g, *p.shape, scale=WEIGHT_STD))
            else:
                raise RuntimeError(f"unexpected parameter {name} {tuple(p.shape)}")
    if variant == "gpt-oss":
        make_gpt_oss_mxfp4(model)
    tied = model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    if extra.get("tie_word_embeddings") and not tied:
        model.tie_weights()
        tied = model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    assert tied == bool(extra.get("tie_word_embeddings")), f"{variant}: lm_head tied={tied}"
    # the model's RoPE frequencies are the ones the README documents (catches a silently ignored rope config)
    head_dim = extra.get("head_dim", COMMON["hidden_size"] // COMMON["num_attention_heads"])
    head_dim = int(head_dim * extra.get("partial_rotary_factor", 1.0))  # the rotated channels (partial rotary)
    want_scaling = 1.0
    if variant in GEMMA:
        want = None  # per-layer-type tables: checked by the engine's fixture parity instead
    elif scaling and scaling["rope_type"] == "yarn":
        want, want_scaling = inv_freq_yarn(theta, head_dim, scaling)
    elif scaling and scaling["rope_type"] == "longrope":
        # _compute_longrope_parameters: inv_freq / short_factor (sequences within the original length), cos and
        # sin times sqrt(1 + ln(factor) / ln(original)), factor = max positions / original
        import torch
        want = inv_freq_default(theta, head_dim) / torch.tensor(scaling["short_factor"], dtype=torch.float32)
        orig = extra["original_max_position_embeddings"]
        want_scaling = math.sqrt(1 + math.log(COMMON["max_position_embeddings"] / orig) / math.log(orig))
    elif scaling:
        want = inv_freq_llama3(theta, head_dim, scaling["factor"], scaling["low_freq_factor"],
                               scaling["high_freq_factor"], scaling["original_max_position_embeddings"])
    else:
        want = inv_freq_default(theta, head_dim)
    rot = getattr(model.model, "rotary_emb", None)
    if variant in GEMMA:
        print(f"  ({variant}: rotary buffers {[(n, tuple(b.shape)) for n, b in model.model.named_buffers()]})")
    elif rot is None or not hasattr(rot, "inv_freq"):
        print(f"  (warning: {variant}: no model.rotary_emb.inv_freq to check)")
    else:
        err = (rot.inv_freq.float() - want).abs().max().item()
        if err > 1e-7:
            problem(f"{variant}: model inv_freq differs from the README formula by {err:.2e}")
        if abs(float(getattr(rot, "attention_scaling", 1.0)) - want_scaling) > 1e-6:
            problem(f"{variant}: rotary attention_scaling {rot.attention_scaling}, expected {want_scaling}")
    return model, seed


def lora_param_names(peft_model):
    """PEFT parameter -> saved-file key (PEFT drops the adapter name 'default' in saved files)."""
    from peft.utils import get_peft_model_state_dict
    sd = get_peft_model_state_dict(peft_model)
    params = {n: p for n, p in peft_model.named_parameters() if p.requires_grad}
    by_ptr = {p.data_ptr(): n for n, p in params.items()}
    mapping = {}
    for key, t in sd.items():
        n = by_ptr.get(t.data_ptr())
        if n is None:
            cand = [n for n in params if n.replace(".default", "") == key]
            assert len(cand) == 1, f"cannot map saved key {key}"
            n = cand[0]
        mapping[n] = key
    assert len(mapping) == len(params), (sorted(params), sorted(sd))
    return mapping


def sequence_loss(model, sequences):
    """(sum over sequences of summed next-token CE inside the sequence) / (number of predicted tokens);
    each sequence runs separately. Returns (loss, concatenated logits, loss_sum, count)."""
    import torch
    import torch.nn.functional as F
    total = None
    count = 0
    all_logits = []
    for seq in sequences:
        ids = torch.tensor([seq], dtype=torch.long)
        logits = model(input_ids=ids).logits[0].float()
        all_logits.append(logits)
        if len(seq) > 1:
            s = F.cross_entropy(logits[:-1], ids[0, 1:], reduction="sum")
            total = s if total is None else total + s
            count += len(seq) - 1
    return total / count, torch.cat(all_logits, 0), total, count


def packed_stream(sequences):
    """The packed-stream conventions of expected.safetensors: input_ids, position_ids (restart at 0 per sequence),
    labels (next token of the same sequence, -100 on each sequence's last row), cu_seqlens."""
    import torch
    ids, pos, labels, cu = [], [], [], [0]
    for seq in sequences:
        ids += seq
        pos += list(range(len(seq)))
        labels += seq[1:] + [-100]
        cu.append(cu[-1] + len(seq))
    return {"input_ids": torch.tensor(ids), "position_ids": torch.tensor(pos), "labels": torch.tensor(labels),
            "cu_seqlens": torch.tensor(cu)}


def make_model(root, variant, log, vers):
    if variant in MOE:
        return make_moe_model(root, variant, log, vers)
    import torch
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import load_file
    import check_adapter

    d = os.path.join(root, "models", variant)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    model, seed = build_model(variant)
    try:
        model.save_pretrained(d, safe_serialization=True)
    except TypeError:
        model.save_pretrained(d)
    for f in os.listdir(d):
        if f not in ("config.json", "model.safetensors"):
            os.remove(os.path.join(d, f))  # generation_config.json etc. are not fixtures
    assert os.path.isfile(os.path.join(d, "model.safetensors")), os.listdir(d)

    use_rslora = SPECS[variant][6]
    lcfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=list(FUSED_TARGETS.get(variant, TARGETS)),
                      bias="none",
                      use_rslora=use_rslora, task_type="CAUSAL_LM")
    torch.manual_seed(seed + 1)
    pm = get_peft_model(model, lcfg).float().eval()
    names = lora_param_names(pm)
    init_lora_weights(pm, names, seed + 2)
    adir = os.path.join(d, "adapter")
    pm.save_pretrained(adir)
    for f in os.listdir(adir):
        if f not in ("adapter_config.json", "adapter_model.safetensors"):
            os.remove(os.path.join(adir, f))  # PEFT's README.md model card
    saved = load_file(os.path.join(adir, "adapter_model.safetensors"))
    assert set(saved) == set(names.values()), (sorted(saved), sorted(names.values()))
    params = dict(pm.named_parameters())
    for n, key in names.items():
        assert torch.equal(saved[key], params[n].detach()), key
    with open(os.path.join(adir, "adapter_config.json")) as f:
        acfg = json.load(f)

    gs = torch.Generator().manual_seed(seed + 3)
    sequences = [torch.randint(0, COMMON["vocab_size"], (n,), generator=gs).tolist() for n in SEQ_LENS]
    with open(os.path.join(d, "sequences.json"), "w") as f:
        json.dump({"sequences": sequences}, f)
        f.write("\n")

    # expected: logits, loss, LoRA grads (model state = the saved adapter)
    pm.zero_grad(set_to_none=True)
    loss, logits, loss_sum, count = sequence_loss(pm, sequences)
    loss.backward()
    exp = {"logits": logits.detach(), "loss": loss.detach().reshape(1), "loss_sum": loss_sum.detach().reshape(1),
           "num_predicted": torch.tensor([count])}
    exp.update(packed_stream(sequences))
    grad_norms = {}
    for n, key in names.items():
        gr = params[n].grad
        assert gr is not None, n
        exp[key + ".grad"] = gr.detach().clone()
        grad_norms[key] = gr.norm().item()
    save_st(os.path.join(d, "expected.safetensors"), exp, {"variant": variant, "loss": loss.item(), "count": count})

    # the saved files reproduce the logits through a fresh load (what check_adapter.py does)
    got = check_adapter.peft_logits(d, adir, sequences)
    max_abs, max_rel, _ = check_adapter.compare(got, logits.detach())
    if max_abs > 1e-5:
        problem(f"{variant}: reloaded model+adapter differ from saved logits by {max_abs:.2e}")

    # base model alone: the adapter must matter
    with pm.disable_adapter(), torch.no_grad():
        _, base_logits, _, _ = sequence_loss(pm, sequences)
    adapter_effect = (base_logits - logits.detach()).abs().max().item()
    if adapter_effect <= 1e-3:
        problem(f"{variant}: adapter barely changes logits ({adapter_effect:.2e})")

    # 10 AdamW steps on the LoRA params, loss recorded before each update
    losses = train_curve(pm, [params[n] for n in names], sequences)
    with open(os.path.join(d, "train_curve.json"), "w") as f:
        json.dump(dict(TRAIN, losses=losses), f, indent=1)
        f.write("\n")
    save_st(os.path.join(d, "train_final.safetensors"), {key: params[n].detach() for n, key in names.items()},
            {"what": "LoRA weights after the 10 AdamW steps of train_curve.json"})

    cfg = pm.base_model.model.config
    meta = {
        "variant": variant, "versions": vers, "seed": seed,
        "architecture": SPECS[variant][1],
        "init": {"linear_and_embedding_std": WEIGHT_STD, "q_proj_k_proj_std": QK_STD, "bias_std": BIAS_STD,
                 "rmsnorm_weight": f"{NORM_SHIFT} + {NORM_STD} * randn", "lora_A": "uniform(-1/sqrt(in), 1/sqrt(in))",
                 "lora_B_std": LORA_B_STD},
        "attn_implementation": getattr(cfg, "_attn_implementation", None),
        "lora": {"r": acfg.get("r"), "lora_alpha": acfg.get("lora_alpha"), "use_rslora": acfg.get("use_rslora"),
                 "scaling": (8 / math.sqrt(4)) if use_rslora else 8 / 4,
                 "target_modules": sorted(acfg.get("target_modules") or [])},
        "sequence_lengths": SEQ_LENS, "num_predicted": count, "loss": loss.item(),
        "train_losses": losses, "reload_max_abs_err": max_abs, "adapter_effect_max_abs": adapter_effect,
        "lora_grad_norms": grad_norms,
    }
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    log.append(f"models/{variant}: loss {loss.item():.6f} count {count} train {losses[0]:.6f}->{losses[-1]:.6f} "
               f"reload_err {max_abs:.2e} adapter_effect {adapter_effect:.3e} "
               f"min/max grad norm {min(grad_norms.values()):.3e}/{max(grad_norms.values()):.3e}")


# ----------------------------------------------------------------------------------------------------------
# mixture-of-experts variants (qwen3-moe, mixtral)


def init_lora_weights(pm, names, seed):
    """lora_A ~ U(-1/sqrt(in), 1/sqrt(in)) (in = the tensor's second dimension, also for PEFT's expert ParamWrapper,
    whose lora_A is [r * E, in]), lora_B ~ N(0, LORA_B_STD^2): non-zero, so the adapter changes the outputs."""
    import torch
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in pm.named_parameters():
            if n not in names:
                continue
            if ".lora_A." in n:  # own uniform(-1/sqrt(in), 1/sqrt(in)) draw: independent of PEFT's init code
                bound = 1.0 / math.sqrt(p.shape[1])
                p.copy_((torch.rand(*p.shape, generator=g) * 2 - 1) * bound)
            elif ".lora_B." in n:
                p.copy_(rand(g, *p.shape, scale=LORA_B_STD))
            else:
                raise RuntimeError(n)


def train_curve(pm, train_params, sequences, after_forward=None):
    """TRAIN's AdamW steps on train_params; losses[k] is the loss before the k-th update. after_forward(step) runs
    after each forward (the MoE variants read their router records there)."""
    import torch
    opt = torch.optim.AdamW(train_params, lr=TRAIN["lr"], betas=tuple(TRAIN["betas"]), eps=TRAIN["eps"],
                            weight_decay=TRAIN["weight_decay"], foreach=False)
    losses = []
    for step in range(TRAIN["steps"]):
        opt.zero_grad(set_to_none=True)
        l, _, _, _ = sequence_loss(pm, sequences)
        losses.append(l.item())
        if after_forward is not None:
            after_forward(step)
        l.backward()
        opt.step()
    return losses


def causal_lm(model):
    """The transformers CausalLM itself, also inside a PeftModel."""
    return model.get_base_model() if hasattr(model, "peft_config") and hasattr(model, "get_base_model") else model


def moe_blocks(model):
    """[(decoder layer index, sparse MoE block)] of a CausalLM or of a PeftModel around one. A block has a router
    `gate` and `experts` (transformers 5 names the block `mlp`; Mixtral's Hub checkpoints `block_sparse_moe`)."""
    base = causal_lm(model)
    out = []
    for i, layer in enumerate(base.model.layers):
        for attr in ("mlp", "block_sparse_moe"):
            blk = getattr(layer, attr, None)
            if blk is not None and (hasattr(blk, "gate") or hasattr(blk, "router")) and hasattr(blk, "experts"):
                out.append((i, blk))
                break
    return out


def router_of(blk):
    """The MoE block's router module (`gate`; gpt-oss: `router`, with a bias)."""
    return blk.router if hasattr(blk, "router") else blk.gate


def moe_dims(model):
    """(number of experts, top-k, whether the top-k probabilities are renormalised to sum 1)."""
    cfg = causal_lm(model).config
    num_experts = getattr(cfg, "num_local_experts", None) or getattr(cfg, "num_experts", None)
    # Qwen3-MoE: norm_topk_prob; Mixtral has no such option and always renormalises
    return int(num_experts), int(cfg.num_experts_per_tok), bool(getattr(cfg, "norm_topk_prob", True))


class RouterRecorder:
    """Forward hooks on every MoE block's router (`gate`). Per call: the router probabilities softmax(x W^T) over all
    experts (recomputed in fp32 from the router's input and weight), the gap p(K-th) - p((K+1)-th) per token, and the
    chosen experts and their weights as the router returned them (transformers 5's TopKRouter returns (logits or
    probabilities [T, E], weights [T, K], indices [T, K])); recomputed by top-k if the router returns only logits."""

    def __init__(self, model, top_k, renorm):
        self.top_k, self.renorm = top_k, renorm
        self.layers = [i for i, _ in moe_blocks(model)]
        self.calls = {i: [] for i in self.layers}
        self.handles = []
        for i, blk in moe_blocks(model):
            self.handles.append(router_of(blk).register_forward_hook(self._hook(i), with_kwargs=True))
        if not self.handles:
            raise RuntimeError("no MoE block (a module with `gate` and `experts`) found")

    def _hook(self, layer):
        import torch
        import torch.nn.functional as F

        def fn(module, args, kwargs, output):
            K = self.top_k
            x = args[0] if args else next(iter(kwargs.values()))
            with torch.no_grad():
                x2 = x.detach().reshape(-1, x.shape[-1]).float()
                bias = getattr(module, "bias", None)
                bias = None if bias is None else bias.detach().float()
                probs = torch.softmax(F.linear(x2, module.weight.detach().float(), bias), dim=-1)
                top = torch.sort(probs, dim=-1, descending=True).values
                gap = top[:, K - 1] - top[:, K]
                my_w, my_idx = torch.topk(probs, K, dim=-1)
                if self.renorm:
                    my_w = my_w / my_w.sum(dim=-1, keepdim=True)
                outs = output if isinstance(output, (tuple, list)) else (output,)
                ints = [t for t in outs if torch.is_tensor(t) and not t.is_floating_point() and t.shape[-1] == K]
                flts = [t for t in outs if torch.is_tensor(t) and t.is_floating_point() and t.dim() >= 1
                        and t.shape[-1] == K]
                idx, w, src = my_idx, my_w, "indices and weights recomputed (top-k of the probabilities)"
                if ints:
                    idx, src = ints[-1].reshape(-1, K), "indices from the router's output, weights recomputed"
                if ints and flts:
                    w, src = flts[-1].detach().reshape(-1, K).float(), "indices and weights from the router's output"
            self.calls[layer].append({"probs": probs, "gap": gap, "idx": idx.clone(), "w": w.clone(),
                                      "my_idx": my_idx, "my_w": my_w, "source": src})
        return fn

    def take(self):
        """{layer: {probs [T, E], gap [T], idx [T, K], w [T, K], idx_match, w_max_diff, source}} over the calls since
        the last take (concatenated in call order: sequence by sequence), and forgets them."""
        import torch
        out = {}
        for layer, calls in self.calls.items():
            if not calls:
                continue
            cat = {k: torch.cat([c[k] for c in calls], 0) for k in ("probs", "gap", "idx", "w", "my_idx", "my_w")}
            out[layer] = {"probs": cat["probs"], "gap": cat["gap"], "idx": cat["idx"], "w": cat["w"],
                          "idx_match": bool(torch.equal(cat["idx"].long(), cat["my_idx"].long())),
                          "w_max_diff": (cat["w"] - cat["my_w"]).abs().max().item(), "source": calls[0]["source"]}
            calls.clear()
        return out

    def remove(self):
        for h in self.handles:
            h.remove()
        self.handles = []


def min_gap(records):
    return min(r["gap"].min().item() for r in records.values()) if records else float("nan")


def expert_target_parameters(model):
    """PEFT target_parameters for the fused experts, from the model's own 3-D parameter names: e.g.
    model.layers.0.mlp.experts.gate_up_proj -> "mlp.experts.gate_up_proj"."""
    names = sorted({".".join(n.split(".")[-3:]) for n, p in model.named_parameters() if p.dim() == 3})
    if not names:
        raise RuntimeError("this transformers has no fused (3-D) expert parameters; the MoE fixtures need them")
    return names


def moe_lora_config(variant, target_parameters, target_modules=None):
    from peft import LoraConfig
    spec = MOE[variant]
    return LoraConfig(r=spec["r"], lora_alpha=spec["lora_alpha"], lora_dropout=0.0,
                      target_modules=list(target_modules or MOE_ATTN_TARGETS),
                      target_parameters=list(target_parameters), bias="none", use_rslora=SPECS[variant][6],
                      task_type="CAUSAL_LM")


def moe_peft(model, variant, seed):
    """(PeftModel, {PEFT parameter: saved key}, target_parameters) with the LoRA weights the fixture uses."""
    import torch
    from peft import get_peft_model
    target_parameters = expert_target_parameters(model)
    torch.manual_seed(seed + 1)
    pm = get_peft_model(model, moe_lora_config(variant, target_parameters)).float().eval()
    names = lora_param_names(pm)
    init_lora_weights(pm, names, seed + 2)
    return pm, names, target_parameters


def min_gap_of(variant):
    return MOE[variant].get("min_gap", ROUTER_MIN_GAP)


def routing_check(variant, seed, sequences):
    """Builds the candidate for `seed` exactly as the fixture would (model + LoRA) and runs every pass the fixture
    records -- the adapter forward, the adapter-disabled forward, the training steps -- recording the routers.
    ok: every token's top-k gap > ROUTER_MIN_GAP in every MoE layer and pass, and every expert chosen at least once
    per MoE layer in the adapter forward (so every expert's LoRA slice gets a gradient)."""
    import torch
    model, _ = build_model(variant, seed)
    pm, names, _ = moe_peft(model, variant, seed)
    E, K, renorm = moe_dims(pm)
    rec = RouterRecorder(pm, K, renorm)
    out = {"seed": seed, "ok": False}
    try:
        with torch.no_grad():
            sequence_loss(pm, sequences)
        r = rec.take()
        out["min_gap_adapter"] = min_gap(r)
        out["min_hits"] = min(int(torch.bincount(v["idx"].flatten().long(), minlength=E).min()) for v in r.values())
        out["min_gap"] = out["min_gap_adapter"]
        if not out["min_gap"] > min_gap_of(variant) or out["min_hits"] == 0:
            return out
        with pm.disable_adapter(), torch.no_grad():
            sequence_loss(pm, sequences)
        out["min_gap_adapter_disabled"] = min_gap(rec.take())
        out["min_gap"] = min(out["min_gap"], out["min_gap_adapter_disabled"])
        if not out["min_gap"] > min_gap_of(variant):
            return out
        params = dict(pm.named_parameters())
        steps = []
        train_curve(pm, [params[n] for n in names], sequences,
                    after_forward=lambda step: steps.append(min_gap(rec.take())))
        out["min_gap_train"] = min(steps)
        out["min_gap"] = min(out["min_gap"], out["min_gap_train"])
        out["ok"] = out["min_gap"] > min_gap_of(variant)
        return out
    finally:
        rec.remove()


def st_shapes(path):
    """{tensor name: shape} of a safetensors file, and its metadata."""
    from safetensors import safe_open
    with safe_open(path, framework="pt") as f:
        return {k: list(f.get_slice(k).get_shape()) for k in f.keys()}, f.metadata()


def expert_layout_of(names):
    if any(re.search(r"\.experts\.(gate_up_proj|down_proj)$", n) for n in names):
        return "fused"
    if any(re.search(r"\.experts\.\d+\.", n) for n in names):
        return "per_expert"
    return "unknown"


def layer_table(shapes, layer):
    pre = f"model.layers.{layer}."
    return [[n, shapes[n]] for n in sorted(shapes, key=lambda n: [int(t) if t.isdigit() else t for t in n.split(".")])
            if n.startswith(pre)]


def hub_per_expert_state_dict(sd):
    """transformers 5's in-memory (fused) state dict -> the Mixtral Hub layout:
    model.layers.N.block_sparse_moe.gate.weight [E, H]; ...block_sparse_moe.experts.E.w1.weight = gate_up_proj[e, :F]
    (gate, [F, H]), .w3.weight = gate_up_proj[e, F:] (up, [F, H]), .w2.weight = down_proj[e] (down, [H, F])."""
    out = {}
    pat = re.compile(r"^(model\.layers\.\d+)\.(mlp|block_sparse_moe)\."
                     r"(gate\.weight|experts\.gate_up_proj|experts\.down_proj)$")
    for k, v in sd.items():
        m = pat.match(k)
        if not m:
            if ".experts." in k:
                raise RuntimeError(f"unexpected expert tensor {k} {tuple(v.shape)}")
            out[k] = v.clone().contiguous()
            continue
        pre, what = m.group(1) + ".block_sparse_moe.", m.group(3)
        if what == "gate.weight":
            out[pre + "gate.weight"] = v.clone().contiguous()
        elif what == "experts.gate_up_proj":
            half = v.shape[1] // 2
            for e in range(v.shape[0]):
                out[pre + f"experts.{e}.w1.weight"] = v[e, :half].clone().contiguous()
                out[pre + f"experts.{e}.w3.weight"] = v[e, half:].clone().contiguous()
        else:
            for e in range(v.shape[0]):
                out[pre + f"experts.{e}.w2.weight"] = v[e].clone().contiguous()
    return out


def expert_wrappers(pm, names, adapter="default"):
    """PEFT's ParamWrappers (one per targeted expert parameter; nested when one module has two targeted parameters:
    the outer wrapper is at ...experts, the inner at ...experts.base_layer). Also checks that the wrapper's delta
    weight is scaling * B.reshape(out, r, E)[:, :, e] @ A.reshape(E, r, in)[e] for each expert e."""
    import torch
    out = []
    for mname, mod in pm.named_modules():
        if type(mod).__name__ != "ParamWrapper":
            continue
        A, B = mod.lora_A[adapter].weight, mod.lora_B[adapter].weight
        E, r, s = int(mod.num_experts), int(mod.r[adapter]), float(mod.scaling[adapter])
        param = mod.get_param()
        with torch.no_grad():
            dw = mod.get_delta_weight(adapter)
            A3 = A.reshape(E, r, A.shape[1])            # [E, r, in]:  row e * r + j of lora_A
            B3 = B.reshape(B.shape[0], r, E)            # [out, r, E]: column j * E + e of lora_B
            mine = torch.stack([B3[:, :, e] @ A3[e] for e in range(E)]) * s   # [E, out, in]
            orient = "[E, out, in]"
            transposed = getattr(mod.get_base_layer(), "is_transposed", None)  # gpt-oss: parameters [E, in, out]
            if transposed or (tuple(mine.shape) != tuple(dw.shape) and
                              tuple(mine.transpose(1, 2).shape) == tuple(dw.shape)):
                mine, orient = mine.transpose(1, 2), "[E, in, out]"
            err = (mine - dw).abs().max().item() if mine.shape == dw.shape else float("inf")
        layer = re.search(r"\.layers\.(\d+)\.", mname)
        out.append({
            "module": mname, "layer": int(layer.group(1)) if layer else None,
            "nesting": "inner (base_layer of the outer wrapper)" if mname.endswith(".base_layer") else "outer",
            "parameter_name": mod.parameter_name, "parameter_shape": list(param.shape), "num_experts": E,
            "in_features": getattr(mod, "in_features", None), "out_features": getattr(mod, "out_features", None),
            "r": r, "scaling": s,
            "lora_A_key": names.get(f"{mname}.lora_A.{adapter}.weight"), "lora_A_shape": list(A.shape),
            "lora_B_key": names.get(f"{mname}.lora_B.{adapter}.weight"), "lora_B_shape": list(B.shape),
            "is_transposed": getattr(mod.get_base_layer(), "is_transposed", None),
            "delta_weight_shape": list(dw.shape), "delta_weight_orientation": orient,
            "delta_formula_max_abs_err": err,
        })
    return out


def peft_dense_mlp_probe(variant, seed):
    """What PEFT does on this MoE model when target_modules also names gate_proj / up_proj / down_proj (for the dense
    layer): PEFT >= 0.19 converts transformers-4 MoE targets for transformers 5 (peft/utils/
    transformers_weight_conversion.py: on qwen2_moe-like models it moves gate_proj/up_proj/down_proj from
    target_modules to target_parameters gate_up_proj/down_proj with a rank_pattern of 2r), which is why the fixture
    targets attention only. Recorded in meta.json; not part of the fixture."""
    from peft import get_peft_model

    def lst(x):
        return x if isinstance(x, str) or x is None else sorted(x)
    try:
        model, _ = build_model(variant, seed)
        lcfg = moe_lora_config(variant, expert_target_parameters(model), target_modules=TARGETS)
        pm = get_peft_model(model, lcfg)
        c = pm.peft_config["default"]
        dense = sorted(n for n, m in pm.named_modules()
                       if hasattr(m, "lora_A") and re.search(r"\.layers\.\d+\.mlp\.(gate|up|down)_proj$", n))
        return {"asked_target_modules": TARGETS, "asked_target_parameters": expert_target_parameters(model),
                "resulting_target_modules": lst(c.target_modules),
                "resulting_target_parameters": lst(getattr(c, "target_parameters", None)),
                "rank_pattern": dict(c.rank_pattern or {}), "alpha_pattern": dict(c.alpha_pattern or {}),
                "dense_mlp_modules_with_lora": dense}
    except Exception as e:  # noqa: BLE001
        return {"asked_target_modules": TARGETS, "error": repr(e)}


def make_moe_model(root, variant, log, vers):
    """models/<variant>/ for a mixture-of-experts variant: as make_model, plus
      - a seed (SPECS' seed + k * MOE_SEED_STRIDE, first k that passes) whose routing has no near-ties: in every MoE
        layer, for every token of the adapter forward, the adapter-disabled forward and each training step, the K-th
        largest router probability exceeds the (K+1)-th by more than ROUTER_MIN_GAP; and every expert is chosen;
      - model.safetensors in MOE[variant]["expert_layout"] (fused: as save_pretrained writes it if it writes fused,
        else the in-memory tensors; per_expert: the Mixtral Hub names), reloaded with from_pretrained and compared;
      - expected.safetensors also has, per MoE layer L, router_idx.L [T, K] I32 (the chosen experts, by decreasing
        probability), router_w.L [T, K] F32 (their routing weights) and router_probs.L [T, E] F32 (softmax over all
        experts), for the adapter forward;
      - meta.json: the layouts, PEFT's expert adapter keys / shapes / wrappers, the routing margins."""
    import torch
    from safetensors.torch import load_file, save_file
    import check_adapter

    d = os.path.join(root, "models", variant)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    spec = MOE[variant]
    base_seed = SPECS[variant][2]
    gs = torch.Generator().manual_seed(base_seed + 3)
    sequences = [torch.randint(0, COMMON["vocab_size"], (n,), generator=gs).tolist() for n in SEQ_LENS]
    with open(os.path.join(d, "sequences.json"), "w") as f:
        json.dump({"sequences": sequences}, f)
        f.write("\n")

    # 1. a seed without near-ties in the routing
    attempts, seed = [], None
    for k in range(MOE_MAX_ATTEMPTS):
        summary = routing_check(variant, base_seed + k * MOE_SEED_STRIDE, sequences)
        attempts.append(summary)
        print("  routing check " + json.dumps(summary), flush=True)
        if summary["ok"]:
            seed = summary["seed"]
            break
    if seed is None:
        best = max(attempts, key=lambda a: (a.get("min_hits", 0) > 0, a["min_gap"]))
        seed = best["seed"]
        problem(f"{variant}: no seed in {MOE_MAX_ATTEMPTS} routes every token with a top-k gap > {min_gap_of(variant)}; "
                f"using seed {seed} (min gap {best['min_gap']:.2e})")

    # 2. the base model
    model, _ = build_model(variant, seed)
    cfg = model.config
    E, K, renorm = moe_dims(model)
    moe_layers = [i for i, _ in moe_blocks(model)]
    dense_layers = [i for i in range(cfg.num_hidden_layers) if i not in moe_layers]
    experts_impl = getattr(cfg, "_experts_implementation", None)
    param_table = [[n, list(p.shape)] for n, p in model.named_parameters()]
    print(f"  {variant}: seed {seed}, {E} experts, top-{K}, renormalised {renorm}, MoE layers {moe_layers}, dense "
          f"layers {dense_layers}, experts implementation {experts_impl!r}; parameters in memory:")
    for n, shp in param_table:
        print(f"    {n} {shp}")
    base_sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        _, base_logits_mem, _, _ = sequence_loss(model, sequences)

    # 3. model.safetensors in the wanted expert layout
    try:
        model.save_pretrained(d, safe_serialization=True)
    except TypeError:
        model.save_pretrained(d)
    for f in os.listdir(d):
        if f not in ("config.json", "model.safetensors", "sequences.json"):
            os.remove(os.path.join(d, f))
    mpath = os.path.join(d, "model.safetensors")
    assert os.path.isfile(mpath), os.listdir(d)
    sp_shapes, sp_meta = st_shapes(mpath)
    sp_layout = expert_layout_of(sp_shapes)
    print(f"  save_pretrained wrote the {sp_layout!r} expert layout (metadata {sp_meta}); layer 0:")
    for n, shp in layer_table(sp_shapes, 0):
        print(f"    {n} {shp}")
    want = spec["expert_layout"]
    if want == "fused":
        written = None if sp_layout == "fused" else {k: v.clone().contiguous() for k, v in base_sd.items()}
    else:
        written = hub_per_expert_state_dict(base_sd)
    if written is None:
        matches, written_by = True, "save_pretrained"
    else:
        sp_tensors = load_file(mpath)
        matches = set(sp_tensors) == set(written) and all(torch.equal(sp_tensors[k], written[k]) for k in written)
        if matches:
            written_by = "save_pretrained (identical to the wanted layout)"
        else:
            save_file(written, mpath, metadata={"format": "pt"})
            written_by = ("make_fixtures.py: transformers' in-memory fused tensors" if want == "fused" else
                          "make_fixtures.py: the in-memory fused tensors split into the Mixtral Hub names")
        del sp_tensors
    shapes, _ = st_shapes(mpath)
    layout = expert_layout_of(shapes)
    if layout != want:
        problem(f"{variant}: model.safetensors has the {layout} expert layout, wanted {want}")
    print(f"  model.safetensors ({written_by}): {layout} layout, {len(shapes)} tensors; layer 0:")
    for n, shp in layer_table(shapes, 0):
        print(f"    {n} {shp}")

    # transformers reads that layout back: same parameters, same logits
    reloaded = check_adapter.load_base(d)
    reload_impl = getattr(reloaded.config, "_experts_implementation", None)
    rsd = reloaded.state_dict()
    missing, extra = sorted(set(base_sd) - set(rsd)), sorted(set(rsd) - set(base_sd))
    differ = sorted(k for k in base_sd if k in rsd and not torch.equal(rsd[k].float(), base_sd[k]))
    with torch.no_grad():
        _, rl, _, _ = sequence_loss(reloaded, sequences)
    reload_base_err = (rl - base_logits_mem).abs().max().item()
    params_equal = not (missing or extra or differ)
    print(f"  from_pretrained({variant}): parameters equal {params_equal}, logits max abs err {reload_base_err:.3e} "
          f"(experts implementation {reload_impl!r})")
    if not params_equal:
        problem(f"{variant}: from_pretrained of the {layout} checkpoint: missing {missing}, unexpected {extra}, "
                f"different {differ}")
    if reload_base_err > 1e-6:
        problem(f"{variant}: from_pretrained of the {layout} checkpoint changes the logits by {reload_base_err:.2e}")
    del reloaded, rsd

    # 4. the PEFT adapter: attention LoRA + the experts' ParamWrappers
    pm, names, target_parameters = moe_peft(model, variant, seed)
    print(f"  target_parameters {target_parameters}")
    adir = os.path.join(d, "adapter")
    pm.save_pretrained(adir)
    for f in os.listdir(adir):
        if f not in ("adapter_config.json", "adapter_model.safetensors"):
            os.remove(os.path.join(adir, f))
    saved = load_file(os.path.join(adir, "adapter_model.safetensors"))
    assert set(saved) == set(names.values()), (sorted(saved), sorted(names.values()))
    params = dict(pm.named_parameters())
    for n, key in names.items():
        assert torch.equal(saved[key], params[n].detach()), key
    with open(os.path.join(adir, "adapter_config.json")) as f:
        acfg = json.load(f)
    print("  adapter_model.safetensors:")
    for key in sorted(saved, key=lambda n: [int(t) if t.isdigit() else t for t in n.split(".")]):
        print(f"    {key} {list(saved[key].shape)}")
    print(f"  adapter_config: target_modules {acfg.get('target_modules')} target_parameters "
          f"{acfg.get('target_parameters')} rank_pattern {acfg.get('rank_pattern')} alpha_pattern "
          f"{acfg.get('alpha_pattern')}")
    if sorted(acfg.get("target_modules") or []) != sorted(MOE_ATTN_TARGETS):
        problem(f"{variant}: adapter_config target_modules {acfg.get('target_modules')}, asked {MOE_ATTN_TARGETS}")
    if sorted(acfg.get("target_parameters") or []) != sorted(target_parameters):
        problem(f"{variant}: adapter_config target_parameters {acfg.get('target_parameters')}, "
                f"asked {target_parameters}")
    if acfg.get("rank_pattern") or acfg.get("alpha_pattern"):
        problem(f"{variant}: PEFT set rank/alpha patterns {acfg.get('rank_pattern')} {acfg.get('alpha_pattern')}")
    wrappers = expert_wrappers(pm, names)
    r, alpha, rslora = spec["r"], spec["lora_alpha"], SPECS[variant][6]
    scaling = alpha / math.sqrt(r) if rslora else alpha / r
    print("  expert ParamWrappers:")
    for w in wrappers:
        print("    " + json.dumps(w))
        if abs(w["scaling"] - scaling) > 1e-12 or w["r"] != r or w["num_experts"] != E:
            problem(f"{variant}: {w['module']}: r {w['r']} scaling {w['scaling']} experts {w['num_experts']}, "
                    f"expected {r} {scaling} {E}")
        if not w["delta_formula_max_abs_err"] <= 1e-5:
            problem(f"{variant}: {w['module']}: PEFT's delta weight is not scaling * B[:, :, e] @ A[e] "
                    f"(max abs err {w['delta_formula_max_abs_err']})")
        if w["lora_A_key"] is None or w["lora_B_key"] is None:
            problem(f"{variant}: {w['module']}: its LoRA tensors are not in the saved adapter")
    if len(wrappers) != 2 * len(moe_layers):
        problem(f"{variant}: {len(wrappers)} expert ParamWrappers for {len(moe_layers)} MoE layers (expected 2 each)")

    # 5. expected: logits, loss, every LoRA gradient, the routing (model state = the saved adapter)
    rec = RouterRecorder(pm, K, renorm)
    pm.zero_grad(set_to_none=True)
    loss, logits, loss_sum, count = sequence_loss(pm, sequences)
    router = rec.take()
    loss.backward()
    exp = {"logits": logits.detach(), "loss": loss.detach().reshape(1), "loss_sum": loss_sum.detach().reshape(1),
           "num_predicted": torch.tensor([count])}
    exp.update(packed_stream(sequences))
    total = sum(SEQ_LENS)
    hits, router_ok = {}, True
    for layer, rr in router.items():
        assert rr["idx"].shape == (total, K) and rr["probs"].shape == (total, E), (layer, rr["idx"].shape)
        exp[f"router_idx.{layer}"] = rr["idx"]
        exp[f"router_w.{layer}"] = rr["w"]
        exp[f"router_probs.{layer}"] = rr["probs"]
        hits[str(layer)] = torch.bincount(rr["idx"].flatten().long(), minlength=E).tolist()
        router_ok = router_ok and rr["idx_match"] and rr["w_max_diff"] <= 1e-6
        print(f"  router layer {layer} ({rr['source']}): min gap {rr['gap'].min().item():.3e}, expert hits "
              f"{hits[str(layer)]}, recomputed top-k equal {rr['idx_match']}, weights max diff {rr['w_max_diff']:.1e}")
    if not router_ok:
        problem(f"{variant}: the router's own top-k differs from softmax + top-k of its weights")
    gap_adapter = min_gap(router)
    grad_norms = {}
    for n, key in names.items():
        gr = params[n].grad
        assert gr is not None, n
        exp[key + ".grad"] = gr.detach().clone()
        grad_norms[key] = gr.norm().item()
    save_st(os.path.join(d, "expected.safetensors"), exp, {"variant": variant, "loss": loss.item(), "count": count})

    # the saved files reproduce the logits through a fresh load (what check_adapter.py does)
    got = check_adapter.peft_logits(d, adir, sequences)
    max_abs, max_rel, _ = check_adapter.compare(got, logits.detach())
    if max_abs > 1e-5:
        problem(f"{variant}: reloaded model+adapter differ from saved logits by {max_abs:.2e}")

    # base model alone: the adapter must matter; the disabled adapter is the plain model
    with pm.disable_adapter(), torch.no_grad():
        _, base_logits, _, _ = sequence_loss(pm, sequences)
    gap_disabled = min_gap(rec.take())
    adapter_effect = (base_logits - logits.detach()).abs().max().item()
    disabled_vs_plain = (base_logits - base_logits_mem).abs().max().item()
    if adapter_effect <= 1e-3:
        problem(f"{variant}: adapter barely changes logits ({adapter_effect:.2e})")
    if disabled_vs_plain > 1e-6:
        problem(f"{variant}: PEFT with the adapter disabled differs from the plain model by {disabled_vs_plain:.2e}")

    # 10 AdamW steps on the LoRA params, loss recorded before each update; the routing watched at every step
    step_gaps = []
    losses = train_curve(pm, [params[n] for n in names], sequences,
                         after_forward=lambda step: step_gaps.append(min_gap(rec.take())))
    rec.remove()
    with open(os.path.join(d, "train_curve.json"), "w") as f:
        json.dump(dict(TRAIN, losses=losses), f, indent=1)
        f.write("\n")
    save_st(os.path.join(d, "train_final.safetensors"), {key: params[n].detach() for n, key in names.items()},
            {"what": "LoRA weights after the 10 AdamW steps of train_curve.json"})
    gap_all = min([gap_adapter, gap_disabled] + step_gaps)
    if not gap_all > min_gap_of(variant):
        problem(f"{variant}: router top-k gap {gap_all:.2e} <= {min_gap_of(variant)} (near-tie)")

    mxfp4_err = write_gpt_oss_mxfp4(d, os.path.join(d, "mxfp4")) if variant == "gpt-oss" else None
    probe = peft_dense_mlp_probe(variant, seed) if dense_layers else None
    if probe is not None:
        print("  PEFT with gate_proj/up_proj/down_proj also in target_modules: " + json.dumps(probe))

    layer0_wrappers = [w for w in wrappers if w["layer"] == moe_layers[0]]
    meta = {
        "variant": variant, "versions": vers, "seed": seed,
        "architecture": SPECS[variant][1],
        "expert_layout": layout,
        "init": {"linear_and_embedding_std": WEIGHT_STD, "q_proj_k_proj_std": QK_STD, "router_std": ROUTER_STD,
                 "experts_std": EXPERT_STD, "rmsnorm_weight": f"{NORM_SHIFT} + {NORM_STD} * randn",
                 "lora_A": "uniform(-1/sqrt(in), 1/sqrt(in))", "lora_B_std": LORA_B_STD,
                 "seed_search": f"seed = {base_seed} + k * {MOE_SEED_STRIDE}, first k whose routing passes"},
        "attn_implementation": getattr(cfg, "_attn_implementation", None),
        "experts_implementation": experts_impl,
        "lora": {"r": acfg.get("r"), "lora_alpha": acfg.get("lora_alpha"), "use_rslora": acfg.get("use_rslora"),
                 "scaling": scaling, "target_modules": sorted(acfg.get("target_modules") or []),
                 "target_parameters": sorted(acfg.get("target_parameters") or []),
                 "rank_pattern": acfg.get("rank_pattern"), "alpha_pattern": acfg.get("alpha_pattern")},
        "moe": {
            "num_experts": E, "top_k": K, "renormalize_topk": renorm, "moe_layers": moe_layers,
            "dense_layers": dense_layers,
            "expert_intermediate_size": int(getattr(cfg, "moe_intermediate_size", None) or cfg.intermediate_size),
            "dense_intermediate_size": int(cfg.intermediate_size) if dense_layers else None,
            "expert_forward": "per chosen expert e: down_proj[e] @ (silu(gate) * up), [gate; up] = gate_up_proj[e] @ x "
                              "(gate = rows :F, up = rows F:); the block output is sum over the K chosen of "
                              "weight * that",
            "router": {
                "probabilities": "softmax(x W_gate^T) over all experts (fp32), x = the post-attention RMSNorm output",
                "selection": "the K largest probabilities, in decreasing order (router_idx.L)",
                "weights": "their probabilities" + (", divided by their sum" if renorm else ""),
                "weights_source": next(iter(router.values()))["source"],
                "min_gap_threshold": min_gap_of(variant), "min_gap": gap_all, "min_gap_expected_forward": gap_adapter,
                "min_gap_adapter_disabled": gap_disabled, "min_gap_train_steps": step_gaps,
                "expert_hits": hits, "attempts": attempts,
            },
        },
        "checkpoint": {
            "expert_layout": layout, "written_by": written_by,
            "save_pretrained_layout": sp_layout, "save_pretrained_matches_written": matches,
            "save_pretrained_layer0": layer_table(sp_shapes, 0),
            "model_safetensors_layer0": layer_table(shapes, 0),
            "in_memory_parameters_layer0": [x for x in param_table if x[0].startswith("model.layers.0.")],
            "reload_parameters_equal": params_equal, "reload_logits_max_abs_err": reload_base_err,
            "reload_experts_implementation": reload_impl,
        },
        "adapter": {
            "expert_wrappers_layer0": layer0_wrappers,
            "expert_keys_layer0": [[w[k + "_key"], w[k + "_shape"]] for w in layer0_wrappers
                                   for k in ("lora_A", "lora_B")],
            "num_expert_wrappers": len(wrappers),
            "lora_A_layout": "[E * r, in]: rows e * r .. e * r + r - 1 are expert e's A_e [r, in] "
                             "(reshape (E, r, in))",
            "lora_B_layout": "[out, r * E]: column j * E + e is column j of expert e's B_e [out, r] "
                             "(reshape (out, r, E))",
            "delta": "parameter[e] ([out, in] = gate_up_proj[e] [2F, H] or down_proj[e] [H, F]) + scaling * B_e @ A_e; "
                     "PEFT adds it to the parameter in the forward (W + dW): x W_e^T + scaling (x A_e^T) B_e^T",
        },
        "peft_dense_mlp_probe": probe,
        "mxfp4_checkpoint": None if mxfp4_err is None else {
            "folder": "mxfp4/", "experts": "<name>_blocks uint8 [E, out, in/32, 16] + <name>_scales uint8 [E, out, in/32]",
            "transformers_dequantized_max_abs_err_vs_fp32": mxfp4_err},
        "sequence_lengths": SEQ_LENS, "num_predicted": count, "loss": loss.item(),
        "train_losses": losses, "reload_max_abs_err": max_abs, "adapter_effect_max_abs": adapter_effect,
        "adapter_disabled_vs_plain_max_abs": disabled_vs_plain,
        "lora_grad_norms": grad_norms,
    }
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    log.append(f"models/{variant}: loss {loss.item():.6f} count {count} train {losses[0]:.6f}->{losses[-1]:.6f} "
               f"reload_err {max_abs:.2e} adapter_effect {adapter_effect:.3e} "
               f"min/max grad norm {min(grad_norms.values()):.3e}/{max(grad_norms.values()):.3e} "
               f"seed {seed} router min gap {gap_all:.2e} layout {layout} (save_pretrained: {sp_layout})")


def main(argv=None):
    a = parse_args(argv)
    setup_torch()
    vers = versions()
    print("versions:", json.dumps(vers), flush=True)
    os.makedirs(a.out, exist_ok=True)
    log = []
    if a.only in ("all", "ops"):
        make_ops(a.out, log)
    if a.only in ("all", "models"):
        for v in a.variants:
            print(f"model {v} ...", flush=True)
            make_model(a.out, v, log, vers)
            print("  " + log[-1], flush=True)
    if a.only in ("all", "ops"):
        with open(os.path.join(a.out, "ops", "versions.json"), "w") as f:
            json.dump(vers, f, indent=1)
            f.write("\n")
    print("\n".join(log))
    if PROBLEMS:
        print("PROBLEMS:\n  " + "\n  ".join(PROBLEMS))
        with open(os.path.join(a.out, "PROBLEMS.txt"), "w") as f:
            f.write("\n".join(PROBLEMS) + "\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
