// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The LoRA table of a (model, LoRA config) pair: which projections of which layers carry an adapter, the
// shapes and PEFT names of their A and B matrices, the module ids both backends use, and PEFT's
// initialisation. Owned by the model; the PEFT reader/writer (export/) serialises it.
// Decisions a reader must know:
//  - Order: layer by layer, within a layer in config.target_modules order, lora_A then its lora_B. Every
//    region of LoRA state (values, grads, moments; on CUDA also the bf16 copies) follows this order.
//  - Targets are the model's projections as its checkpoint names them (arch/arch.h). A fused projection
//    (Phi-3 qkv_proj) is one lora_A / lora_B pair feeding several block slots: the slots share lora_A and
//    each reads its rows of lora_B (LoraSlot). The dropout key is (layer, first slot of the projection),
//    core/random.h: the values of the unfused families' keys (layer * 16 + module) are unchanged.
//  - An MoE layer's experts are adapted as PEFT's target_parameters adapts a 3-D parameter (its ParamWrapper):
//    per expert e an A_e [r, in] and a B_e [out, r]. The spec's shapes are PEFT's (lora_A [E*r, in] with
//    expert e's rows at e*r; lora_B [out, E*r] with B_e[o, j] at column j*E + e); the values the models hold
//    keep lora_A as it is but lora_B expert-major, [E, out, r], so each expert's B is one matrix for the
//    grouped GEMMs (expert_b_to_peft / expert_b_from_peft convert, at the PEFT reader and writer only).
//    The gate_up_proj parameter feeds the gate and up slots like a fused projection. PEFT nests the
//    wrappers of one module: with both expert parameters adapted, gate_up_proj's tensors are saved under
//    "mlp.experts.base_layer.lora_A" and down_proj's under "mlp.experts.lora_A".
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "arch/arch.h"
#include "tandem/lora.h"
#include "tandem/model_config.h"

namespace tandem {

// PeftModel -> LoraModel -> *ForCausalLM: the prefix of every saved PEFT tensor name.
inline constexpr const char* kPeftPrefix = "base_model.model.";

// One LoRA matrix the (model, config) pair implies.
struct LoraTensorSpec {
    std::string name;  // PEFT name, "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"
    int64_t layer = 0;
    std::string module;  // the target: "q_proj", "qkv_proj"
    std::string path;    // under the layer: "self_attn.qkv_proj"
    bool is_a = true;    // lora_A [r, in] or lora_B [out, r]
    std::vector<int64_t> shape;
    std::vector<int> feeds;         // the block slots the projection feeds (LoraModule), row order
    std::vector<int64_t> slot_row;  // the first row of lora_B (and of the weight) of each slot
    int64_t experts = 0;            // an MoE layer's experts (PEFT target_parameters): E; 0 otherwise
    bool interleaved = false;       // gpt-oss's gate_up: PEFT's lora_B rows alternate gate, up (arch/arch.h)
    bool transposed = false;        // gpt-oss: the adapted parameter is stored [E, in, out]
};

// An expert parameter's lora_B between the models' layout [E, out, r] and PEFT's [out, r*E] (B_e[o, j] at
// column j*E + e). interleaved: PEFT's row 2j is the model's gate row j, 2j + 1 its up row j (out / 2 + j).
std::vector<float> expert_b_to_peft(const std::vector<float>& b, int64_t E, int64_t out, int64_t r,
                                    bool interleaved = false);
std::vector<float> expert_b_from_peft(const std::vector<float>& b, int64_t E, int64_t out, int64_t r,
                                      bool interleaved = false);

// Every lora_A/lora_B pair, layer by layer, in the order of config.target_modules within a layer (A then B).
// Throws Error{InvalidInput} for an invalid config or a layers_to_transform index the model does not have,
// Error{Unsupported} when a target's base weight does not exist (e.g. mlp targets of an MoE layer).
std::vector<LoraTensorSpec> lora_tensor_specs(const ModelConfig& model, const LoraConfig& config);

// The module's path in the base model from its path under the layer: "model.layers.3.mlp.up_proj".
std::string lora_module_path(int64_t layer, const std::string& path);
// "base_model.model.model.layers.3.mlp.up_proj.lora_B.weight"
std::string peft_tensor_name(int64_t layer, const std::string& path, bool is_a);

// Every LoRA-able module of the model: layer, target name and full path, layer by layer in block order.
struct LoraModuleRef {
    int64_t layer = 0;
    std::string target;  // "q_proj"
    std::string path;    // "model.layers.0.self_attn.q_proj"
};
std::vector<LoraModuleRef> lora_modules(const ModelConfig& model);

// Tensor name -> fp32 data, row-major, numel of the spec's shape.
using LoraTensors = std::map<std::string, std::vector<float>>;

// One LoRA matrix being trained (the host side of both backends).
struct LoraParam {
    LoraTensorSpec spec;       // PEFT name, layer, module, A or B, shape (A [r, in], B [out, r])
    std::vector<float> value;  // [numel]
    std::vector<float> grad;   // [numel], accumulated by forward_backward
    // AdamW moments [numel] (empty until the first optimizer step; the trainer's checkpoints read them).
    std::vector<float> exp_avg, exp_avg_sq;
};

// One block slot's LoRA: the spec index of its lora_A (-1: not adapted; its lora_B follows), the row of
// lora_B its part starts at, and the slot whose dropout key it uses (its projection's first).
struct LoraSlot {
    int a = -1;
    int64_t b_row = 0;
    int drop = 0;
};
using LoraIndex = std::vector<std::array<LoraSlot, kNumModules>>;  // [layer][slot]
// specs as lora_tensor_specs returns them; Error{Internal} for a spec that breaks that order.
LoraIndex lora_index_of(const std::vector<LoraTensorSpec>& specs, int L);

// LoRA parameters as PEFT initialises them, identical on every backend for the same seed: SplitMix64(seed)
// drawn in spec order, A uniform(-1/sqrt(in), 1/sqrt(in)) (Kaiming-uniform with a = sqrt(5)), B zeros;
// grads zero, moments empty.
std::vector<LoraParam> init_lora_params(const std::vector<LoraTensorSpec>& specs, uint64_t seed);

}  // namespace tandem
