#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""FP8 (E4M3, 128x128 block scales) fixtures made with torch's own float8_e4m3fn conversion, transformers and PEFT.

    CUDA_VISIBLE_DEVICES="" python3 tests/reference/make_fp8_fixtures.py --out tests/fixtures

Runs on the CPU (torch's fp32 -> float8_e4m3fn conversion works there), one thread, deterministic; about a
minute. Needs torch (>= 2.1, float8 dtypes), safetensors, and for part 3 transformers + peft and the committed
fixture models tests/fixtures/models/{llama,qwen3} (their config.json, model.safetensors, adapter/,
sequences.json, expected.safetensors, as make_fixtures.py wrote them). No network. Exits 2 and prints PROBLEM
lines when one of its self-checks fails (it still writes the files, so they can be looked at).
The rules are those of engine/core/fp8.h; see there for the format and the layouts.

Writes:
 1. DIR/fp8/e4m3.safetensors: torch's rounding of fp32 to E4M3 (round to nearest even). Tensors:
      x      F32 [N]    inputs, all with |x| <= 448 (torch does not saturate: >= 464 becomes NaN there, so
                        saturation is tested by tests/test_fp8.cpp itself). Groups, in this order (their
                        [begin, end) are in the metadata "params" JSON, key "groups"): every finite code's
                        exact value, both signs, +0 and -0 ("exact", 254); the midpoint between each pair of
                        neighbouring finite values, both signs ("mid", ties to even); fp32 nextafter up and
                        down of each midpoint ("mid_up", "mid_down"); values around the subnormals and the
                        smallest subnormal 2^-9 down to fp32 denormals ("tiny", both signs); random values,
                        uniform in [-448, 448] and log-uniform in magnitude from 2^-12 to 448 ("random").
      code   U8  [N]    x.to(torch.float8_e4m3fn).view(torch.uint8)
      table  F32 [256]  torch's value of every code (arange(256, uint8).view(float8_e4m3fn).float()); NaN at
                        0x7F and 0xFF
    Every code is also checked here against a plain-Python round-to-nearest-even over the 127 finite values.
 2. DIR/fp8/blocks.safetensors: the block quantization rule of core/fp8.h computed in torch on the CPU:
    per block, amax = max |w| (fp32), scale = amax / 448 and inv = 448 / amax (fp32 IEEE divisions of two fp32
    tensors), codes = (w * inv).to(float8_e4m3fn) (fp32 product, then torch's rounding); an all-zero block has
    scale 1 and codes 0; the pad columns up to a multiple of 128 are code 0. Tensors:
      w          F32 [300, 352]  normal * 0.05 made in bf16 then cast (bf16-representable), one outlier
                                 w[5, 17] = 12.5, the block rows 128..255 x cols 128..255 all zero
      w_codes    U8  [300, 384]  w_scales  F32 [3, 3]   (scales [ceil(OUT/128), INp/128])
      wt_codes   U8  [352, 384]  wt_scales F32 [3, 3]   the transposed weight (kernels/cpu/fp8.h fp8_transpose:
                                 code (o, i) -> (i, o), scale (bo, bi) -> (bi, bo), pad columns 300..383 code 0)
      x          F32 [37, 352]   activations (bf16-representable): rows of different magnitudes, an all-zero
                                 row (3), a row with one all-zero 128-block (7), a row with an outlier (10),
                                 one -0.0 element (x[12, 0])
      x_codes    U8  [37, 384]   x_scales  F32 [3, 37]  (the [Kp/128, rows] layout: each block column's scales
                                 contiguous over the rows)
      bias       F32 [300]       bf16-representable
      out        F64 [37, 300]   dequant(x) @ dequant(w)^T + bias in float64 from the codes above (value of a
                                 code = float(code as e4m3) * its block's scale, exact in float64)
    The scales are also checked against Python's own float division rounded to fp32, and every code against
    the plain-Python rounding of the fp32 product w * inv.
 3. DIR/models/{llama,qwen3}/fp8_expected.safetensors: an FP8-emulated forward of the fixture model with its
    PEFT adapter, in fp32 on the CPU (eager attention), each sequence of sequences.json run separately exactly
    as expected.safetensors was made (make_fixtures.sequence_loss). The emulation: every PEFT LoraLayer's
    base_layer (the decoder projections q,k,v,o,gate,up,down; not lm_head, not the embeddings, not the LoRA
    A/B) gets its forward replaced (an instance attribute `forward` on that nn.Linear) by
        y = float32(dequant(quant_rows(x)) @ dequant(quant_weight(W))^T) + bias
    with x the module input flattened to [rows, in]; quant_rows: per row and 128 columns, quant_weight: per
    128x128 block, both the rule of part 2; the dequantized values are exact in float64 and the product is
    summed in float64 and rounded once to fp32 (the engine sums each 128-block in double and the blocks in
    fp32: a difference at fp32 rounding level). PEFT's LoRA path is unchanged (it sees the unquantized x).
    The script checks that exactly 14 projections were patched, each called once per sequence, that no other
    Linear outside the LoRA A/B and lm_head exists, and that the plain fp32 logits equal expected.safetensors'.
    Tensors:
      logits        F32 [33, 101]  FP8-emulated, the sequences concatenated (as expected.safetensors' logits)
      loss          F32 [1]        loss_sum / num_predicted (next-token CE inside each sequence)
      loss_sum      F32 [1]
      num_predicted I32 [1]        29
      fp32.logits   F32 [33, 101]  the same without the FP8 emulation (plain fp32 PEFT, = expected.safetensors)
      fp32.loss     F32 [1]
      fp32.loss_sum F32 [1]
    Metadata "params" JSON: the rule, the patched module names, max |logits - fp32.logits|, max|fp32.logits|,
    the fp32 check against expected.safetensors, versions. No gradients: the FP8 backward's rule (whether dY
    is quantized for the input gradient) is the engine's choice, not fixed by core/fp8.h.
"""
import argparse
import bisect
import json
import math
import os
import struct
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # make_fixtures.py, check_adapter.py
import make_fixtures  # noqa: E402  (its setup, versions and sequence_loss; it imports torch only when called)

BLOCK = 128
E4M3_MAX = 448.0
MODELS = ("llama", "qwen3")
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
SEED = 8448
PROBLEMS = []


def problem(msg):
    print("  PROBLEM: " + msg, flush=True)
    PROBLEMS.append(msg)


def setup_torch():
    """make_fixtures' setup (one thread, deterministic, fp32 default), and a torch that has float8."""
    torch = make_fixtures.setup_torch()
    if not hasattr(torch, "float8_e4m3fn"):
        sys.exit("this torch has no float8_e4m3fn (needs torch >= 2.1)")
    return torch


versions = make_fixtures.versions


def save(path, tensors, params):
    """tensors keep their dtype (F32, F64, U8, I32 here); params: JSON-able dict in metadata 'params'."""
    from safetensors.torch import save_file
    os.makedirs(os.path.dirname(path), exist_ok=True)
    save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, path,
              metadata={"format": "pt", "params": json.dumps(params, sort_keys=True)})
    print(f"  wrote {path} ({os.path.getsize(path)} bytes)", flush=True)


# ----------------------------------------------------------------------------------------------------------
# plain-Python references (no torch): fp32 rounding and E4M3 round-to-nearest-even


def f32(v):
    """v (a Python float) rounded to fp32 (C's double -> float cast: nearest even)."""
    return struct.unpack("<f", struct.pack("<f", v))[0]


def e4m3_value_py(c):
    """The value of a finite code 0..126 (positive)."""
    e, m = (c >> 3) & 15, c & 7
    return m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)


POS = [e4m3_value_py(c) for c in range(127)]  # codes 0x00..0x7E: 0 .. 448, strictly increasing


def e4m3_code_py(x):
    """Round to nearest, ties to the even code (code LSB = mantissa LSB), saturating to 448 (core/fp8.h)."""
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    a = abs(x)
    if a >= E4M3_MAX:
        return sign | 0x7E
    i = bisect.bisect_right(POS, a) - 1  # POS[i] <= a < POS[i + 1]
    lo, hi = POS[i], POS[i + 1]
    mid = (lo + hi) / 2  # exact in double (5 significant bits)
    if a < mid:
        c = i
    elif a > mid:
        c = i + 1
    else:
        c = i if i % 2 == 0 else i + 1
    return sign | c


# ----------------------------------------------------------------------------------------------------------
# the block rule in torch (shared by parts 2 and 3)


def quant_blocks(t, rows_per_block):
    """t fp32 [R, C] -> (codes U8 [R, Cp], scales F32 [ceil(R / rows_per_block), Cp / 128]), Cp = C rounded up
    to 128. Per block: amax = max |t|; scale = amax / 448, inv = 448 / amax (fp32 divisions); codes =
    (t * inv).to(float8_e4m3fn); an all-zero block: scale 1, codes 0; pad columns code 0."""
    import torch
    assert t.dtype == torch.float32 and t.dim() == 2 and t.device.type == "cpu"
    R, C = t.shape
    Cp = -(-C // BLOCK) * BLOCK
    Rp = -(-R // rows_per_block) * rows_per_block
    padded = torch.zeros(Rp, Cp, dtype=torch.float32)
    padded[:R, :C] = t
    blocks = padded.view(Rp // rows_per_block, rows_per_block, Cp // BLOCK, BLOCK)
    amax = blocks.abs().amax(dim=(1, 3))  # [Rb, Cb], exact (max)
    if not torch.isfinite(amax).all():
        raise ValueError("non-finite input: the fixtures hold finite values only")
    zero = amax == 0
    ones = torch.ones_like(amax)
    safe = torch.where(zero, ones, amax)
    e4max = torch.full_like(amax, E4M3_MAX)
    scale = torch.where(zero, ones, safe / e4max)  # tensor / tensor on the CPU: IEEE fp32 division
    inv = torch.where(zero, ones, e4max / safe)
    prod = blocks * inv[:, None, :, None]  # fp32 products
    # torch's conversion turns |v| >= 464 into NaN where core/fp8.h saturates; a scaled block never gets there
    # (|w| * (448 / amax) <= 448 * (1 + 2^-23)), but say so if it ever did.
    if not (prod.abs().amax() < 464.0):
        problem(f"a scaled block reaches {prod.abs().amax().item()}, where torch's conversion is not saturating")
    codes = prod.to(torch.float8_e4m3fn).view(torch.uint8).reshape(Rp, Cp)[:R].clone()
    codes[:, C:] = 0  # pad columns (already 0 * inv = +0 -> code 0)
    return codes.contiguous(), scale.contiguous(), inv.contiguous()


def quant_weight(w):
    """w [OUT, IN] -> codes [OUT, INp], scales [ceil(OUT/128), INp/128]."""
    codes, scales, _ = quant_blocks(w, BLOCK)
    return codes, scales


def quant_rows(x):
    """x [rows, K] -> codes [rows, Kp], scales [Kp/128, rows] (the block column's scales contiguous)."""
    codes, scales, _ = quant_blocks(x, 1)  # scales [rows, Kp/128]
    return codes, scales.t().contiguous()


def code_values64(codes):
    """float64 values of E4M3 codes (exact)."""
    import torch
    return codes.view(torch.float8_e4m3fn).to(torch.float32).to(torch.float64)


def dequant_weight64(codes, scales, OUT, IN):
    """float64 [OUT, IN]: e4m3(code) * its block's scale (exact in float64)."""
    import torch
    s = scales.to(torch.float64).repeat_interleave(BLOCK, 0)[:OUT].repeat_interleave(BLOCK, 1)
    return (code_values64(codes) * s)[:, :IN]


def dequant_rows64(codes, scales_t, rows, K):
    """float64 [rows, K] from codes [rows, Kp] and scales [Kp/128, rows]."""
    import torch
    s = scales_t.t().to(torch.float64).repeat_interleave(BLOCK, 1)
    assert s.shape == codes.shape and s.shape[0] == rows
    return (code_values64(codes) * s)[:, :K]


def transpose_weight(codes, scales, OUT, IN):
    """kernels/cpu/fp8.h fp8_transpose: codes [IN, OUTp] (pad columns 0), scales [ceil(IN/128), OUTp/128]."""
    import torch
    OUTp = -(-OUT // BLOCK) * BLOCK
    t = torch.zeros(IN, OUTp, dtype=torch.uint8)
    t[:, :OUT] = codes[:, :IN].t()
    return t.contiguous(), scales.t().contiguous()


def check_block_rule_in_python(name, t, codes, scales, rows_per_block):
    """The torch results against plain Python: the fp32 scale and inv of each block, each code from the fp32
    product t * inv. Returns the number of mismatches."""
    R, C = t.shape
    vals = t.tolist()
    sc = scales.tolist()
    cd = codes.tolist()
    bad = 0
    for rb in range(-(-R // rows_per_block)):
        for cb in range(len(sc[0])):
            r0, r1 = rb * rows_per_block, min(R, (rb + 1) * rows_per_block)
            c0, c1 = cb * BLOCK, min(C, (cb + 1) * BLOCK)
            amax = max((abs(vals[r][c]) for r in range(r0, r1) for c in range(c0, c1)), default=0.0)
            scale, inv = (1.0, 1.0) if amax == 0 else (f32(amax / E4M3_MAX), f32(E4M3_MAX / amax))
            if sc[rb][cb] != scale:
                bad += 1
                problem(f"{name}: block ({rb}, {cb}) scale {sc[rb][cb]!r}, Python {scale!r}")
            for r in range(r0, r1):
                for c in range(c0, c1):
                    want = e4m3_code_py(f32(vals[r][c] * inv))
                    if cd[r][c] != want:
                        bad += 1
                        if bad <= 10:
                            problem(f"{name}[{r}, {c}] = {vals[r][c]!r}: torch code {cd[r][c]:#04x}, Python {want:#04x}")
    for r in range(R):
        if any(cd[r][c] != 0 for c in range(C, len(cd[r]))):
            bad += 1
            problem(f"{name}: row {r} has non-zero pad codes")
    return bad


# ----------------------------------------------------------------------------------------------------------
# 1. e4m3.safetensors


def make_e4m3(root, log, vers):
    import torch
    table = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).to(torch.float32)
    for c in range(256):
        v = table[c].item()
        if (c & 0x7F) == 0x7F:
            if not math.isnan(v):
                problem(f"torch's value of code {c:#04x} is {v}, not NaN")
            continue
        want = math.copysign(e4m3_value_py(c & 0x7F), -1.0 if c & 0x80 else 1.0)
        if v != want or math.copysign(1.0, v) != math.copysign(1.0, want):
            problem(f"torch's value of code {c:#04x} is {v!r}, Python {want!r}")

    finite = [c for c in range(256) if (c & 0x7F) != 0x7F]
    exact = table[finite]
    pos = table[:127]
    if not bool((pos[1:] > pos[:-1]).all()):
        problem("the positive codes' values are not increasing")
    mid = (pos[:-1] + pos[1:]) / 2  # exact in fp32 (5 significant bits)
    for a, b, m in zip(pos[:-1].tolist(), pos[1:].tolist(), mid.tolist()):
        if m != (a + b) / 2:
            problem(f"midpoint of {a} and {b} is not exact in fp32: {m}")
    inf = torch.full_like(mid, math.inf)
    up = torch.nextafter(mid, inf)
    down = torch.nextafter(mid, -inf)
    s = 2.0 ** -9
    tiny = [s * k for k in (0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2.5, 3.5, 4.5, 6.5, 7.5, 8.5, 9.5)]
    tiny += [2.0 ** -11, 2.0 ** -12, 2.0 ** -20, 2.0 ** -100, 2.0 ** -126, 2.0 ** -130, 2.0 ** -149, 1e-38, 1e-30,
             2.0 ** -6 * (1 - 2.0 ** -24), 2.0 ** -6 * (1 + 2.0 ** -23)]
    tiny_t = torch.tensor(tiny, dtype=torch.float32)
    tiny_t = torch.cat([tiny_t, torch.nextafter(tiny_t[:14], torch.zeros(14)),
                        torch.nextafter(tiny_t[:14], torch.full((14,), math.inf))])
    g = torch.Generator().manual_seed(SEED)
    uni = (torch.rand(1500, generator=g, dtype=torch.float64) * 2 - 1) * E4M3_MAX
    lg = torch.rand(1500, generator=g, dtype=torch.float64) * (math.log2(E4M3_MAX) + 12) - 12
    sign = 1.0 - 2.0 * (torch.rand(1500, generator=g, dtype=torch.float64) < 0.5).to(torch.float64)
    rnd = torch.cat([uni, sign * torch.exp2(lg)]).to(torch.float32).clamp(-E4M3_MAX, E4M3_MAX)

    groups, parts, at = {}, [], 0
    for name, t in (("exact", exact), ("mid", torch.cat([mid, -mid])), ("mid_up", torch.cat([up, -up])),
                    ("mid_down", torch.cat([down, -down])), ("tiny", torch.cat([tiny_t, -tiny_t])), ("random", rnd)):
        groups[name] = [at, at + t.numel()]
        at += t.numel()
        parts.append(t)
    x = torch.cat(parts).contiguous()
    assert x.dtype == torch.float32 and bool((x.abs() <= E4M3_MAX).all())
    code = x.to(torch.float8_e4m3fn).view(torch.uint8)

    bad = 0
    for i, (v, c) in enumerate(zip(x.tolist(), code.tolist())):
        want = e4m3_code_py(v)
        if c != want:
            bad += 1
            if bad <= 10:
                problem(f"e4m3: x[{i}] = {v!r}: torch code {c:#04x}, Python round-to-nearest-even {want:#04x}")
    if bad:
        problem(f"e4m3: {bad} of {x.numel()} torch codes differ from the Python rounding")
    save(os.path.join(root, "fp8", "e4m3.safetensors"), {"x": x, "code": code, "table": table},
         {"groups": groups, "n": x.numel(), "seed": SEED, "versions": vers,
          "what": "code = x.to(torch.float8_e4m3fn).view(torch.uint8); table = torch's value of each code"})
    log.append(f"fp8/e4m3: {x.numel()} values, groups {groups}, Python-rounding mismatches {bad}")


# ----------------------------------------------------------------------------------------------------------
# 2. blocks.safetensors


def make_blocks(root, log, vers):
    import torch
    OUT, IN, N = 300, 352, 37
    g = torch.Generator().manual_seed(SEED + 1)
    w = (torch.randn(OUT, IN, generator=g) * 0.05).to(torch.bfloat16).to(torch.float32)
    w[5, 17] = 12.5  # an outlier: block (0, 0) gets a large scale, its small values subnormal codes
    w[128:256, 128:256] = 0.0  # an all-zero block: scale 1, codes 0
    rows_scale = torch.exp2(torch.randint(-8, 5, (N, 1), generator=g).to(torch.float32))
    x = (torch.randn(N, IN, generator=g) * rows_scale).to(torch.bfloat16).to(torch.float32)
    x[3] = 0.0  # an all-zero row: every block scale 1
    x[7, 128:256] = 0.0  # one all-zero 128-block in a row
    x[10, 200] = 300.0  # an outlier
    x[12, 0] = torch.tensor(-0.0)  # negative zero: code 0x80
    bias = (torch.randn(OUT, generator=g) * 0.1).to(torch.bfloat16).to(torch.float32)

    w_codes, w_scales = quant_weight(w)
    x_codes, x_scales = quant_rows(x)
    wt_codes, wt_scales = transpose_weight(w_codes, w_scales, OUT, IN)
    assert tuple(w_codes.shape) == (OUT, 384) and tuple(w_scales.shape) == (3, 3)
    assert tuple(x_codes.shape) == (N, 384) and tuple(x_scales.shape) == (3, N)
    assert tuple(wt_codes.shape) == (IN, 384) and tuple(wt_scales.shape) == (3, 3)
    if w_scales[1, 1].item() != 1.0 or bool(w_codes[128:256, 128:256].any()):
        problem("blocks: the all-zero block does not have scale 1 and codes 0")
    if int(x_codes[12, 0]) != 0x80:
        problem(f"blocks: x[12, 0] = -0.0 gives code {int(x_codes[12, 0]):#04x}, not 0x80")

    bad = check_block_rule_in_python("w", w, w_codes, w_scales, BLOCK)
    bad += check_block_rule_in_python("x", x, x_codes, x_scales.t().contiguous(), 1)
    if bad:
        problem(f"blocks: {bad} mismatches between torch and the Python rule")

    wd = dequant_weight64(w_codes, w_scales, OUT, IN)
    xd = dequant_rows64(x_codes, x_scales, N, IN)
    out = xd @ wd.t() + bias.to(torch.float64)
    # the transposed weight dequantizes to the transposed matrix
    wtd = dequant_weight64(wt_codes, wt_scales, IN, OUT)
    if not torch.equal(wtd, wd.t()):
        problem("blocks: the transposed weight does not dequantize to the transposed matrix")
    rel = ((wd - w.to(torch.float64)).abs().max() / w.abs().max()).item()
    params = {"OUT": OUT, "IN": IN, "N": N, "seed": SEED + 1, "versions": vers,
              "rule": "per block amax (fp32); scale = amax / 448, inv = 448 / amax (fp32 division); "
                      "codes = (w * inv).to(float8_e4m3fn); zero block: scale 1, codes 0; pad columns code 0",
              "out": "float64: dequant(x) @ dequant(w)^T + bias", "weight_dequant_max_err_over_max": rel}
    save(os.path.join(root, "fp8", "blocks.safetensors"),
         {"w": w, "w_codes": w_codes, "w_scales": w_scales, "wt_codes": wt_codes, "wt_scales": wt_scales,
          "x": x, "x_codes": x_codes, "x_scales": x_scales, "bias": bias, "out": out}, params)
    log.append(f"fp8/blocks: w {OUT}x{IN}, x {N}x{IN}, w scales {w_scales.flatten().tolist()}, "
               f"dequant max err / max |w| {rel:.3g}, |out| max {out.abs().max().item():.4g}, "
               f"Python-rule mismatches {bad}")


# ----------------------------------------------------------------------------------------------------------
# 3. model level


def fp8_forward(base, counter, name):
    """The replacement forward of one projection (an nn.Linear): FP8-emulated base output."""
    import torch
    OUT, IN = base.weight.shape
    w_codes, w_scales = quant_weight(base.weight.detach().to(torch.float32).contiguous())
    wd = dequant_weight64(w_codes, w_scales, OUT, IN)  # float64 [OUT, IN]
    bias = base.bias

    def forward(x, *args, **kwargs):  # nn.Linear.forward takes x alone; anything else would be PEFT's
        if args or kwargs:
            raise TypeError(f"{name}: unexpected base-layer arguments {args} {sorted(kwargs)}")
        counter[name] = counter.get(name, 0) + 1
        lead = x.shape[:-1]
        x2 = x.reshape(-1, x.shape[-1]).to(torch.float32).contiguous()
        x_codes, x_scales = quant_rows(x2)
        xd = dequant_rows64(x_codes, x_scales, x2.shape[0], IN)
        y = (xd @ wd.t()).to(torch.float32)
        if bias is not None:
            y = y + bias.to(torch.float32)
        return y.reshape(*lead, OUT)

    return forward


def patch_fp8(pm, variant, counter):
    """Replaces the forward of every PEFT LoraLayer's base_layer; returns the patched module names."""
    import torch
    from peft.tuners.lora import LoraLayer
    patched = []
    for name, mod in pm.named_modules():
        if not isinstance(mod, LoraLayer):
            continue
        if name.rsplit(".", 1)[-1] not in TARGETS:
            problem(f"{variant}: LoRA on an unexpected module {name}")
        base = mod.get_base_layer() if hasattr(mod, "get_base_layer") else mod.base_layer
        if type(base) is not torch.nn.Linear:
            problem(f"{variant}: {name}'s base layer is a {type(base).__name__}, not nn.Linear")
            continue
        base.forward = fp8_forward(base, counter, name)  # instance attribute: nn.Module.__call__ uses it
        patched.append(name)
    for name, mod in pm.named_modules():
        if isinstance(mod, torch.nn.Linear) and "forward" not in vars(mod) and ".lora_" not in name \
                and not name.endswith("lm_head"):
            problem(f"{variant}: Linear {name} is neither patched nor LoRA A/B nor lm_head")
    return patched


def make_model(root, variant, log, vers):
    import torch
    from peft import PeftModel
    from safetensors.torch import load_file
    import check_adapter

    d = os.path.join(root, "models", variant)
    with open(os.path.join(d, "sequences.json")) as f:
        sequences = json.load(f)["sequences"]
    base = check_adapter.load_base(d)
    pm = PeftModel.from_pretrained(base, os.path.join(d, "adapter")).float().eval()
    with torch.no_grad():
        loss32, logits32, sum32, count32 = make_fixtures.sequence_loss(pm, sequences)
    expected = load_file(os.path.join(d, "expected.safetensors"))
    fp32_err = (logits32 - expected["logits"]).abs().max().item()
    loss_err = abs(loss32.item() - expected["loss"].item())
    if fp32_err > 1e-5 or loss_err > 1e-6:
        problem(f"{variant}: plain fp32 logits differ from expected.safetensors by {fp32_err:.3g} (loss {loss_err:.3g})")

    counter = {}
    patched = patch_fp8(pm, variant, counter)
    n_layers = pm.base_model.model.config.num_hidden_layers
    if len(patched) != len(TARGETS) * n_layers:
        problem(f"{variant}: patched {len(patched)} projections, expected {len(TARGETS) * n_layers}")
    with torch.no_grad():
        loss8, logits8, sum8, count8 = make_fixtures.sequence_loss(pm, sequences)
    for name in patched:
        if counter.get(name, 0) != len(sequences):
            problem(f"{variant}: {name} ran {counter.get(name, 0)} times for {len(sequences)} sequences")
    assert count8 == count32
    moved = (logits8 - logits32).abs().max().item()
    ref = logits32.abs().max().item()
    if not (0 < moved < 0.5 * ref) or not math.isfinite(loss8.item()):
        problem(f"{variant}: FP8 moves the logits by {moved:.3g} (max |fp32 logits| {ref:.3g}): patch not applied?")
    hf_names = [n.replace("base_model.model.", "", 1) for n in patched]
    params = {"variant": variant, "versions": vers, "patched": hf_names,
              "rule": "base output = float32(dequant(quant_rows(x)) @ dequant(quant_weight(W))^T) + bias, "
                      "dequantized values and the product in float64; LoRA path unchanged (unquantized x)",
              "loss": loss8.item(), "fp32_loss": loss32.item(), "num_predicted": count8,
              "max_abs_logits_fp8_vs_fp32": moved, "max_abs_fp32_logits": ref,
              "fp32_vs_expected_max_abs": fp32_err}
    save(os.path.join(d, "fp8_expected.safetensors"),
         {"logits": logits8.to(torch.float32), "loss": loss8.reshape(1).to(torch.float32),
          "loss_sum": sum8.reshape(1).to(torch.float32), "num_predicted": torch.tensor([count8], dtype=torch.int32),
          "fp32.logits": logits32.to(torch.float32), "fp32.loss": loss32.reshape(1).to(torch.float32),
          "fp32.loss_sum": sum32.reshape(1).to(torch.float32)}, params)
    log.append(f"models/{variant}: fp8 loss {loss8.item():.6f} vs fp32 {loss32.item():.6f}; logits moved by "
               f"{moved:.4g} (max |logit| {ref:.4g}); fp32 vs expected.safetensors {fp32_err:.3g}; "
               f"{len(patched)} projections patched")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="fixture root (writes fp8/ and models/{llama,qwen3}/fp8_expected)")
    ap.add_argument("--skip-models", action="store_true", help="only fp8/ (no transformers / peft needed)")
    a = ap.parse_args(argv)
    setup_torch()
    vers = versions()
    log = []
    make_e4m3(a.out, log, vers)
    make_blocks(a.out, log, vers)
    if not a.skip_models:
        for v in MODELS:
            make_model(a.out, v, log, vers)
    print("\n".join(log))
    if PROBLEMS:
        print(f"{len(PROBLEMS)} PROBLEM(S):\n  " + "\n  ".join(PROBLEMS))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
