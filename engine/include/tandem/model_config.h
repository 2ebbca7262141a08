// tandem::ModelConfig — a Hugging Face `config.json` of a decoder-only model, parsed and validated.
// Supported for training: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM.
// Parsed but reported "not yet supported": Qwen3MoeForCausalLM, MixtralForCausalLM, GptOssForCausalLM.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem {

enum class RopeScalingType { None, Linear, Llama3 };

struct RopeScaling {
    RopeScalingType type = RopeScalingType::None;
    double factor = 1.0;
    // llama3 only
    double low_freq_factor = 1.0;
    double high_freq_factor = 4.0;
    int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
    std::string architecture;          // e.g. "LlamaForCausalLM" (architectures[0])
    std::string model_type;            // e.g. "llama", "qwen3"
    int64_t hidden_size = 0;
    int64_t intermediate_size = 0;
    int64_t num_hidden_layers = 0;
    int64_t num_attention_heads = 0;
    int64_t num_key_value_heads = 0;
    int64_t head_dim = 0;              // may differ from hidden_size / num_attention_heads (Qwen3)
    int64_t vocab_size = 0;
    int64_t max_position_embeddings = 0;
    double rms_norm_eps = 1e-6;
    double rope_theta = 10000.0;
    RopeScaling rope_scaling;
    bool tie_word_embeddings = false;
    bool attention_bias = false;       // q/k/v biases (Qwen2)
    bool qk_norm = false;              // per-head RMSNorm on q and k (Qwen3)
    std::vector<int64_t> bos_token_ids;
    std::vector<int64_t> eos_token_ids;
    std::string torch_dtype;           // as written ("bfloat16", "float32", ...) or empty
    // Mixture of experts (parsed for MoE architectures, which are not trainable yet).
    int64_t num_experts = 0;
    int64_t num_experts_per_tok = 0;
    int64_t moe_intermediate_size = 0;

    bool supported = false;            // true for the four dense families above
    std::string unsupported_reason;    // why not, when !supported

    // Number of parameters implied by the config (embeddings counted once when tied).
    int64_t parameter_count() const;
};

// Parses and validates config.json (a file or a folder containing one). Throws Error{InvalidInput} for
// missing/invalid/absurd fields naming the file and the field, Error{Unsupported} for unknown
// architectures or rope_scaling types. MoE architectures parse with supported=false.
ModelConfig load_model_config(const std::filesystem::path& path);
ModelConfig parse_model_config(const nlohmann::json& json, const std::string& source_name);

// Tensor names and shapes the config implies (HF naming: "model.layers.0.self_attn.q_proj.weight").
struct ExpectedTensor {
    std::string name;
    std::vector<int64_t> shape;
};
std::vector<ExpectedTensor> expected_tensors(const ModelConfig& config);

}  // namespace tandem
