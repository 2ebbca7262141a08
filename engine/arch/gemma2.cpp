// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Gemma2ForCausalLM (modeling_gemma2): Llama's projections in a block with (1 + w) RMSNorms computed in fp32,
// sandwich norms (the attention and MLP outputs are normed before each residual add: post_attention_layernorm,
// post_feedforward_layernorm; the MLP's input norm is pre_feedforward_layernorm), GeGLU with the tanh GELU,
// embeddings times sqrt(hidden_size), attention scale 1/sqrt(query_pre_attn_scalar), soft-capped attention
// scores (cap * tanh(s / cap), before the mask) and final logits, and alternating layers: "sliding_attention"
// (window sliding_window) and "full_attention" (layer_types; by default every even layer slides).
// Embeddings are tied by default.
#include "arch/arch.h"

namespace tandem {

// Shared with Gemma 3 (arch/gemma3.cpp).
void parse_gemma_common(const ConfigFields& r, ModelConfig& c) {
    c.tie_word_embeddings = r.boolean("tie_word_embeddings", true);
    c.attention_bias = c.o_proj_bias = r.boolean("attention_bias", false);
    c.hidden_act = r.string("hidden_activation", "gelu_pytorch_tanh");
    c.norm_one_plus = true;
    c.sandwich_norms = true;
    c.embed_scale = std::sqrt(double(c.hidden_size));
    c.query_pre_attn_scalar = r.number("query_pre_attn_scalar", 256.0);
    if (!(c.query_pre_attn_scalar > 0)) r.bad("query_pre_attn_scalar must be positive");
    c.sliding_window = r.integer("sliding_window", 4096);
    if (r.boolean("use_bidirectional_attention", false)) {
        c.supported = false;
        c.unsupported_reason = "use_bidirectional_attention (an encoder-style Gemma) is not supported";
    }
    if (r.number("attention_dropout", 0.0) != 0.0 && c.supported) {
        c.supported = false;
        c.unsupported_reason = "attention_dropout > 0 is not supported";
    }
}

double softcap(const ConfigFields& r, const char* key, double def) {
    const double v = r.number(key, def);
    if (v < 0) r.bad(std::string(key) + " must not be negative");
    return v;
}

namespace {

void parse(const ConfigFields& r, ModelConfig& c) {
    parse_gemma_common(r, c);
    // Gemma2Config's defaults: 50 and 30; null in a file means none.
    c.attn_logit_softcapping = r.raw().contains("attn_logit_softcapping") ? softcap(r, "attn_logit_softcapping", 0.0)
                                                                          : 50.0;
    c.final_logit_softcapping =
        r.raw().contains("final_logit_softcapping") ? softcap(r, "final_logit_softcapping", 0.0) : 30.0;
    parse_layer_types(r, c, 2);
}

LayerSpec layer(const ModelConfig& c, int64_t) { return sandwich_layer(c); }

}  // namespace

extern const Family kGemma2Family = {"Gemma2ForCausalLM", "gemma2", true, 8192, 1e-6, 10000.0, 256, true, parse, layer};

}  // namespace tandem
