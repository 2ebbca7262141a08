// The LoRA table of a (model, LoRA config) pair: which projections of which layers carry an adapter, the
// shapes and PEFT names of their A and B matrices, the module ids both backends use, and PEFT's
// initialisation. Owned by the model; the PEFT reader/writer (export/) serialises it.
// Decisions a reader must know:
//  - Order: layer by layer, within a layer in config.target_modules order, lora_A then its lora_B. Every
//    region of LoRA state (values, grads, moments; on CUDA also the bf16 copies) follows this order.
//  - The module id (LoraModule) is also part of the LoRA dropout key (layer * 16 + module, core/random.h),
//    so a step's dropout masks stay the same as long as these ids do.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tandem/lora.h"
#include "tandem/model_config.h"

namespace tandem {

// PeftModel -> LoraModel -> *ForCausalLM: the prefix of every saved PEFT tensor name.
inline constexpr const char* kPeftPrefix = "base_model.model.";

// One LoRA matrix the (model, config) pair implies.
struct LoraTensorSpec {
    std::string name;  // PEFT name, "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"
    int64_t layer = 0;
    std::string module;  // "q_proj"
    bool is_a = true;    // lora_A [r, in] or lora_B [out, r]
    std::vector<int64_t> shape;
};

// Every lora_A/lora_B pair, layer by layer, in the order of config.target_modules within a layer (A then B).
// Throws Error{InvalidInput} for an invalid config or a layers_to_transform index the model does not have,
// Error{Unsupported} when a target's base weight does not exist (e.g. mlp targets of an MoE layer).
std::vector<LoraTensorSpec> lora_tensor_specs(const ModelConfig& model, const LoraConfig& config);

// The module's path in the base model: "model.layers.3.mlp.up_proj".
std::string lora_module_path(int64_t layer, const std::string& module);
// "base_model.model.model.layers.3.mlp.up_proj.lora_B.weight"
std::string peft_tensor_name(int64_t layer, const std::string& module, bool is_a);

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

// The seven projections of a block, in block order; the index is the module id both backends use for the
// LoRA lookup, the dropout hash and the weight names.
enum LoraModule { kQ = 0, kK, kV, kO, kGate, kUp, kDown, kNumModules };
extern const char* const kModuleNames[kNumModules];  // "q_proj", ..., "down_proj"

// [layer][module] -> index in specs of that projection's lora_A (its lora_B follows), -1 where not adapted.
// specs as lora_tensor_specs returns them; Error{Internal} for a spec that breaks that order.
std::vector<std::array<int, kNumModules>> lora_index_of(const std::vector<LoraTensorSpec>& specs, int L);

// LoRA parameters as PEFT initialises them, identical on every backend for the same seed: SplitMix64(seed)
// drawn in spec order, A uniform(-1/sqrt(in), 1/sqrt(in)) (Kaiming-uniform with a = sqrt(5)), B zeros;
// grads zero, moments empty.
std::vector<LoraParam> init_lora_params(const std::vector<LoraTensorSpec>& specs, uint64_t seed);

}  // namespace tandem
