// Qwen3MoeForCausalLM (modeling_qwen3_moe): Qwen3's attention; every decoder_sparse_step-th layer not in
// mlp_only_layers has a router (mlp.gate) and num_experts SwiGLU experts (mlp.experts.N.*), the others a
// dense MLP. Parsed and listed; not trainable yet.
#include "arch/arch.h"

namespace tandem {

namespace {

void parse(const ConfigFields& r, ModelConfig& c) {
    c.qk_norm = true;
    c.attention_bias = c.o_proj_bias = r.boolean("attention_bias", false);
    if (r.boolean("use_sliding_window", false)) c.sliding_window = r.integer("sliding_window", 0);
    c.num_experts = r.integer("num_experts");
    c.moe_intermediate_size = r.integer("moe_intermediate_size");
    c.decoder_sparse_step = r.integer("decoder_sparse_step", 1);
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
    LayerSpec s = dense_layer(c, false);
    const int64_t H = c.hidden_size, Im = c.moe_intermediate_size;
    s.tensors.push_back({"mlp.gate.weight", {c.num_experts, H}});
    for (int64_t e = 0; e < c.num_experts; ++e) {
        const std::string x = "mlp.experts." + std::to_string(e) + ".";
        s.tensors.push_back({x + "gate_proj.weight", {Im, H}});
        s.tensors.push_back({x + "up_proj.weight", {Im, H}});
        s.tensors.push_back({x + "down_proj.weight", {H, Im}});
    }
    return s;
}

}  // namespace

extern const Family kQwen3MoeFamily = {"Qwen3MoeForCausalLM", "qwen3_moe", false, 32768, 1e-6, 10000.0, 128, true,
                                       parse, layer};

}  // namespace tandem
