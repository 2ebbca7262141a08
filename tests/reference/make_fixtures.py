#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""Reference fixtures for Tandem's CPU kernels and model code, made with torch, transformers and PEFT.

    python3 tests/reference/make_fixtures.py --out tests/fixtures          # everything
    python3 tests/reference/make_fixtures.py --out DIR --only ops          # or: --only models
    python3 tests/reference/make_fixtures.py --out DIR --variants llama,qwen3

Writes (see tests/fixtures/README.md for the exact conventions):
  DIR/ops/<op>.safetensors          per-op inputs, outputs and gradients (fp32 CPU autograd)
  DIR/models/<variant>/             tiny random HF model + PEFT LoRA adapter + expected logits, loss, LoRA
                                    gradients, a 10-step AdamW loss curve, meta.json
Deterministic: fixed seeds, float32, CPU only, one thread, torch.use_deterministic_algorithms(True).
After writing each model it reloads model + adapter from disk with PEFT (check_adapter.py) and asserts the
logits match what it saved. Requires torch, transformers, peft, safetensors; no network.
"""
import argparse
import json
import math
import os
import shutil
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

VARIANTS = ("llama", "qwen2", "qwen3", "mistral", "mistral-window", "phi3", "gemma2", "gemma3")
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
}
GEMMA = ("gemma2", "gemma3")
GEMMA3_LOCAL_THETA = 10000.0
# PEFT target_modules per variant (the checkpoint's module names).
FUSED_TARGETS = {"phi3": ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]}
WEIGHT_STD = 0.02          # every Linear / embedding weight, like HF init ...
QK_STD = 0.125             # ... except q_proj / k_proj: attention scores O(1) so causal mask and RoPE matter
BIAS_STD = 0.1             # qwen2 q/k/v biases
NORM_SHIFT, NORM_STD = 1.0, 0.2   # every RMSNorm weight = 1 + 0.2 * randn
LORA_B_STD = 0.05          # lora_B non-zero so the adapter changes the outputs
TRAIN = {"optimizer": "AdamW", "lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0, "steps": 10}


def build_model(variant):
    import torch
    import transformers
    cfg_name, model_name, seed, extra, theta, scaling, _ = SPECS[variant]
    kw = dict(COMMON)
    kw.update(extra)
    rk = rope_kwargs(scaling, theta)
    if variant == "gemma3" and "rope_parameters" in rk:  # transformers 5: one RoPE per layer type
        rk = {"rope_parameters": {"full_attention": rk["rope_parameters"],
                                  "sliding_attention": {"rope_type": "default", "rope_theta": GEMMA3_LOCAL_THETA}}}
    elif variant == "gemma3":
        rk = dict(rk, rope_local_base_freq=GEMMA3_LOCAL_THETA)
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
    try:
        model = cls._from_config(cfg, attn_implementation="eager")
    except Exception as e:  # noqa: BLE001
        print(f"  (warning: eager attention not selectable: {e!r}; using the default)")
        model = cls(cfg)
    model = model.float().eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():  # tied lm_head appears once (as embed_tokens)
            if p.dim() == 1 and "norm" in name:  # Gemma stores w of (1 + w): centred on 0
                p.copy_(rand(g, *p.shape, scale=NORM_STD, shift=0.0 if variant in GEMMA else NORM_SHIFT))
            elif name.endswith(".bias"):
                p.copy_(rand(g, *p.shape, scale=BIAS_STD))
            elif name.endswith(("q_proj.weight", "k_proj.weight", "qkv_proj.weight")):
                p.copy_(rand(g, *p.shape, scale=QK_STD))
            elif p.dim() == 2:
                p.copy_(rand(g, *p.shape, scale=WEIGHT_STD))
            else:
                raise RuntimeError(f"unexpected parameter {name} {tuple(p.shape)}")
    tied = model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    if extra.get("tie_word_embeddings") and not tied:
        model.tie_weights()
        tied = model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    assert tied == bool(extra.get("tie_word_embeddings")), f"{variant}: lm_head tied={tied}"
    # the model's RoPE frequencies are the ones the README documents (catches a silently ignored rope config)
    head_dim = extra.get("head_dim", COMMON["hidden_size"] // COMMON["num_attention_heads"])
    want_scaling = 1.0
    if variant in GEMMA:
        want = None  # per-layer-type tables: checked by the engine's fixture parity instead
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


def make_model(root, variant, log, vers):
    import torch
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import load_file
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
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
    g = torch.Generator().manual_seed(seed + 2)
    names = lora_param_names(pm)
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
    ids, pos, labels, cu = [], [], [], [0]
    for seq in sequences:
        ids += seq
        pos += list(range(len(seq)))
        labels += seq[1:] + [-100]
        cu.append(cu[-1] + len(seq))
    exp.update({"input_ids": torch.tensor(ids), "position_ids": torch.tensor(pos), "labels": torch.tensor(labels),
                "cu_seqlens": torch.tensor(cu)})
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
    train_params = [params[n] for n in names]
    opt = torch.optim.AdamW(train_params, lr=TRAIN["lr"], betas=tuple(TRAIN["betas"]), eps=TRAIN["eps"],
                            weight_decay=TRAIN["weight_decay"], foreach=False)
    losses = []
    for _ in range(TRAIN["steps"]):
        opt.zero_grad(set_to_none=True)
        l, _, _, _ = sequence_loss(pm, sequences)
        losses.append(l.item())
        l.backward()
        opt.step()
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
