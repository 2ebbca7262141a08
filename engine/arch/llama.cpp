// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// LlamaForCausalLM (transformers' LlamaConfig / modeling_llama): the dense pre-norm block with SwiGLU;
// attention_bias puts biases on q/k/v and o_proj, mlp_bias on gate/up/down.
#include "arch/arch.h"

namespace tandem {

namespace {

void parse(const ConfigFields& r, ModelConfig& c) {
    c.attention_bias = c.o_proj_bias = r.boolean("attention_bias", false);
    c.mlp_bias = r.boolean("mlp_bias", false);
}

LayerSpec layer(const ModelConfig& c, int64_t) { return dense_layer(c); }

}  // namespace

extern const Family kLlamaFamily = {"LlamaForCausalLM", "llama", true, 2048, 1e-6, 10000.0, 0, true, parse, layer};

}  // namespace tandem
