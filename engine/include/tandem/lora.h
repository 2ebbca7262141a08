// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::LoraConfig — the LoRA settings of a run: rank, alpha, dropout, rsLoRA, which projections of each
// decoder layer get an adapter, and optionally which layers.
// Decisions a reader must know:
//  - Targets are projection names as the model's checkpoint names them (lora_targets(model)): LoRA on
//    embeddings, lm_head or norms is not supported. Names are kept in the order given. A model that stores
//    projections fused (Phi-3: qkv_proj, gate_up_proj) also accepts the names of all their parts
//    (resolve_lora_targets), so the default seven names mean "every projection" for every family.
//  - Defaults here (r 16, alpha 32, all seven projections) are Tandem's; PEFT's own defaults differ (r 8,
//    alpha 8). The adapter reader applies PEFT's defaults to keys an adapter_config.json leaves out.
//  - JSON (for the run config) uses the keys r, alpha, dropout, use_rslora, target_modules,
//    layers_to_transform; unknown keys are an error so a typo never silently trains something else.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/model_config.h"

namespace tandem {

// Every projection name any supported family offers (the seven of the Llama block first, then fused ones
// such as qkv_proj, gate_up_proj): the names validate_lora_config accepts before a model is known.
const std::vector<std::string>& lora_known_targets();
// The default target_modules: the seven projections of the Llama block.
const std::vector<std::string>& lora_default_targets();
bool lora_target_is_attention(std::string_view target);   // q/k/v/o_proj, qkv_proj

inline constexpr int kLoraMaxRank = 8192;

struct LoraConfig {
    int r = 16;               // rank
    double alpha = 32;        // lora_alpha
    double dropout = 0.0;     // lora_dropout, applied to the adapter's input while training
    bool use_rslora = false;  // scaling alpha/sqrt(r) instead of alpha/r
    std::vector<std::string> target_modules = lora_default_targets();
    std::vector<int64_t> layers_to_transform;  // empty: every layer (PEFT's layers_to_transform: null)

    // The factor LoRA's update B·A is multiplied by: alpha / r, or alpha / sqrt(r) with rsLoRA.
    double scaling() const;
    // True when `target` is one of target_modules / `layer` is adapted.
    bool targets(std::string_view target) const;
    bool adapts_layer(int64_t layer) const;

    bool operator==(const LoraConfig&) const = default;
};

// Throws Error{InvalidInput} naming the field: r outside [1, kLoraMaxRank], alpha not a positive finite
// number, dropout outside [0, 1), no targets, an unknown target (the message lists the valid ones), a
// target or layer listed twice, a negative layer. `where` prefixes the messages (e.g. "run.json: lora").
void validate_lora_config(const LoraConfig& config, const std::string& where = "lora");

// The LoRA targets `model` offers (its projections as its checkpoint names them), block order.
std::vector<std::string> lora_targets(const ModelConfig& model);
// config with target_modules in the model's own names: parts of a fused projection (q_proj, k_proj, v_proj of
// Phi-3) become the fused one (qkv_proj). Error{InvalidInput} for a name the model does not have, or only some
// parts of a fused projection, naming what to list instead.
LoraConfig resolve_lora_targets(const ModelConfig& model, const LoraConfig& config);
// The Llama-block names a target of `model` stands for: {q_proj, k_proj, v_proj} for Phi-3's qkv_proj, {gate_proj,
// up_proj} / {down_proj} for an MoE model's mlp.experts.gate_up_proj / down_proj, {target} for an unfused one, {}
// for a name the model does not have.
std::vector<std::string> lora_target_parts(const ModelConfig& model, const std::string& target);

// nlohmann ADL hooks. from_json validates and throws Error{InvalidInput} naming the key ("lora.r: ...").
void to_json(nlohmann::json& j, const LoraConfig& config);
void from_json(const nlohmann::json& j, LoraConfig& config);

}  // namespace tandem
