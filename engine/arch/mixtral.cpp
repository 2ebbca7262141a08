// MixtralForCausalLM (modeling_mixtral): Mistral's attention; every layer's MLP is a router
// (block_sparse_moe.gate) over num_local_experts SwiGLU experts stored as w1 (gate), w2 (down), w3 (up).
// Parsed and listed; not trainable yet.
#include "arch/arch.h"

namespace tandem {

namespace {

void parse(const ConfigFields& r, ModelConfig& c) {
    c.sliding_window = r.integer("sliding_window", 0);
    c.num_experts = r.integer("num_local_experts");
    c.moe_intermediate_size = c.intermediate_size;
    parse_experts(r, c);
}

LayerSpec layer(const ModelConfig& c, int64_t) {
    LayerSpec s = dense_layer(c, false);
    const int64_t H = c.hidden_size, Im = c.moe_intermediate_size;
    s.tensors.push_back({"block_sparse_moe.gate.weight", {c.num_experts, H}});
    for (int64_t e = 0; e < c.num_experts; ++e) {
        const std::string x = "block_sparse_moe.experts." + std::to_string(e) + ".";
        s.tensors.push_back({x + "w1.weight", {Im, H}});
        s.tensors.push_back({x + "w2.weight", {H, Im}});
        s.tensors.push_back({x + "w3.weight", {Im, H}});
    }
    return s;
}

}  // namespace

extern const Family kMixtralFamily = {"MixtralForCausalLM", "mixtral", false, 4096 * 32, 1e-5, 1e6, 0, true,
                                      parse, layer};

}  // namespace tandem
