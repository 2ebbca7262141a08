#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""HF PEFT baseline for `tandem-cli bench`: the same architecture, LoRA and optimizer in transformers + PEFT.

    python3 bench/hf_peft_baseline.py --config llama-3.2-1b [--layers N] [--batch 8] [--seq-len 2048] [--steps 20]
        [--warmup 3] [--gc on|off] [--rank 16] [--alpha 32] [--sync-steps 2] [--json FILE]

What it does, so the numbers compare with tandem-cli bench:
  - The model is built from the same config.json fields as engine/model/arch_presets.cpp (CONFIGS below;
    change both together), random init, bf16 weights, attn_implementation "sdpa", built directly on the GPU.
    Offline: nothing is downloaded. --layers N builds N decoder layers (num_hidden_layers; 0: the preset's), as
    `tandem-cli bench --layers N` does.
  - LoRA r=16 alpha=32 dropout 0 on all seven projections via peft.get_peft_model with PEFT's defaults, so the
    adapter dtype is whatever PEFT picks for a bf16 base (reported as "lora_dtype": PEFT >= 0.12 upcasts adapter
    weights to fp32 by default, autocast_adapter_dtype=True).
  - Mixture of experts (qwen3-30b-a3b): the experts run through transformers 5's grouped GEMM backend
    (experts_implementation "grouped_mm": tokens sorted by expert, torch's grouped_mm), requested at build time
    and checked afterwards; what is in effect, and how it was set or why not, goes to the JSON
    ("experts_implementation", "experts_implementation_note"). LoRA as Tandem's default targets resolve for an
    MoE model: target_modules q/k/v/o_proj plus target_parameters mlp.experts.gate_up_proj and
    mlp.experts.down_proj (PEFT's ParamWrapper: one rank-r LoRA per expert and parameter; no dropout there).
  - Host syncs: after the timed steps (and the memory readings), --sync-steps more steps run under
    torch.cuda.set_sync_debug_mode("warn"); every "synchronizing CUDA operation" warning (the warnings module,
    backward's included) is counted: "host_syncs_per_step" = count / steps (null when torch cannot tell). It
    sees the syncs torch itself knows of (.item(), nonzero, blocking copies, stream/event waits), not those a
    library makes inside its own calls; the harness's own synchronize() and loss.item() are outside the count.
  - A step: forward with labels = input ids (the model shifts them: 2047 predicted tokens per row, as in
    Tandem's packed samples), backward, clip_grad_norm_(1.0), torch.optim.AdamW(fused=True, lr 1e-4,
    weight_decay 0) on the LoRA parameters, zero_grad. Gradient checkpointing (--gc on) uses
    use_reentrant=False. Batches are --batch rows of --seq-len random tokens, a few distinct ones cycled.
  - Step time: perf_counter between torch.cuda.synchronize() calls; forward / backward / optimizer split from
    CUDA events. tokens/s = batch * seq_len / mean step time.
  - Memory: torch.cuda.max_memory_reserved / max_memory_allocated over the whole run (weights included),
    and device used (mem_get_info total - free, includes the CUDA context) after the timed steps.
  - Out of memory prints {"oom": true, ...} instead of a traceback (exit code 0, so a sweep goes on).
  - --search-longest CAP (long context): the model is built once, then one sample of 1024 tokens, doubled until
    a step runs out of memory (or CAP), then 3 halvings of the gap (multiples of 256), one untimed step each
    (out of memory caught, gradients and the allocator's cache dropped before the next try); the longest that
    trained then runs --warmup + --steps steps as usual: "longest_trained", "oom_at" and "tries" in the JSON.
  - Several GPUs: started by torchrun (WORLD_SIZE > 1), each process takes the GPU LOCAL_RANK, builds the same
    model (same seed), wraps the PEFT model in DistributedDataParallel (NCCL; gradients all-reduced in buckets
    during the backward, overlapped) and runs --batch rows of its own per step: a step is world x batch rows,
    tokens/s = world * batch * seq_len / mean step time (rank 0's clock; the ranks meet in every step's
    all-reduce). Only rank 0 prints and writes the JSON ("world_size"); memory figures are rank 0's. The host
    sync count is skipped (--sync-steps 0): DDP's own waits would be counted with the model's.
JSON goes to stdout (and to --json FILE).
"""
import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
import peft  # noqa: E402
from packaging import version  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402

# The config.json fields of engine/model/arch_presets.cpp (shapes and numerics only).
CONFIGS = {
    "qwen3-0.6b": {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "attention_bias": False,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "head_dim": 128,
        "hidden_act": "silu",
        "hidden_size": 1024,
        "intermediate_size": 3072,
        "max_position_embeddings": 40960,
        "num_attention_heads": 16,
        "num_hidden_layers": 28,
        "num_key_value_heads": 8,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "use_sliding_window": False,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        "vocab_size": 151936,
    },
    "llama-3.2-1b": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "attention_bias": False,
        "bos_token_id": 128000,
        "eos_token_id": 128001,
        "head_dim": 64,
        "hidden_act": "silu",
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "max_position_embeddings": 131072,
        "mlp_bias": False,
        "num_attention_heads": 32,
        "num_hidden_layers": 16,
        "num_key_value_heads": 8,
        "rms_norm_eps": 1e-5,
        "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "rope_theta": 500000.0,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        "vocab_size": 128256,
    },
    "llama-3.1-8b": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "attention_bias": False,
        "bos_token_id": 128000,
        "eos_token_id": 128001,
        "hidden_act": "silu",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "max_position_embeddings": 131072,
        "mlp_bias": False,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "rms_norm_eps": 1e-5,
        "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "vocab_size": 128256,
    },
    # Qwen3-30B-A3B: 48 layers, each a router over 128 experts (8 per token, renormalised) of width 768.
    # rope_scaling / sliding_window (null in the Hub's file) are left to the defaults, as for qwen3-0.6b.
    "qwen3-30b-a3b": {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "attention_bias": False,
        "bos_token_id": 151643,
        "decoder_sparse_step": 1,
        "eos_token_id": 151645,
        "head_dim": 128,
        "hidden_act": "silu",
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "max_position_embeddings": 40960,
        "mlp_only_layers": [],
        "moe_intermediate_size": 768,
        "norm_topk_prob": True,
        "num_attention_heads": 32,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "num_hidden_layers": 48,
        "num_key_value_heads": 4,
        "output_router_logits": False,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "router_aux_loss_coef": 0.001,
        "use_sliding_window": False,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "vocab_size": 151936,
    },
    # gpt-oss-20b (the Hub's config.json without its MXFP4 quantization_config: random bf16 weights).
    "gpt-oss-20b": {
        "architectures": ["GptOssForCausalLM"],
        "model_type": "gpt_oss",
        "attention_bias": True,
        "eos_token_id": 200002,
        "head_dim": 64,
        "hidden_act": "silu",
        "hidden_size": 2880,
        "intermediate_size": 2880,
        "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(24)],
        "max_position_embeddings": 131072,
        "num_attention_heads": 64,
        "num_experts_per_tok": 4,
        "num_hidden_layers": 24,
        "num_key_value_heads": 8,
        "num_local_experts": 32,
        "output_router_logits": False,
        "rms_norm_eps": 1e-5,
        "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096,
                         "rope_type": "yarn", "truncate": False},
        "rope_theta": 150000.0,
        "router_aux_loss_coef": 0.9,
        "sliding_window": 128,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "vocab_size": 201088,
    },
    "tiny-llama": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "attention_bias": False,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_act": "silu",
        "hidden_size": 256,
        "intermediate_size": 768,
        "max_position_embeddings": 4096,
        "mlp_bias": False,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "vocab_size": 32000,
    },
}

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
# An MoE model: what Tandem's default targets resolve to (model/lora_table.cpp, resolve_lora_targets).
MOE_TARGET_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj"]
MOE_TARGET_PARAMETERS = ["mlp.experts.gate_up_proj", "mlp.experts.down_proj"]
EXPERTS_IMPLEMENTATION = "grouped_mm"
GIB = float(1 << 30)


def is_moe(name):
    return CONFIGS[name].get("num_experts", CONFIGS[name].get("num_local_experts", 0)) > 0


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", required=True, choices=sorted(CONFIGS))
    p.add_argument("--layers", type=int, default=0, help="decoder layers (num_hidden_layers; 0: the preset's)")
    p.add_argument("--batch", type=int, default=8, help="rows per step")
    p.add_argument("--seq-len", type=int, default=2048, help="tokens per row")
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--gc", choices=["on", "off"], default="on", help="gradient checkpointing")
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--alpha", type=float, default=32.0)
    p.add_argument("--attn", default="sdpa", help="attn_implementation (sdpa unless you know better)")
    p.add_argument("--json", help="also write the JSON result to this file")
    p.add_argument("--sync-steps", type=int, default=2,
                   help="steps after the timed ones that count host syncs (set_sync_debug_mode); 0: do not count")
    p.add_argument("--vram-budget", type=float, default=0.0,
                   help="GiB: torch.cuda.set_per_process_memory_fraction so the caching allocator stops there")
    p.add_argument("--load-in-4bit", action="store_true",
                   help="QLoRA: every decoder Linear replaced by bitsandbytes' Linear4bit (nf4, double quantization, "
                        "blocksize 64, compute bf16), quantized from the random bf16 weights; needs bitsandbytes")
    p.add_argument("--search-longest", type=int, default=0, metavar="CAP",
                   help="the longest single sample (batch 1) that trains, up to CAP tokens (see the header)")
    a = p.parse_args()
    if a.batch < 1 or a.seq_len < 2 or a.steps < 1 or a.warmup < 0 or a.layers < 0 or a.sync_steps < 0:
        p.error("--batch >= 1, --seq-len >= 2, --steps >= 1, --warmup >= 0, --layers >= 0 and --sync-steps >= 0 "
                "are required")
    return a


def config_fields(name, layers):
    fields = dict(CONFIGS[name])
    if layers > 0:
        fields["num_hidden_layers"] = layers
        if "layer_types" in fields:  # one entry per layer (gpt-oss): the first ones kept
            fields["layer_types"] = fields["layer_types"][:layers]
    return fields


def experts_implementation_of(model):
    """The experts backend in effect (transformers 5: get_experts_implementation / config._experts_implementation),
    None when this transformers has no such notion."""
    getter = getattr(model, "get_experts_implementation", None)
    if callable(getter):
        try:
            return getter().get("")
        except Exception:  # noqa: BLE001
            pass
    return getattr(model.config, "_experts_implementation", None)


def build_model(name, attn, layers, info):
    """The model on the GPU in bf16. For an MoE config, experts_implementation "grouped_mm" is asked for at build
    time (from_config's experts_implementation argument), else set afterwards (set_experts_implementation);
    info gets what is in effect and how."""
    fields = config_fields(name, layers)
    model_type = fields.pop("model_type")
    config = AutoConfig.for_model(model_type, **fields)
    config.use_cache = False
    # transformers >= 4.56 calls it dtype; torch_dtype is the older (now deprecated) spelling.
    dtype_kw = "dtype" if version.parse(transformers.__version__) >= version.parse("4.56") else "torch_dtype"
    kwargs = {"attn_implementation": attn, dtype_kw: torch.bfloat16}
    if not is_moe(name):
        with torch.device("cuda"):
            return AutoModelForCausalLM.from_config(config, **kwargs)
    notes = []
    model = None
    try:
        with torch.device("cuda"):
            model = AutoModelForCausalLM.from_config(config, experts_implementation=EXPERTS_IMPLEMENTATION, **kwargs)
        notes.append(f"from_config(experts_implementation={EXPERTS_IMPLEMENTATION!r})")
    except (TypeError, ValueError, ImportError) as e:  # an older transformers, or grouped_mm cannot dispatch here
        notes.append(f"from_config(experts_implementation={EXPERTS_IMPLEMENTATION!r}) refused: "
                     f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}")
        model = None
    if model is None:
        import gc
        gc.collect()  # whatever the refused build allocated
        torch.cuda.empty_cache()
        with torch.device("cuda"):
            model = AutoModelForCausalLM.from_config(config, **kwargs)
        notes.append(f"built with the default ({experts_implementation_of(model)!r})")
    if experts_implementation_of(model) != EXPERTS_IMPLEMENTATION and callable(
            getattr(model, "set_experts_implementation", None)):
        try:
            model.set_experts_implementation(EXPERTS_IMPLEMENTATION)
            notes.append(f"set_experts_implementation({EXPERTS_IMPLEMENTATION!r})")
        except Exception as e:  # noqa: BLE001
            notes.append(f"set_experts_implementation({EXPERTS_IMPLEMENTATION!r}) refused: {type(e).__name__}: "
                         f"{str(e).splitlines()[0][:300] if str(e) else ''}")
    active = experts_implementation_of(model)
    if active != EXPERTS_IMPLEMENTATION:
        notes.append(f"FALLBACK: {active!r} is in effect, not {EXPERTS_IMPLEMENTATION!r}")
    info["experts_implementation"] = active
    info["experts_implementation_requested"] = EXPERTS_IMPLEMENTATION
    info["experts_implementation_note"] = "; ".join(notes)
    print(f"hf_peft_baseline.py: experts implementation in effect: {active!r} ({'; '.join(notes)})", file=sys.stderr)
    return model


def count_host_syncs(step, steps):
    """Host syncs per step as torch reports them (set_sync_debug_mode("warn"): one warning per synchronizing
    operation, recorded through the warnings module) over `steps` calls of step(i); (None, why) if unavailable."""
    import warnings
    if steps <= 0:
        return None, "not counted (--sync-steps 0)"
    if not hasattr(torch.cuda, "set_sync_debug_mode"):
        return None, "torch.cuda.set_sync_debug_mode is missing"
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for i in range(steps):
                step(i)
        finally:
            torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    n = sum(1 for w in caught if "synchroniz" in str(w.message))
    return n / steps, f"set_sync_debug_mode('warn') warnings over {steps} untimed steps after the timed ones"


def quantize_4bit(model):
    """Every nn.Linear inside the decoder layers -> bnb.nn.Linear4bit holding the same weights in NF4 (what
    from_pretrained(quantization_config=BitsAndBytesConfig(load_in_4bit, nf4, double quant)) builds)."""
    import bitsandbytes as bnb
    for layer in model.model.layers:
        for parent in list(layer.modules()):
            for name, child in list(parent.named_children()):
                if type(child) is not torch.nn.Linear:
                    continue
                q = bnb.nn.Linear4bit(child.in_features, child.out_features, bias=child.bias is not None,
                                      compute_dtype=torch.bfloat16, compress_statistics=True, quant_type="nf4",
                                      device="meta")
                q.weight = bnb.nn.Params4bit(child.weight.data.to("cpu"), requires_grad=False, quant_type="nf4",
                                             compress_statistics=True, blocksize=64).to("cuda")
                if child.bias is not None:
                    q.bias = torch.nn.Parameter(child.bias.data, requires_grad=False)
                setattr(parent, name, q)
        torch.cuda.empty_cache()
    return model


def emit(result, path):
    text = json.dumps(result, indent=2)
    print(text)
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text + "\n")


def run(a, result):
    model, params, opt = setup(a, result)
    vocab = CONFIGS[a.config]["vocab_size"]
    if a.search_longest > 0:
        a.batch = 1
        a.seq_len = search_longest(a, result, model, params, opt, vocab)
        result.update({"batch": 1, "seq_len": a.seq_len, "batch_tokens": a.seq_len})
        if a.seq_len == 0:
            result.update({"oom": True, "error": "not even 1024 tokens train"})
            return
    timed_steps(a, result, model, params, opt, vocab)


def one_step(model, params, opt, ids, ev=None):
    if ev:
        ev[0].record()
    loss = model(input_ids=ids, labels=ids).loss
    if ev:
        ev[1].record()
    loss.backward()
    if ev:
        ev[2].record()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    if ev:
        ev[3].record()
    return loss


def search_longest(a, result, model, params, opt, vocab):
    import gc
    tries = []

    def fits(n):
        ids = torch.randint(0, vocab, (1, n), device="cuda")
        ok = True
        try:
            one_step(model, params, opt, ids).item()
            torch.cuda.synchronize()
        except torch.cuda.OutOfMemoryError:
            ok = False
        if not ok:  # outside the except block: the traceback's frames (and their tensors) are gone by now
            opt.zero_grad(set_to_none=True)
            gc.collect()
            torch.cuda.empty_cache()
        tries.append({"tokens": n, "trained": ok})
        print(f"search: {n} tokens {'trained' if ok else 'out of memory'}", file=sys.stderr, flush=True)
        return ok

    lo, hi, n = 0, 0, 1024
    while n <= a.search_longest:
        if fits(n):
            lo, n = n, n * 2
        else:
            hi = n
            break
    if lo > 0 and hi == 0 and lo < a.search_longest:  # doubling passed the cap: the cap itself
        if fits(a.search_longest):
            lo = a.search_longest
        else:
            hi = a.search_longest
    if lo > 0 and hi > 0:
        for _ in range(3):
            mid = (lo + hi) // 2 // 256 * 256
            if mid <= lo:
                break
            if fits(mid):
                lo = mid
            else:
                hi = mid
    result.update({"search_cap": a.search_longest, "longest_trained": lo, "oom_at": hi or None, "tries": tries})
    torch.cuda.reset_peak_memory_stats()
    return lo


def setup(a, result):
    torch.manual_seed(0)
    if a.vram_budget > 0:
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, a.vram_budget * 2**30 / total))
        result["vram_budget_gib"] = a.vram_budget
    model = build_model(a.config, a.attn, a.layers, result)
    result["parameters"] = sum(p.numel() for p in model.parameters())  # tied embeddings counted once
    result["load_in_4bit"] = a.load_in_4bit
    if a.load_in_4bit:
        model = quantize_4bit(model)
        torch.cuda.reset_peak_memory_stats()
    if a.gc == "on":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if is_moe(a.config):
        lora = peft.LoraConfig(r=a.rank, lora_alpha=a.alpha, lora_dropout=0.0, target_modules=MOE_TARGET_MODULES,
                               target_parameters=MOE_TARGET_PARAMETERS, bias="none", task_type="CAUSAL_LM")
        result["lora_targets"] = MOE_TARGET_MODULES + MOE_TARGET_PARAMETERS
    else:
        lora = peft.LoraConfig(r=a.rank, lora_alpha=a.alpha, lora_dropout=0.0, target_modules=TARGETS, bias="none",
                               task_type="CAUSAL_LM")
        result["lora_targets"] = TARGETS
    model = peft.get_peft_model(model, lora)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    world = int(os.environ.get("WORLD_SIZE", "1"))
    result["world_size"] = world
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[torch.cuda.current_device()])
    result["lora_parameters"] = sum(p.numel() for p in params)
    result["lora_dtype"] = str(params[0].dtype).replace("torch.", "")
    result["lora_dtypes"] = sorted({str(p.dtype).replace("torch.", "") for p in params})
    opt = torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, fused=True)
    return model, params, opt


def timed_steps(a, result, model, params, opt, vocab):
    world = int(os.environ.get("WORLD_SIZE", "1"))
    gen = torch.Generator(device="cuda").manual_seed(1000 + int(os.environ.get("RANK", "0")))
    batches = [torch.randint(0, vocab, (a.batch, a.seq_len), device="cuda", generator=gen)
               for _ in range(min(a.steps + a.warmup, 4))]

    def train_step(ids, ev=None):
        return one_step(model, params, opt, ids, ev)

    step_ms, fwd_ms, bwd_ms, opt_ms, losses = [], [], [], [], []
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
    for s in range(a.warmup + a.steps):
        ids = batches[s % len(batches)]
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = train_step(ids, ev)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        losses.append(loss.item())
        if s < a.warmup:
            continue
        step_ms.append((t1 - t0) * 1e3)
        fwd_ms.append(ev[0].elapsed_time(ev[1]))
        bwd_ms.append(ev[1].elapsed_time(ev[2]))
        opt_ms.append(ev[2].elapsed_time(ev[3]))

    free_b, total_b = torch.cuda.mem_get_info()
    step = statistics.mean(step_ms)
    result.update({
        "oom": False,
        "tokens_per_s": world * a.batch * a.seq_len / (step * 1e-3),
        "tokens_per_step": world * a.batch * a.seq_len,
        "steps_per_s": 1e3 / step,
        "step_ms": {"mean": step, "median": statistics.median(step_ms), "min": min(step_ms), "max": max(step_ms)},
        "forward_ms": statistics.mean(fwd_ms),
        "backward_ms": statistics.mean(bwd_ms),
        "optimizer_ms": statistics.mean(opt_ms),
        "peak_reserved_gib": torch.cuda.max_memory_reserved() / GIB,
        "peak_allocated_gib": torch.cuda.max_memory_allocated() / GIB,
        "device_used_gib": (total_b - free_b) / GIB,
        "loss_first": losses[0],
        "loss_last": losses[-1],
    })
    # Counted after the timed steps and the memory readings, so neither is disturbed by the debug mode.
    syncs, how = count_host_syncs(lambda i: train_step(batches[i % len(batches)]), a.sync_steps if world == 1 else 0)
    result["host_syncs_per_step"] = syncs
    result["host_syncs_method"] = how


def main():
    a = parse_args()
    if not torch.cuda.is_available():
        sys.exit("hf_peft_baseline.py: no CUDA device")
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:  # torchrun: one process per GPU
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        torch.distributed.init_process_group("nccl")
    result = {
        "system": "hf-peft",
        "config": a.config,
        "layers": config_fields(a.config, a.layers)["num_hidden_layers"],
        "layers_preset": CONFIGS[a.config]["num_hidden_layers"],
        "experts": CONFIGS[a.config].get("num_experts", 0),
        "experts_per_token": CONFIGS[a.config].get("num_experts_per_tok", 0),
        "gc": a.gc,
        "device": torch.cuda.get_device_name(),
        "batch": a.batch,
        "seq_len": a.seq_len,
        "batch_tokens": a.batch * a.seq_len,
        "warmup": a.warmup,
        "steps": a.steps,
        "lora_r": a.rank,
        "lora_alpha": a.alpha,
        "attn_implementation": a.attn,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "peft": peft.__version__, "cuda": torch.version.cuda},
    }
    try:
        run(a, result)
    except torch.cuda.OutOfMemoryError as e:
        result.update({"oom": True, "error": str(e).split("\n")[0][:400],
                       "peak_reserved_gib": torch.cuda.max_memory_reserved() / GIB,
                       "peak_allocated_gib": torch.cuda.max_memory_allocated() / GIB})
    if not distributed or torch.distributed.get_rank() == 0:
        emit(result, a.json)
    if distributed:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
