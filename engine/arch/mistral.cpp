// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// MistralForCausalLM (modeling_mistral): Llama's block without biases (MistralAttention has none whatever
// the file says), with an optional sliding attention window (v0.1: 4096).
#include "arch/arch.h"

namespace tandem {

namespace {

void parse(const ConfigFields& r, ModelConfig& c) { c.sliding_window = r.integer("sliding_window", 0); }

LayerSpec layer(const ModelConfig& c, int64_t) { return dense_layer(c); }

}  // namespace

extern const Family kMistralFamily = {"MistralForCausalLM", "mistral", true, 4096 * 32, 1e-6, 10000.0, 0, true,
                                      parse, layer};

}  // namespace tandem
