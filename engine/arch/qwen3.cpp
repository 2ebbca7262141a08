// Qwen3ForCausalLM (modeling_qwen3): Llama's block plus a per-head RMSNorm on q and k before RoPE;
// head_dim defaults to 128; attention_bias as Llama's; the window only with use_sliding_window.
#include "arch/arch.h"

namespace tandem {

namespace {

void parse(const ConfigFields& r, ModelConfig& c) {
    c.qk_norm = true;
    c.attention_bias = c.o_proj_bias = r.boolean("attention_bias", false);
    if (r.boolean("use_sliding_window", false)) c.sliding_window = r.integer("sliding_window", 0);
}

LayerSpec layer(const ModelConfig& c, int64_t) { return dense_layer(c); }

}  // namespace

extern const Family kQwen3Family = {"Qwen3ForCausalLM", "qwen3", true, 32768, 1e-6, 10000.0, 128, true, parse, layer};

}  // namespace tandem
