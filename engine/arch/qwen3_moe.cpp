// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Qwen3MoeForCausalLM (modeling_qwen3_moe): Qwen3's attention; every decoder_sparse_step-th layer not in
// mlp_only_layers has a router (mlp.gate: softmax over the experts, the top num_experts_per_tok, divided
// by their sum when norm_topk_prob) and num_experts SwiGLU experts of moe_intermediate_size (the Hub:
// mlp.experts.N.{gate,up,down}_proj; transformers 5: mlp.experts.gate_up_proj [E, 2F, H] with the gate rows
// first, mlp.experts.down_proj [E, H, F]), the others a dense MLP of intermediate_size.
#include "arch/arch.h"

namespace tandem {

namespace {

void parse(const ConfigFields& r, ModelConfig& c) {
    parse_qwen3_attention(r, c);
    // transformers 5 writes num_experts under its attribute_map alias num_local_experts.
    c.num_experts = r.has("num_experts") ? r.integer("num_experts") : r.integer("num_local_experts");
    c.moe_intermediate_size = r.integer("moe_intermediate_size");
    c.decoder_sparse_step = r.integer("decoder_sparse_step", 1);
    c.moe_renormalize = r.boolean("norm_topk_prob", false);
    if (r.has("mlp_only_layers")) {
        const auto& list = r.raw()["mlp_only_layers"];
        if (!list.is_array())
            r.bad("field 'mlp_only_layers' must be a list of layer indices, found " + ConfigFields::describe(list));
        for (const auto& x : list) {
            const auto l = r.as_int(x, "mlp_only_layers");
            check_range(r, "mlp_only_layers entry", l, 0, c.num_hidden_layers - 1);
            c.mlp_only_layers.push_back(l);
        }
    }
    parse_experts(r, c);
}

LayerSpec layer(const ModelConfig& c, int64_t l) {
    if (!c.is_moe_layer(l)) return dense_layer(c);
    return moe_layer(c, {"mlp.gate", "mlp.experts", "gate_proj", "up_proj", "down_proj"});
}

}  // namespace

extern const Family kQwen3MoeFamily = {"Qwen3MoeForCausalLM", "qwen3_moe", true, 32768, 1e-6, 10000.0, 128, true,
                                       parse, layer};

}  // namespace tandem
