// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// GptOssForCausalLM (modeling_gpt_oss): attention with biases (q/k/v/o) and a learned sink logit per head;
// every layer's MLP is a biased router over experts stored fused (gate_up_proj [E, H, 2I] with interleaved
// gate/up columns, down_proj [E, I, H], with biases). This lists the unquantized (bf16) layout; released
// checkpoints store the experts as MXFP4 "_blocks"/"_scales" tensors. Parsed and listed; not trainable yet.
#include "arch/arch.h"

namespace tandem {

namespace {

void parse(const ConfigFields& r, ModelConfig& c) {
    c.attention_bias = c.o_proj_bias = r.boolean("attention_bias", true);
    c.attention_sinks = true;
    c.sliding_window = r.integer("sliding_window", 0);
    parse_local_experts(r, c);
}

LayerSpec layer(const ModelConfig& c, int64_t) {
    LayerSpec s = dense_layer(c, false);
    const int64_t H = c.hidden_size, Im = c.moe_intermediate_size, E = c.num_experts;
    s.tensors.push_back({"mlp.router.weight", {E, H}});
    s.tensors.push_back({"mlp.router.bias", {E}});
    s.tensors.push_back({"mlp.experts.gate_up_proj", {E, H, 2 * Im}});
    s.tensors.push_back({"mlp.experts.gate_up_proj_bias", {E, 2 * Im}});
    s.tensors.push_back({"mlp.experts.down_proj", {E, Im, H}});
    s.tensors.push_back({"mlp.experts.down_proj_bias", {E, H}});
    return s;
}

}  // namespace

extern const Family kGptOssFamily = {"GptOssForCausalLM", "gpt_oss", false, 131072, 1e-5, 150000.0, 64, true,
                                     parse, layer};

}  // namespace tandem
