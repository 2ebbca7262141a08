// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Gemma3ForCausalLM (modeling_gemma3, the text model, model_type "gemma3_text"): Gemma 2's block with (1 + w)
// RMSNorms on q and k per head (q_norm, k_norm), no soft-capping by default, five sliding layers to one full
// one (layer_types, or sliding_window_pattern, default 6), and a RoPE per layer type: the full layers use
// rope_theta (default 1e6) with the config's scaling, the sliding layers a plain RoPE with base
// rope_local_base_freq (default 10000) — transformers 5 writes both under rope_parameters.{full,sliding}_attention.
// The multimodal Gemma3ForConditionalGeneration (4B and larger with vision) is a different architecture.
#include "arch/arch.h"

namespace tandem {

void parse_gemma_common(const ConfigFields& r, ModelConfig& c);
double softcap(const ConfigFields& r, const char* key, double def);

namespace {

void parse(const ConfigFields& r, ModelConfig& c) {
    parse_gemma_common(r, c);
    c.qk_norm = true;
    c.attn_logit_softcapping = softcap(r, "attn_logit_softcapping", 0.0);
    c.final_logit_softcapping = softcap(r, "final_logit_softcapping", 0.0);
    if (c.rope_local_theta == 0) c.rope_local_theta = r.number("rope_local_base_freq", 10000.0);
    if (!(c.rope_local_theta > 0)) r.bad("rope_local_base_freq must be positive");
    const int64_t pattern = r.has("sliding_window_pattern") ? r.integer("sliding_window_pattern")
                                                            : r.integer("_sliding_window_pattern", 6);
    check_range(r, "sliding_window_pattern", pattern, 1, 1 << 20);
    parse_layer_types(r, c, pattern);
}

LayerSpec layer(const ModelConfig& c, int64_t) { return sandwich_layer(c); }

}  // namespace

extern const Family kGemma3Family = {"Gemma3ForCausalLM", "gemma3_text", true, 131072, 1e-6, 1000000.0, 256, true,
                                     parse, layer};

}  // namespace tandem
