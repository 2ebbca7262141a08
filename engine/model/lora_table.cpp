// The LoRA table (see lora_table.h): specs from the model's expected tensors, PEFT names, the module index
// of both backends, PEFT's initialisation.
#include "model/lora_table.h"

#include <cmath>

#include "core/random.h"
#include "tandem/error.h"

namespace tandem {

std::string lora_module_path(int64_t layer, const std::string& module) {
    return "model.layers." + std::to_string(layer) + "." + lora_target_parent(module) + "." + module;
}

std::string peft_tensor_name(int64_t layer, const std::string& module, bool is_a) {
    return std::string(kPeftPrefix) + lora_module_path(layer, module) + (is_a ? ".lora_A.weight" : ".lora_B.weight");
}

std::vector<LoraTensorSpec> lora_tensor_specs(const ModelConfig& model, const LoraConfig& config) {
    validate_lora_config(config, "LoRA config");
    for (auto l : config.layers_to_transform)
        if (l >= model.num_hidden_layers)
            throw_invalid("LoRA config: layers_to_transform lists layer " + std::to_string(l) + " but the model has " +
                          std::to_string(model.num_hidden_layers) + " layers (0.." +
                          std::to_string(model.num_hidden_layers - 1) + ")");
    std::map<std::string, std::vector<int64_t>> base_shapes;
    for (auto& t : expected_tensors(model)) base_shapes.emplace(std::move(t.name), std::move(t.shape));

    std::vector<LoraTensorSpec> out;
    for (int64_t l = 0; l < model.num_hidden_layers; ++l) {
        if (!config.adapts_layer(l)) continue;
        for (const auto& m : config.target_modules) {
            const std::string base = lora_module_path(l, m) + ".weight";
            auto it = base_shapes.find(base);
            if (it == base_shapes.end())
                throw_unsupported("LoRA target '" + m + "': the model (" + model.architecture + ") has no " + base +
                                  (model.is_moe_layer(l)
                                       ? " (layer " + std::to_string(l) + " is a mixture-of-experts layer)"
                                       : std::string()) +
                                  "; remove '" + m + "' from target_modules");
            const auto& s = it->second;  // [out, in]
            const int64_t out_f = s.at(0), in_f = s.at(1);
            out.push_back({peft_tensor_name(l, m, true), l, m, true, {int64_t(config.r), in_f}});
            out.push_back({peft_tensor_name(l, m, false), l, m, false, {out_f, int64_t(config.r)}});
        }
    }
    return out;
}

const char* const kModuleNames[kNumModules] = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                               "gate_proj", "up_proj", "down_proj"};

std::vector<std::array<int, kNumModules>> lora_index_of(const std::vector<LoraTensorSpec>& specs, int L) {
    std::vector<std::array<int, kNumModules>> index(static_cast<size_t>(L));
    for (auto& a : index) a.fill(-1);
    for (size_t i = 0; i < specs.size(); ++i) {
        const LoraTensorSpec& s = specs[i];
        if (!s.is_a) continue;
        int mod = -1;
        for (int k = 0; k < kNumModules; ++k)
            if (s.module == kModuleNames[k]) mod = k;
        if (mod < 0 || s.layer < 0 || s.layer >= L || i + 1 >= specs.size() || specs[i + 1].is_a)
            throw_internal("model: unexpected LoRA spec " + s.name);
        index[size_t(s.layer)][size_t(mod)] = int(i);
    }
    return index;
}

std::vector<LoraParam> init_lora_params(const std::vector<LoraTensorSpec>& specs, uint64_t seed) {
    std::vector<LoraParam> params;
    SplitMix64 rng(seed);
    for (const auto& s : specs) {
        LoraParam p;
        p.spec = s;
        const size_t n = size_t(s.shape.at(0) * s.shape.at(1));
        p.value.assign(n, 0.0f);
        p.grad.assign(n, 0.0f);
        if (s.is_a) {
            const double bound = 1.0 / std::sqrt(double(s.shape.at(1)));
            for (auto& x : p.value) x = float((2.0 * rng.next_double() - 1.0) * bound);
        }
        params.push_back(std::move(p));
    }
    return params;
}

}  // namespace tandem
