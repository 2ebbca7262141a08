// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Qwen2ForCausalLM (modeling_qwen2): biases on q/k/v always, none on o_proj; head_dim is always
// hidden_size / num_attention_heads; the window only with use_sliding_window.
#include "arch/arch.h"

namespace tandem {

namespace {

void parse(const ConfigFields& r, ModelConfig& c) {
    c.attention_bias = true;
    if (r.boolean("use_sliding_window", false)) c.sliding_window = r.integer("sliding_window", 0);
}

LayerSpec layer(const ModelConfig& c, int64_t) { return dense_layer(c); }

}  // namespace

extern const Family kQwen2Family = {"Qwen2ForCausalLM", "qwen2", true, 32768, 1e-6, 10000.0, 0, false, parse, layer};

}  // namespace tandem
