// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Phi3ForCausalLM (modeling_phi3; also Phi-4 and Phi-4-mini): Llama's block with fused projections:
// self_attn.qkv_proj [Q + 2 KV, H] holds q, k, v in that row order, mlp.gate_up_proj [2 I, H] holds gate then
// up (`gate, up = gate_up.chunk(2, dim=-1)`); no biases. RoPE may be LongRoPE (rope_scaling type "longrope",
// formerly "su"), read by the shared RoPE parser, and may rotate only part of each head (partial_rotary_factor,
// Phi-4-mini: 0.75; ModelConfig::rotary_dim; its LongRoPE factors then have rotary_dim / 2 entries). What the
// block does not implement is refused with a reason: dropout inside the model (resid_pdrop / embd_pdrop /
// attention_dropout > 0: transformers would apply them while training).
#include "arch/arch.h"

namespace tandem {

namespace {

void parse(const ConfigFields& r, ModelConfig& c) {
    c.sliding_window = r.integer("sliding_window", 0);
    // transformers 5 writes it inside rope_parameters, older files at the top level.
    double partial = r.number("partial_rotary_factor", 1.0);
    if (r.has("rope_parameters") && r.raw()["rope_parameters"].is_object())
        partial = ConfigFields(r.raw()["rope_parameters"], r.src()).number("partial_rotary_factor", partial);
    c.partial_rotary_factor = partial;
    const int64_t head_dim = r.integer("head_dim", c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0);
    const int64_t rot = int64_t(double(head_dim) * partial);
    if (!(partial > 0.0 && partial <= 1.0) || rot < 2 || rot % 2 != 0) {
        c.supported = false;
        c.unsupported_reason = "partial_rotary_factor " + std::to_string(partial) + " gives " + std::to_string(rot) +
                               " rotary channels of head_dim " + std::to_string(head_dim) +
                               "; it must be in (0, 1] and give an even count";
    }
    for (const char* key : {"resid_pdrop", "embd_pdrop", "attention_dropout"})
        if (r.number(key, 0.0) != 0.0 && c.supported) {
            c.supported = false;
            c.unsupported_reason = std::string(key) + " > 0 (dropout inside the model) is not supported; "
                                   "released Phi-3 and Phi-4 configs set it to 0.0";
        }
}

LayerSpec layer(const ModelConfig& c, int64_t) {
    const int64_t H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), I = c.intermediate_size;
    LayerSpec l;
    l.tensors.push_back({"input_layernorm.weight", {H}});
    add_projection(l, projection("qkv_proj", "self_attn.qkv_proj", H, Q + 2 * KV, false, {kQ, kK, kV}));
    add_projection(l, projection("o_proj", "self_attn.o_proj", Q, H, false, {kO}));
    l.tensors.push_back({"post_attention_layernorm.weight", {H}});
    add_projection(l, projection("gate_up_proj", "mlp.gate_up_proj", H, 2 * I, false, {kGate, kUp}));
    add_projection(l, projection("down_proj", "mlp.down_proj", I, H, false, {kDown}));
    return l;
}

}  // namespace

extern const Family kPhi3Family = {"Phi3ForCausalLM", "phi3", true, 4096, 1e-5, 10000.0, 0, true, parse, layer};

}  // namespace tandem
