// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// GptOssForCausalLM (transformers 5.17 modeling_gpt_oss). What differs from the Llama block:
//  - attention: q/k/v/o with biases; a learned logit per query head ("sinks") joins every row's softmax as one
//    more column whose value is dropped (p_j = exp(s_j) / (sum_i exp(s_i) + exp(sink))); head_dim 64 with
//    query width num_heads * head_dim != hidden_size; even layers slide over sliding_window (128) tokens
//    (layer_types), odd layers attend fully; YaRN RoPE (rope_parameters), rotate-half layout.
//  - every layer's MLP is mixture of experts: router logits = x W^T + b over num_local_experts, the top
//    num_experts_per_tok logits, softmaxed among themselves (the same as softmax over all, renormalised over the
//    chosen); experts fused as gate_up_proj [E, H, 2I] (x @ W: stored in x out) whose output columns alternate
//    gate, up (gate = [..., ::2], up = [..., 1::2]) + gate_up_proj_bias [E, 2I], then the clamped SwiGLU
//    gate = min(gate, limit), up = clamp(up, -limit, limit), (up + 1) * gate * sigmoid(1.702 gate) with
//    limit = 7, then down_proj [E, I, H] + down_proj_bias [E, H], weighted by the routing weight.
//  - released checkpoints store the two expert tensors as MXFP4 (quantization_config quant_method "mxfp4":
//    <name>_blocks uint8 [E, out, in / 32, 16] + <name>_scales uint8 [E, out, in / 32], io/mxfp4.h); Tandem
//    dequantizes them at load (model/expert_layout.h).
// LoRA as PEFT 0.21 does it: target_modules on q/k/v/o, target_parameters on the experts (ParamWrapper with
// in = shape[1], out = shape[2]: lora_A [E*r, H] / lora_B [2I, r*E] for gate_up, whose rows are interleaved
// like the parameter's columns).
#include "arch/arch.h"

namespace tandem {

namespace {

void parse(const ConfigFields& r, ModelConfig& c) {
    c.attention_bias = c.o_proj_bias = r.boolean("attention_bias", true);
    c.attention_sinks = true;
    c.sliding_window = r.integer("sliding_window", 128);
    parse_layer_types(r, c, 2);
    parse_local_experts(r, c);
    c.moe_renormalize = true;  // softmax over the chosen logits
    // transformers 5.17's GptOssExperts fixes limit = 7.0 and alpha = 1.702 (config.json's swiglu_limit, where
    // present, is not read by it either).
    c.swiglu_limit = 7.0;
    if (r.number("attention_dropout", 0.0) != 0.0) {
        c.supported = false;
        c.unsupported_reason = "attention_dropout > 0 is not supported";
    }
}

LayerSpec layer(const ModelConfig& c, int64_t) {
    LayerSpec s = dense_layer(c, false);
    const int64_t H = c.hidden_size, Im = c.moe_intermediate_size, E = c.num_experts;
    MoeSpec& m = s.moe;
    m.experts = E;
    m.top_k = c.num_experts_per_tok;
    m.intermediate = Im;
    m.renormalize = true;
    m.fused = true;
    m.router = "mlp.router.weight";
    m.router_bias = "mlp.router.bias";
    m.gate_up = kExpertsGateUp;
    m.down = kExpertsDown;
    m.expert_bias = m.transposed = m.interleaved = true;
    m.swiglu_limit = c.swiglu_limit;
    s.tensors.push_back({m.router, {E, H}});
    s.tensors.push_back({m.router_bias, {E}});
    s.tensors.push_back({m.gate_up, {E, H, 2 * Im}});
    s.tensors.push_back({m.gate_up + "_bias", {E, 2 * Im}});
    s.tensors.push_back({m.down, {E, Im, H}});
    s.tensors.push_back({m.down + "_bias", {E, H}});
    ProjectionSpec gu = projection(kExpertsGateUp, "mlp.experts", H, 2 * Im, true, {kGate, kUp});
    gu.experts = E;
    gu.transposed = gu.interleaved = true;
    ProjectionSpec dn = projection(kExpertsDown, "mlp.experts", Im, H, true, {kDown});
    dn.experts = E;
    dn.transposed = true;
    s.projections.push_back(gu);
    s.projections.push_back(dn);
    return s;
}

}  // namespace

extern const Family kGptOssFamily = {"GptOssForCausalLM", "gpt_oss", true, 131072, 1e-5, 150000.0, 64, true,
                                     parse, layer};

}  // namespace tandem
