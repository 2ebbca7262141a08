// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::ModelConfig — a Hugging Face `config.json` of a decoder-only model, parsed and validated.
// Supported for training: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM,
// Phi3ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM (text) — one family file each in engine/arch/, which
// also says what each checkpoint holds.
// Parsed but reported "not yet supported": Qwen3MoeForCausalLM, MixtralForCausalLM, GptOssForCausalLM.
// Defaults for absent fields follow each family's transformers config class (e.g. head_dim defaults to 128
// for Qwen3 but to hidden_size / num_attention_heads for Llama), so a config means here what it means there.
// parameter_count() is the sum over expected_tensors(), so the two can never disagree.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem {

// Yarn: transformers' _compute_yarn_parameters (gpt-oss).
enum class RopeScalingType { None, Linear, Llama3, LongRope, Yarn };

struct RopeScaling {
    RopeScalingType type = RopeScalingType::None;
    double factor = 1.0;
    // llama3 only
    double low_freq_factor = 1.0;
    double high_freq_factor = 4.0;
    int64_t original_max_position_embeddings = 8192;  // llama3, longrope and yarn
    // longrope only (Phi-3): per-frequency divisors [head_dim / 2] for sequences up to / beyond
    // original_max_position_embeddings, and the factor cos and sin are multiplied by
    std::vector<double> short_factor, long_factor;
    double attention_factor = 1.0;
    // yarn only (attention_factor above: its cos / sin factor, from mscale / mscale_all_dim or 0.1 ln(factor) + 1)
    double beta_fast = 32.0;
    double beta_slow = 1.0;
    bool truncate = true;  // the correction range rounded out to whole dimensions
};

// How the base projections (every Linear of the decoder layers) are stored: as float weights, or as 4-bit
// codes in bitsandbytes' layout (kernels/cpu/nf4.h) with LoRA on top (QLoRA). Embeddings, norms and lm_head
// stay float. Set from config.json's quantization_config for a pre-quantized (*-bnb-4bit) checkpoint, or by
// with_quantization() when Tandem quantizes a float checkpoint at load.
struct WeightQuantization {
    bool four_bit = false;           // the projections are 4-bit in memory
    // The base GEMMs run in FP8 E4M3 with one scale per 128x128 block of the weight (RunConfig::precision fp8,
    // with_fp8(); core/fp8.h): float projections are held so from load; with four_bit the projections stay
    // 4-bit and are dequantized straight to FP8 before each GEMM.
    bool fp8 = false;
    bool prequantized = false;       // and the checkpoint already stores them so
    std::string quant_type = "nf4";  // nf4 | fp4 (fp4: pre-quantized checkpoints only)
    bool double_quant = true;        // the per-block absmax is itself quantized to 8 bits
    int blocksize = 64;              // elements per absmax
    // Modules kept in float (llm_int8_skip_modules): a projection is skipped when one of these is a
    // substring of its dotted path ("model.layers.3.mlp.down_proj"), as transformers decides.
    std::vector<std::string> skip_modules;
    // True when the projection at this dotted module path is 4-bit.
    bool quantizes(const std::string& module_path) const;
    bool operator==(const WeightQuantization&) const = default;
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
    bool attention_bias = false;       // q/k/v biases (Qwen2 always; Llama/Qwen3 when attention_bias=true)
    bool o_proj_bias = false;          // o_proj bias (Llama/Qwen3 with attention_bias=true, gpt-oss; never Qwen2)
    bool mlp_bias = false;             // gate/up/down biases (Llama's mlp_bias)
    bool qk_norm = false;              // per-head RMSNorm on q and k (Qwen3)
    std::string hidden_act = "silu";
    int64_t sliding_window = 0;        // 0 = full causal attention. Mistral v0.1: 4096 (each token attends to
                                       // the last sliding_window tokens of its sample, itself included)
    std::vector<int64_t> bos_token_ids;
    std::vector<int64_t> eos_token_ids;
    std::string torch_dtype;           // as written ("bfloat16", "float32", ...) or empty
    // Mixture of experts (Qwen3-MoE, Mixtral, gpt-oss).
    int64_t num_experts = 0;
    int64_t num_experts_per_tok = 0;
    int64_t moe_intermediate_size = 0;   // per expert (= intermediate_size for Mixtral and gpt-oss)
    int64_t decoder_sparse_step = 1;     // Qwen3-MoE: every n-th layer is sparse
    std::vector<int64_t> mlp_only_layers;  // Qwen3-MoE: layers that keep a dense MLP
    bool moe_renormalize = false;        // the chosen experts' weights divided by their sum (Qwen3-MoE's
                                         // norm_topk_prob; always for Mixtral)
    // The load-balancing loss, router_aux_loss_coef * E * sum_e f_e P_e over every MoE layer's tokens, added to
    // the training loss when output_router_logits is true (transformers' switch; off by default, as there).
    bool moe_aux_loss = false;
    double router_aux_loss_coef = 0.001;
    // The checkpoint stores each layer's experts as two 3-D tensors (mlp.experts.gate_up_proj [E, 2F, H],
    // mlp.experts.down_proj [E, H, F], as transformers 5 holds them) instead of one tensor per expert and
    // projection (the Hub's layout). Not in config.json: open_model_dir sets it from the tensor names.
    bool experts_fused = false;
    bool attention_sinks = false;        // gpt-oss: a learned per-head sink logit
    // gpt-oss: its experts' clamped SwiGLU (gate clamped above at swiglu_limit, up to +-swiglu_limit,
    // (up + 1) * gate * sigmoid(1.702 gate)); 7 as transformers fixes it; 0: the plain SwiGLU.
    double swiglu_limit = 0.0;
    // gpt-oss as released: quantization_config quant_method "mxfp4", the experts stored as MXFP4 blocks
    // (*_blocks uint8 + *_scales e8m0); dequantized to 16-bit at load.
    bool experts_mxfp4 = false;
    // Gemma 2 / 3.
    bool norm_one_plus = false;          // RMSNorm weights are stored as w of (1 + w), applied in fp32
    bool sandwich_norms = false;         // post-attention and post-MLP norms before each residual add
    double embed_scale = 1.0;            // embeddings times this (Gemma: sqrt(hidden_size))
    double query_pre_attn_scalar = 0.0;  // attention scale 1/sqrt(this); 0: head_dim
    double attn_logit_softcapping = 0.0;   // scores = cap * tanh(scores / cap) before the mask; 0: none
    double final_logit_softcapping = 0.0;  // logits = cap * tanh(logits / cap); 0: none
    // Per layer: true where the layer attends within sliding_window only (transformers' layer_types
    // "sliding_attention"); empty: every layer uses sliding_window (0 = full causal attention).
    std::vector<bool> sliding_layers;
    double rope_local_theta = 0.0;       // RoPE base of the sliding layers (Gemma 3); 0: the same as every layer

    WeightQuantization quantization;   // how the projections are stored (see above)

    bool supported = false;            // true for the four dense families above
    std::string unsupported_reason;    // why not, when !supported

    // Number of parameters implied by the config (embeddings counted once when tied): the sum of the
    // element counts of expected_tensors(). -1 if it overflows (never for a config that parsed).
    int64_t parameter_count() const;
    // The parameters one token runs through: parameter_count() less the experts it is not routed to
    // (num_experts - num_experts_per_tok per MoE layer); parameter_count() for a dense model.
    int64_t active_parameter_count() const;
    // True when layer `layer` has a mixture-of-experts MLP (false for every layer of a dense model).
    bool is_moe_layer(int64_t layer) const;
    // Attention widths: num_attention_heads * head_dim and num_key_value_heads * head_dim.
    // Channels of each head that RoPE rotates: head_dim, or int(head_dim * partial_rotary_factor) (Phi-4-mini:
    // the first 3/4; the rest pass through), as transformers computes it.
    double partial_rotary_factor = 1.0;
    int64_t rotary_dim() const { return int64_t(double(head_dim) * partial_rotary_factor); }
    int64_t q_dim() const { return num_attention_heads * head_dim; }
    int64_t kv_dim() const { return num_key_value_heads * head_dim; }
    // The attention window of layer `layer` (0 = full causal attention).
    int64_t window_of(int64_t layer) const {
        if (sliding_layers.empty()) return sliding_window;
        return layer >= 0 && size_t(layer) < sliding_layers.size() && sliding_layers[size_t(layer)] ? sliding_window : 0;
    }
};

// Architectures (config.json "architectures"[0]) that parse_model_config accepts.
const std::vector<std::string>& supported_architectures();   // trainable
const std::vector<std::string>& parsed_architectures();      // all accepted, trainable or not

// Parses and validates config.json (a file or a folder containing one). Throws Error{InvalidInput} for
// missing/invalid/absurd fields naming the file and the field, Error{Unsupported} for unknown
// architectures or rope_scaling types. MoE architectures parse with supported=false.
ModelConfig load_model_config(const std::filesystem::path& path);
ModelConfig parse_model_config(const nlohmann::json& json, const std::string& source_name);

// `config` with its projections quantized to 4-bit NF4 at load (blocksize 64, double quantization: what
// QLoRA and bitsandbytes' defaults use). A pre-quantized config is returned unchanged.
ModelConfig with_quantization(ModelConfig config);

// `config` with its base GEMMs in FP8 (precision fp8): float projections held in FP8 from load; 4-bit ones
// (QLoRA, a pre-quantized checkpoint) stay 4-bit and are dequantized straight to FP8 before each GEMM.
ModelConfig with_fp8(ModelConfig config);

// Tensor names and shapes the config implies (HF naming: "model.layers.0.self_attn.q_proj.weight").
struct ExpectedTensor {
    std::string name;
    std::vector<int64_t> shape;
};
std::vector<ExpectedTensor> expected_tensors(const ModelConfig& config);

}  // namespace tandem
