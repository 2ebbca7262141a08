// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Architecture presets (tandem/arch_presets.h): real config.json contents of a few models, parsed by
// parse_model_config so every derived field (architecture, supported, head_dim defaults, parameter count)
// comes from the same code that reads a downloaded model. Fields that do not change shapes or numerics
// (initializer_range, use_cache, transformers_version, attention_dropout, max_window_layers) are left out.
// Sources: the config.json files of Qwen/Qwen3-0.6B, Qwen/Qwen3-14B, Qwen/Qwen3-30B-A3B, meta-llama/Llama-3.2-1B
// and meta-llama/Llama-3.1-8B on the Hugging Face hub.
#include "tandem/arch_presets.h"

#include "tandem/error.h"

namespace tandem {

namespace {

using json = nlohmann::json;

struct Preset {
    const char* name;
    json (*config)();
};

json qwen3_0_6b() {
    return {
        {"architectures", json::array({"Qwen3ForCausalLM"})},
        {"model_type", "qwen3"},
        {"attention_bias", false},
        {"bos_token_id", 151643},
        {"eos_token_id", 151645},
        {"head_dim", 128},
        {"hidden_act", "silu"},
        {"hidden_size", 1024},
        {"intermediate_size", 3072},
        {"max_position_embeddings", 40960},
        {"num_attention_heads", 16},
        {"num_hidden_layers", 28},
        {"num_key_value_heads", 8},
        {"rms_norm_eps", 1e-6},
        {"rope_scaling", nullptr},
        {"rope_theta", 1000000.0},
        {"sliding_window", nullptr},
        {"use_sliding_window", false},
        {"tie_word_embeddings", true},
        {"torch_dtype", "bfloat16"},
        {"vocab_size", 151936},
    };
}

json llama_3_2_1b() {
    return {
        {"architectures", json::array({"LlamaForCausalLM"})},
        {"model_type", "llama"},
        {"attention_bias", false},
        {"bos_token_id", 128000},
        {"eos_token_id", 128001},
        {"head_dim", 64},
        {"hidden_act", "silu"},
        {"hidden_size", 2048},
        {"intermediate_size", 8192},
        {"max_position_embeddings", 131072},
        {"mlp_bias", false},
        {"num_attention_heads", 32},
        {"num_hidden_layers", 16},
        {"num_key_value_heads", 8},
        {"rms_norm_eps", 1e-5},
        {"rope_scaling",
         {{"factor", 32.0},
          {"high_freq_factor", 4.0},
          {"low_freq_factor", 1.0},
          {"original_max_position_embeddings", 8192},
          {"rope_type", "llama3"}}},
        {"rope_theta", 500000.0},
        {"tie_word_embeddings", true},
        {"torch_dtype", "bfloat16"},
        {"vocab_size", 128256},
    };
}

json llama_3_1_8b() {
    return {
        {"architectures", json::array({"LlamaForCausalLM"})},
        {"model_type", "llama"},
        {"attention_bias", false},
        {"bos_token_id", 128000},
        {"eos_token_id", 128001},
        {"hidden_act", "silu"},
        {"hidden_size", 4096},
        {"intermediate_size", 14336},
        {"max_position_embeddings", 131072},
        {"mlp_bias", false},
        {"num_attention_heads", 32},
        {"num_hidden_layers", 32},
        {"num_key_value_heads", 8},
        {"rms_norm_eps", 1e-5},
        {"rope_scaling",
         {{"factor", 8.0},
          {"high_freq_factor", 4.0},
          {"low_freq_factor", 1.0},
          {"original_max_position_embeddings", 8192},
          {"rope_type", "llama3"}}},
        {"rope_theta", 500000.0},
        {"tie_word_embeddings", false},
        {"torch_dtype", "bfloat16"},
        {"vocab_size", 128256},
    };
}

// Mistral-7B-v0.1 (mistralai/Mistral-7B-v0.1 config.json): a 4096-token sliding window on every layer, so
// samples longer than 4096 tokens exercise the window in both attention paths.
json mistral_7b_v0_1() {
    return {
        {"architectures", json::array({"MistralForCausalLM"})},
        {"model_type", "mistral"},
        {"bos_token_id", 1},
        {"eos_token_id", 2},
        {"hidden_act", "silu"},
        {"hidden_size", 4096},
        {"intermediate_size", 14336},
        {"max_position_embeddings", 32768},
        {"num_attention_heads", 32},
        {"num_hidden_layers", 32},
        {"num_key_value_heads", 8},
        {"rms_norm_eps", 1e-5},
        {"rope_theta", 10000.0},
        {"sliding_window", 4096},
        {"tie_word_embeddings", false},
        {"torch_dtype", "bfloat16"},
        {"vocab_size", 32000},
    };
}

// Not a released model: the smallest Llama that still has GQA (4 query heads share 2 kv heads) and a
// realistic vocabulary, so a smoke test exercises every op in a second.
json tiny_llama() {
    return {
        {"architectures", json::array({"LlamaForCausalLM"})},
        {"model_type", "llama"},
        {"attention_bias", false},
        {"bos_token_id", 1},
        {"eos_token_id", 2},
        {"hidden_act", "silu"},
        {"hidden_size", 256},
        {"intermediate_size", 768},
        {"max_position_embeddings", 4096},
        {"mlp_bias", false},
        {"num_attention_heads", 4},
        {"num_hidden_layers", 2},
        {"num_key_value_heads", 2},
        {"rms_norm_eps", 1e-5},
        {"rope_theta", 10000.0},
        {"tie_word_embeddings", false},
        {"torch_dtype", "bfloat16"},
        {"vocab_size", 32000},
    };
}

// Qwen3-14B (its config.json on the Hub): the QLoRA benchmark's model.
json qwen3_14b() {
    json j = qwen3_0_6b();
    j["hidden_size"] = 5120;
    j["intermediate_size"] = 17408;
    j["num_attention_heads"] = 40;
    j["num_hidden_layers"] = 40;
    j["num_key_value_heads"] = 8;
    j["tie_word_embeddings"] = false;
    return j;
}

// Qwen3-30B-A3B (its config.json on the Hub): the mixture-of-experts benchmark's model. 48 layers, every one
// sparse (decoder_sparse_step 1, mlp_only_layers []): 128 experts of moe_intermediate_size 768, 8 per token,
// their weights renormalised (norm_topk_prob). intermediate_size (6144) would size a dense MLP layer; this
// model has none. output_router_logits false: no load-balancing loss in training (router_aux_loss_coef is
// only read when it is true). About 30.5B parameters, 3.3B active per token.
json qwen3_30b_a3b() {
    return {
        {"architectures", json::array({"Qwen3MoeForCausalLM"})},
        {"model_type", "qwen3_moe"},
        {"attention_bias", false},
        {"bos_token_id", 151643},
        {"decoder_sparse_step", 1},
        {"eos_token_id", 151645},
        {"head_dim", 128},
        {"hidden_act", "silu"},
        {"hidden_size", 2048},
        {"intermediate_size", 6144},
        {"max_position_embeddings", 40960},
        {"mlp_only_layers", json::array()},
        {"moe_intermediate_size", 768},
        {"norm_topk_prob", true},
        {"num_attention_heads", 32},
        {"num_experts", 128},
        {"num_experts_per_tok", 8},
        {"num_hidden_layers", 48},
        {"num_key_value_heads", 4},
        {"output_router_logits", false},
        {"rms_norm_eps", 1e-6},
        {"rope_scaling", nullptr},
        {"rope_theta", 1000000.0},
        {"router_aux_loss_coef", 0.001},
        {"sliding_window", nullptr},
        {"use_sliding_window", false},
        {"tie_word_embeddings", false},
        {"torch_dtype", "bfloat16"},
        {"vocab_size", 151936},
    };
}

// gpt-oss-20b (openai/gpt-oss-20b's config.json on the Hub, without its quantization_config: 16-bit experts, as
// the -BF16 copies on the Hub hold them): 24 layers alternating a 128-token sliding window and full attention,
// 64 query heads of 64 on 8 kv heads (queries 4096 wide on a 2880 residual), every layer a biased router over
// 32 experts of 2880, 4 per token, YaRN x32 over 4096 positions. About 20.9B parameters, 3.6B active per token.
json gpt_oss_20b() {
    json layer_types = json::array();
    for (int l = 0; l < 24; ++l) layer_types.push_back(l % 2 == 0 ? "sliding_attention" : "full_attention");
    return {
        {"architectures", json::array({"GptOssForCausalLM"})},
        {"model_type", "gpt_oss"},
        {"attention_bias", true},
        {"eos_token_id", 200002},
        {"experts_per_token", 4},
        {"head_dim", 64},
        {"hidden_act", "silu"},
        {"hidden_size", 2880},
        {"intermediate_size", 2880},
        {"layer_types", layer_types},
        {"max_position_embeddings", 131072},
        {"num_attention_heads", 64},
        {"num_experts_per_tok", 4},
        {"num_hidden_layers", 24},
        {"num_key_value_heads", 8},
        {"num_local_experts", 32},
        {"output_router_logits", false},
        {"pad_token_id", 199999},
        {"rms_norm_eps", 1e-5},
        {"rope_scaling", {{"beta_fast", 32.0}, {"beta_slow", 1.0}, {"factor", 32.0},
                          {"original_max_position_embeddings", 4096}, {"rope_type", "yarn"}, {"truncate", false}}},
        {"rope_theta", 150000.0},
        {"router_aux_loss_coef", 0.9},
        {"sliding_window", 128},
        {"swiglu_limit", 7.0},
        {"tie_word_embeddings", false},
        {"torch_dtype", "bfloat16"},
        {"vocab_size", 201088},
    };
}

// gpt-oss-20b as released: the same config with its quantization_config (quant_method mxfp4), so the experts
// stay 4-bit on the device (random codes in the benchmarks).
json gpt_oss_20b_mxfp4() {
    json j = gpt_oss_20b();
    j["quantization_config"] = {{"quant_method", "mxfp4"},
                                {"modules_to_not_convert",
                                 json::array({"model.layers.*.self_attn", "model.layers.*.mlp.router",
                                              "model.embed_tokens", "lm_head"})}};
    return j;
}

constexpr Preset kPresets[] = {
    {"qwen3-0.6b", qwen3_0_6b},
    {"llama-3.2-1b", llama_3_2_1b},
    {"llama-3.1-8b", llama_3_1_8b},
    {"mistral-7b-v0.1", mistral_7b_v0_1},
    {"tiny-llama", tiny_llama},
    {"qwen3-14b", qwen3_14b},
    {"qwen3-30b-a3b", qwen3_30b_a3b},
    {"gpt-oss-20b", gpt_oss_20b},
    {"gpt-oss-20b-mxfp4", gpt_oss_20b_mxfp4},
};

const Preset* find_preset(std::string_view name) {
    for (const auto& p : kPresets)
        if (name == p.name) return &p;
    return nullptr;
}

}  // namespace

std::optional<nlohmann::json> architecture_preset_json(std::string_view name) {
    const Preset* p = find_preset(name);
    if (!p) return std::nullopt;
    return p->config();
}

std::optional<ModelConfig> architecture_preset(std::string_view name) {
    const Preset* p = find_preset(name);
    if (!p) return std::nullopt;
    return parse_model_config(p->config(), "preset " + std::string(name));
}

std::vector<std::string> architecture_preset_names() {
    std::vector<std::string> out;
    for (const auto& p : kPresets) out.emplace_back(p.name);
    return out;
}

}  // namespace tandem
