// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// MixtralForCausalLM (modeling_mixtral): Mistral's attention; every layer's MLP is a router
// (block_sparse_moe.gate: softmax, the top num_experts_per_tok divided by their sum) over num_local_experts
// SwiGLU experts of intermediate_size stored as w1 (gate), w2 (down), w3 (up) on the Hub; transformers 5
// holds them fused like Qwen3-MoE (mlp.gate, mlp.experts.gate_up_proj / down_proj).
#include "arch/arch.h"

namespace tandem {

namespace {

void parse(const ConfigFields& r, ModelConfig& c) {
    c.sliding_window = r.integer("sliding_window", 0);
    parse_local_experts(r, c);
    c.moe_renormalize = true;
}

LayerSpec layer(const ModelConfig& c, int64_t) {
    return moe_layer(c, {"block_sparse_moe.gate", "block_sparse_moe.experts", "w1", "w3", "w2"});
}

}  // namespace

extern const Family kMixtralFamily = {"MixtralForCausalLM", "mixtral", true, 4096 * 32, 1e-5, 1e6, 0, true,
                                      parse, layer};

}  // namespace tandem
