// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Qwen3ForCausalLM (modeling_qwen3): Llama's block plus a per-head RMSNorm on q and k before RoPE;
// head_dim defaults to 128; attention_bias as Llama's; the window only with use_sliding_window.
#include "arch/arch.h"

namespace tandem {

namespace {

LayerSpec layer(const ModelConfig& c, int64_t) { return dense_layer(c); }

}  // namespace

extern const Family kQwen3Family = {"Qwen3ForCausalLM", "qwen3", true, 32768, 1e-6, 10000.0, 128, true,
                                    parse_qwen3_attention, layer};

}  // namespace tandem
