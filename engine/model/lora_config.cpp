// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// LoraConfig: validation and JSON. The struct is public (tandem/lora.h) so the run config, the UI and the
// PEFT reader share it; the LoRA table (model/lora_table.h) turns it into tensors.
#include "tandem/lora.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "arch/arch.h"
#include "tandem/error.h"

namespace tandem {

const std::vector<std::string>& lora_default_targets() {
    static const std::vector<std::string> names(kModuleNames, kModuleNames + kNumModules);
    return names;
}

const std::vector<std::string>& lora_known_targets() {
    // Derived from the families: the projections of a tiny probe layer of each.
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out = lora_default_targets();
        ModelConfig probe;
        probe.hidden_size = probe.intermediate_size = probe.moe_intermediate_size = 8;
        probe.num_hidden_layers = probe.num_attention_heads = probe.num_key_value_heads = 1;
        probe.head_dim = 8;
        probe.vocab_size = 8;
        probe.num_experts = probe.num_experts_per_tok = 1;
        for (const Family* f : families()) {
            probe.architecture = f->architecture;
            for (const ProjectionSpec& p : f->layer(probe, 0).projections)
                if (std::find(out.begin(), out.end(), p.target) == out.end()) out.push_back(p.target);
        }
        return out;
    }();
    return names;
}

bool lora_target_is_attention(std::string_view t) {
    return t == "q_proj" || t == "k_proj" || t == "v_proj" || t == "o_proj" || t == "qkv_proj";
}

double LoraConfig::scaling() const {
    if (r <= 0) return 0.0;
    return use_rslora ? alpha / std::sqrt(double(r)) : alpha / double(r);
}

bool LoraConfig::targets(std::string_view target) const {
    return std::find(target_modules.begin(), target_modules.end(), target) != target_modules.end();
}

bool LoraConfig::adapts_layer(int64_t layer) const {
    return layers_to_transform.empty() ||
           std::find(layers_to_transform.begin(), layers_to_transform.end(), layer) != layers_to_transform.end();
}

namespace {

std::string known_list() {
    std::string s;
    for (const auto& n : lora_known_targets()) s += (s.empty() ? "" : ", ") + n;
    return s;
}

std::string num(double v) {
    nlohmann::json j = v;
    return j.dump();
}

}  // namespace

void validate_lora_config(const LoraConfig& c, const std::string& where) {
    if (c.r < 1 || c.r > kLoraMaxRank)
        throw_invalid(where + ": r = " + std::to_string(c.r) +
                      " is out of range; the LoRA rank must be between 1 and " + std::to_string(kLoraMaxRank) +
                      " (typical: 8 to 64)");
    if (!std::isfinite(c.alpha) || c.alpha <= 0)
        throw_invalid(where + ": alpha = " + num(c.alpha) +
                      " is invalid; lora_alpha must be a positive number (typical: r or 2*r)");
    if (!std::isfinite(c.dropout) || c.dropout < 0 || c.dropout >= 1)
        throw_invalid(where + ": dropout = " + num(c.dropout) +
                      " is invalid; it must be in [0, 1) (typical: 0 to 0.1)");
    if (c.target_modules.empty())
        throw_invalid(where + ": target_modules is empty; name at least one of: " + known_list());
    std::set<std::string> seen;
    for (const auto& t : c.target_modules) {
        if (std::find(lora_known_targets().begin(), lora_known_targets().end(), t) == lora_known_targets().end())
            throw_invalid(where + ": unknown target module '" + t + "'; valid ones are: " + known_list());
        if (!seen.insert(t).second) throw_invalid(where + ": target module '" + t + "' is listed twice");
    }
    std::set<int64_t> layers;
    for (auto l : c.layers_to_transform) {
        if (l < 0)
            throw_invalid(where + ": layers_to_transform holds a negative layer index (" + std::to_string(l) + ")");
        if (!layers.insert(l).second)
            throw_invalid(where + ": layers_to_transform lists layer " + std::to_string(l) + " twice");
    }
}

void to_json(nlohmann::json& j, const LoraConfig& c) {
    j = nlohmann::json{{"r", c.r},
                       {"alpha", c.alpha},
                       {"dropout", c.dropout},
                       {"use_rslora", c.use_rslora},
                       {"target_modules", c.target_modules},
                       {"layers_to_transform", c.layers_to_transform}};
}

void from_json(const nlohmann::json& j, LoraConfig& out) {
    static const char* const kKeys[] = {"r", "alpha", "dropout", "use_rslora", "target_modules", "layers_to_transform"};
    if (!j.is_object()) throw_invalid("lora: expected a JSON object, got " + std::string(j.type_name()));
    for (const auto& [key, value] : j.items()) {
        (void)value;
        if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys))
            throw_invalid("lora." + key +
                          ": unknown key; valid keys are r, alpha, dropout, use_rslora, target_modules, "
                          "layers_to_transform");
    }
    LoraConfig c;  // absent keys keep Tandem's defaults
    auto number = [&](const char* key) -> double {
        const auto& v = j.at(key);
        if (!v.is_number()) throw_invalid(std::string("lora.") + key + ": expected a number, got " + v.dump());
        return v.get<double>();
    };
    if (j.contains("r")) {
        const auto& v = j.at("r");
        if (!v.is_number_integer()) throw_invalid("lora.r: expected an integer, got " + v.dump());
        const auto r = v.get<int64_t>();
        if (r < 1 || r > kLoraMaxRank)
            throw_invalid("lora.r: " + std::to_string(r) + " is out of range; the LoRA rank must be between 1 and " +
                          std::to_string(kLoraMaxRank));
        c.r = int(r);
    }
    if (j.contains("alpha")) c.alpha = number("alpha");
    if (j.contains("dropout")) c.dropout = number("dropout");
    if (j.contains("use_rslora")) {
        const auto& v = j.at("use_rslora");
        if (!v.is_boolean()) throw_invalid("lora.use_rslora: expected true or false, got " + v.dump());
        c.use_rslora = v.get<bool>();
    }
    if (j.contains("target_modules")) {
        const auto& v = j.at("target_modules");
        if (!v.is_array()) throw_invalid("lora.target_modules: expected a list of module names, got " + v.dump());
        c.target_modules.clear();
        for (const auto& e : v) {
            if (!e.is_string()) throw_invalid("lora.target_modules: expected module names (strings), got " + e.dump());
            c.target_modules.push_back(e.get<std::string>());
        }
    }
    if (j.contains("layers_to_transform")) {
        const auto& v = j.at("layers_to_transform");
        c.layers_to_transform.clear();
        if (!v.is_null()) {
            if (!v.is_array())
                throw_invalid("lora.layers_to_transform: expected a list of layer indices, got " + v.dump());
            for (const auto& e : v) {
                if (!e.is_number_integer())
                    throw_invalid("lora.layers_to_transform: expected layer indices (integers), got " + e.dump());
                c.layers_to_transform.push_back(e.get<int64_t>());
            }
        }
    }
    validate_lora_config(c, "lora");
    out = std::move(c);
}

}  // namespace tandem
