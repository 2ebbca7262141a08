// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Architectures as data. Each family (one file in arch/: llama.cpp, mistral.cpp, qwen2.cpp, qwen3.cpp,
// phi3.cpp, and the parsed-only mixture-of-experts families) says how its config.json reads and what its
// checkpoint holds; everything else is derived from the ArchSpec it produces: the expected tensors and the
// parameter count (io/model_config.cpp), the LoRA targets a model offers and their PEFT names
// (model/lora_table.cpp, export/peft_adapter.cpp), the weight pieces of the memory plan (model/plan.cpp).
// Decisions a reader must know:
//  - The trainable block is the dense pre-norm block of model/decoder.h with seven projection slots
//    (LoraModule). A family maps its checkpoint tensors onto the slots: one projection per slot (Llama), or a
//    fused projection feeding several slots with its rows in slot order (Phi-3 qkv_proj -> q, k, v;
//    gate_up_proj -> gate, up). A fused projection is one weight piece; the slots point at row offsets in it.
//  - A LoRA target is a projection as the checkpoint (and PEFT) names it. On a fused projection one lora_A is
//    shared by the slots and lora_B's rows split like the weight's, which is exactly PEFT's LoRA on the fused
//    Linear; its dropout mask is drawn once (the key of its first slot).
//  - Tensor lists are in file order (HF's state_dict order); names relative to "model.layers.N." in a layer.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "arch/config_fields.h"
#include "tandem/model_config.h"

namespace tandem {

// The seven projection slots of the dense block, in block order; the index is the module id both backends
// use for the LoRA lookup, the dropout hash and the plan's piece names.
enum LoraModule { kQ = 0, kK, kV, kO, kGate, kUp, kDown, kNumModules };
extern const char* const kModuleNames[kNumModules];  // "q_proj", ..., "down_proj"

// One linear layer of a block as the checkpoint stores it: weight [out, in] (+ bias [out]).
struct ProjectionSpec {
    std::string target;      // LoRA target and PEFT module name: "q_proj", or a fused "qkv_proj"
    std::string path;        // under "model.layers.N.": "self_attn.q_proj"
    int64_t in = 0, out = 0;
    bool bias = false;
    std::vector<int> feeds;  // the block slots its rows feed, in row order (empty: not in the dense block)
    // A mixture-of-experts layer's experts: one [experts, out, in] parameter (transformers 5's 3-D
    // gate_up_proj / down_proj), adapted the way PEFT's target_parameters adapts it (per expert A and B).
    // target is then PEFT's target_parameters entry ("mlp.experts.gate_up_proj") and path the module
    // ("mlp.experts"); 0: an ordinary linear layer.
    int64_t experts = 0;
    // gpt-oss's experts: the parameter is stored [experts, in, out] (transposed), and gate_up_proj's outputs
    // alternate gate, up, gate, up, ... (interleaved: PEFT's lora_B rows too); the decoder holds [E, out, in]
    // with the gate rows first.
    bool transposed = false, interleaved = false;

    bool operator==(const ProjectionSpec&) const = default;
};

// How an MoE layer's router and experts are stored. The decoder holds every layer's experts fused
// ([E, 2F, H] gate then up rows per expert, [E, H, F] down) whichever layout the checkpoint has.
struct MoeSpec {
    int64_t experts = 0;          // 0: the layer's MLP is dense
    int64_t top_k = 0;
    int64_t intermediate = 0;     // per expert
    bool renormalize = false;     // the chosen weights divided by their sum
    std::string router;           // the router's tensor: "mlp.gate.weight"
    bool fused = false;           // checkpoint layout: fused 3-D tensors, or one tensor per expert
    std::string gate_up, down;    // fused: "mlp.experts.gate_up_proj", "mlp.experts.down_proj"
    std::string per_expert;       // per expert: "mlp.experts" (+ ".N.")
    std::string gate, up, down_name;  // per expert: "gate_proj", "up_proj", "down_proj" (Mixtral: w1, w3, w2)
    // gpt-oss: the router's bias ("mlp.router.bias"; "" = none), the experts' biases (gate_up + "_bias" [E, 2F]
    // interleaved like the columns, down + "_bias" [E, H]), the fused tensors stored [E, in, out] with gate / up
    // columns interleaved, and the clamped SwiGLU's limit (0: plain SwiGLU; ModelConfig::swiglu_limit).
    std::string router_bias;
    bool expert_bias = false, transposed = false, interleaved = false;
    double swiglu_limit = 0.0;

    bool operator==(const MoeSpec&) const = default;
};

struct LayerSpec {
    std::vector<ProjectionSpec> projections;  // the layer's LoRA-able linears, block order
    std::vector<ExpectedTensor> tensors;      // every tensor of the layer in file order (names relative)
    // The block's norms by checkpoint name: before attention, before the MLP, and (sandwich norms, Gemma)
    // on the attention / MLP outputs before each residual add ("" = none).
    std::string ln1 = "input_layernorm", ln2 = "post_attention_layernorm", attn_out_norm, mlp_out_norm;
    MoeSpec moe;  // experts > 0: the MLP is a router over experts (projections then end with the two experts')
};

struct ArchSpec {
    std::string architecture;
    std::vector<LayerSpec> layers;
    std::vector<ExpectedTensor> head, tail;  // before the layers (embeddings) and after (final norm, lm_head)

    std::vector<ExpectedTensor> tensors() const;   // full names, file order
    std::vector<std::string> lora_targets() const; // every projection target of any layer, block order
};

// A family: how its config.json reads (defaults as in its transformers config class) and what it holds.
struct Family {
    const char* architecture;  // "LlamaForCausalLM"
    const char* model_type;    // "llama"
    bool trainable;            // false: parsed and listed, refused for training
    int64_t max_position_embeddings;  // defaults for absent fields
    double rms_norm_eps;
    double rope_theta;
    int64_t head_dim;          // 0 = hidden_size / num_attention_heads
    bool reads_head_dim;       // the config may set head_dim (Qwen2's cannot)
    // The family's own fields (biases, windows, experts, ...), after the shared ones are read.
    void (*parse)(const ConfigFields& r, ModelConfig& c);
    // Layer l's tensors and projections.
    LayerSpec (*layer)(const ModelConfig& c, int64_t l);
};

std::span<const Family* const> families();
const Family* find_family(std::string_view architecture);  // nullptr when unknown

// The model's architecture as data (Error{Internal} for an architecture no family produces: a ModelConfig
// only exists for parsed ones).
ArchSpec arch_spec(const ModelConfig& c);

// Helpers for the family files.
// The dense Llama-family layer: input norm, q/k/v/o (the config's biases), q/k norms (qk_norm), sinks
// (attention_sinks), post-attention norm, then the MLP unless `mlp` is false (an MoE layer adds its own).
LayerSpec dense_layer(const ModelConfig& c, bool mlp = true);
ProjectionSpec projection(std::string target, std::string path, int64_t in, int64_t out, bool bias,
                          std::vector<int> feeds);
// Gemma's layer: dense_layer plus the sandwich norms (pre_feedforward_layernorm is the MLP's input norm,
// post_attention_layernorm and post_feedforward_layernorm the output norms).
LayerSpec sandwich_layer(const ModelConfig& c);
// transformers' layer_types ("sliding_attention" / "full_attention" per layer) into c.sliding_layers, or
// when absent: sliding where (layer + 1) % pattern != 0.
void parse_layer_types(const ConfigFields& r, ModelConfig& c, int64_t pattern);
// gpt-oss's layer: biased attention with sinks, a biased router (mlp.router) and the fused experts as
// transformers stores them (arch/gpt_oss.cpp).
// Appends the projection and its weight (+ bias) tensors.
void add_projection(LayerSpec& l, ProjectionSpec p);
// The mixture-of-experts fields every MoE family shares (top-k and the range checks), after the family read
// num_experts and moe_intermediate_size.
void parse_experts(const ConfigFields& r, ModelConfig& c);
// Mixtral / gpt-oss: num_local_experts experts of intermediate_size each, then parse_experts.
void parse_local_experts(const ConfigFields& r, ModelConfig& c);
// Qwen3's attention fields (Qwen3 and Qwen3-MoE): q/k norms, attention_bias, the window with use_sliding_window.
void parse_qwen3_attention(const ConfigFields& r, ModelConfig& c);
// An MoE layer: the dense layer's attention and norms, the router [E, H], and the experts: with
// c.experts_fused transformers 5's mlp.gate + mlp.experts.{gate_up_proj, down_proj} (3-D), else the Hub's
// `router` and each expert's three projections at `experts`.N.{gate,up,down}, named as the family stores
// them. Its LoRA targets are the attention projections and the two expert parameters (PEFT's
// target_parameters "mlp.experts.gate_up_proj" feeding the gate and up slots, "mlp.experts.down_proj").
struct ExpertNames {
    const char* router;       // "mlp.gate"
    const char* experts;      // "mlp.experts"
    const char* gate;         // "gate_proj" (Mixtral: "w1")
    const char* up;           // "up_proj"   ("w3")
    const char* down;         // "down_proj" ("w2")
};
// PEFT's target_parameters names of the experts (the LoRA targets of an MoE layer's MLP).
inline constexpr const char* kExpertsGateUp = "mlp.experts.gate_up_proj";
inline constexpr const char* kExpertsDown = "mlp.experts.down_proj";
LayerSpec moe_layer(const ModelConfig& c, const ExpertNames& n);

}  // namespace tandem
