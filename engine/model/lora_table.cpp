// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The LoRA table (see lora_table.h): specs from the model's architecture (arch/), the targets a model
// offers, PEFT names, the slot index of both backends, PEFT's initialisation.
#include "model/lora_table.h"

#include <algorithm>
#include <cmath>

#include "core/random.h"
#include "tandem/error.h"

namespace tandem {

std::string lora_module_path(int64_t layer, const std::string& path) {
    return "model.layers." + std::to_string(layer) + "." + path;
}

std::string peft_tensor_name(int64_t layer, const std::string& path, bool is_a) {
    return std::string(kPeftPrefix) + lora_module_path(layer, path) + (is_a ? ".lora_A.weight" : ".lora_B.weight");
}

std::vector<LoraModuleRef> lora_modules(const ModelConfig& model) {
    const ArchSpec arch = arch_spec(model);
    std::vector<LoraModuleRef> out;
    for (size_t l = 0; l < arch.layers.size(); ++l)
        for (const ProjectionSpec& p : arch.layers[l].projections)
            out.push_back({int64_t(l), p.target, lora_module_path(int64_t(l), p.path)});
    return out;
}

std::vector<std::string> lora_targets(const ModelConfig& model) { return arch_spec(model).lora_targets(); }

namespace {

std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
}

// The fused projection of `arch` that feeds the slot named `name` ("q_proj" in Phi-3's qkv_proj), or nullptr.
const ProjectionSpec* fused_holding(const ArchSpec& arch, const std::string& name) {
    for (const LayerSpec& l : arch.layers)
        for (const ProjectionSpec& p : l.projections)
            if (p.feeds.size() > 1)
                for (int slot : p.feeds)
                    if (name == kModuleNames[slot]) return &p;
    return nullptr;
}

}  // namespace

std::vector<std::string> lora_target_parts(const ModelConfig& model, const std::string& target) {
    const ArchSpec arch = arch_spec(model);
    for (const LayerSpec& l : arch.layers)
        for (const ProjectionSpec& p : l.projections)
            if (p.target == target) {
                if (p.feeds.size() < 2 && p.experts == 0) return {target};  // experts: the slot names they stand for
                std::vector<std::string> parts;
                for (int slot : p.feeds) parts.push_back(kModuleNames[slot]);
                return parts;
            }
    return {};
}

LoraConfig resolve_lora_targets(const ModelConfig& model, const LoraConfig& config) {
    const ArchSpec arch = arch_spec(model);
    const std::vector<std::string> offered = arch.lora_targets();
    auto offers = [&](const std::string& t) { return std::find(offered.begin(), offered.end(), t) != offered.end(); };
    LoraConfig out = config;
    out.target_modules.clear();
    auto add = [&](const std::string& t) {
        if (std::find(out.target_modules.begin(), out.target_modules.end(), t) == out.target_modules.end())
            out.target_modules.push_back(t);
    };
    // An MoE model's MLP names stand for its experts too (gate_proj + up_proj: the fused gate_up_proj
    // parameter; down_proj: down_proj), as for a fused projection.
    // The expert parameters go last (after every module target), in the order gate_up, down, as PEFT's
    // adapter_config.json lists them apart (target_parameters).
    const bool experts = std::find(offered.begin(), offered.end(), kExpertsGateUp) != offered.end();
    bool expert_gate_up = false, expert_down = false;
    for (const std::string& t : config.target_modules) {
        if (t == kExpertsGateUp || t == kExpertsDown) {
            if (!offers(t))
                throw_invalid("LoRA config: target '" + t + "' names the experts of a mixture-of-experts model; " +
                              model.architecture + " has none; its projections are: " + join(offered));
            (t == kExpertsGateUp ? expert_gate_up : expert_down) = true;
            continue;
        }
        if (experts && (t == "gate_proj" || t == "up_proj" || t == "down_proj")) {
            // Only the experts': PEFT (0.19+) rewrites these names into the expert parameters of an MoE model
            // (transformers' v4 -> v5 conversion), so a dense layer's MLP (Qwen3-MoE's mlp_only_layers) cannot be
            // adapted in a PEFT adapter and is not offered (ArchSpec::lora_targets).
            if (t == "down_proj") {
                expert_down = true;
            } else if (!config.targets("gate_proj") || !config.targets("up_proj")) {
                throw_invalid("LoRA config: " + model.architecture + " stores each expert's gate_proj and up_proj " +
                              "as one " + kExpertsGateUp + ", which LoRA adapts as a whole; list both gate_proj " +
                              "and up_proj (or " + kExpertsGateUp + ") instead of only '" + t + "'");
            } else {
                expert_gate_up = true;
            }
            continue;
        }
        if (offers(t)) {
            add(t);
            continue;
        }
        const ProjectionSpec* fused = fused_holding(arch, t);
        if (!fused)
            throw_invalid("LoRA config: target module '" + t + "' does not exist in " + model.architecture +
                          "; its projections are: " + join(offered));
        std::vector<std::string> parts;
        for (int slot : fused->feeds) parts.push_back(kModuleNames[slot]);
        for (const std::string& part : parts)
            if (!config.targets(part))
                throw_invalid("LoRA config: " + model.architecture + " stores " + join(parts) + " as one fused " +
                              fused->target + ", which LoRA adapts as a whole; list " + fused->target +
                              " (or all of " + join(parts) + ") instead of only '" + t + "'");
        add(fused->target);
    }
    if (expert_gate_up) add(kExpertsGateUp);
    if (expert_down) add(kExpertsDown);
    return out;
}

std::vector<LoraTensorSpec> lora_tensor_specs(const ModelConfig& model, const LoraConfig& requested) {
    validate_lora_config(requested, "LoRA config");
    for (auto l : requested.layers_to_transform)
        if (l >= model.num_hidden_layers)
            throw_invalid("LoRA config: layers_to_transform lists layer " + std::to_string(l) + " but the model has " +
                          std::to_string(model.num_hidden_layers) + " layers (0.." +
                          std::to_string(model.num_hidden_layers - 1) + ")");
    const LoraConfig config = resolve_lora_targets(model, requested);
    const ArchSpec arch = arch_spec(model);
    const int64_t r = config.r;
    std::vector<LoraTensorSpec> out;
    for (int64_t l = 0; l < model.num_hidden_layers; ++l) {
        if (!config.adapts_layer(l)) continue;
        const LayerSpec& layer = arch.layers[size_t(l)];
        for (const auto& m : config.target_modules) {
            const ProjectionSpec* p = nullptr;
            for (const ProjectionSpec& x : layer.projections)
                if (x.target == m) p = &x;
            // A dense MLP target in an MoE layer (its experts are adapted through their own targets), or an
            // expert target in a dense layer: the layer has no such module, as in PEFT.
            const bool mlp_name = m == "gate_proj" || m == "up_proj" || m == "down_proj";
            if (!p && ((mlp_name && layer.moe.experts > 0) || m == kExpertsGateUp || m == kExpertsDown)) continue;
            if (!p)
                throw_unsupported("LoRA target '" + m + "': layer " + std::to_string(l) + " of the model (" +
                                  model.architecture + ") has no " + m +
                                  (model.is_moe_layer(l) ? " (it is a mixture-of-experts layer)" : std::string()) +
                                  "; remove '" + m + "' from target_modules");
            std::vector<int64_t> rows;
            int64_t row = 0;
            for (int slot : p->feeds) {
                rows.push_back(row);
                const int64_t F = p->experts > 0 ? model.moe_intermediate_size : model.intermediate_size;
                row += slot == kQ ? model.q_dim()
                       : slot == kK || slot == kV ? model.kv_dim()
                       : slot == kGate || slot == kUp ? F
                                                      : model.hidden_size;
            }
            if (!p->feeds.empty() && row != p->out)
                throw_internal("LoRA table: the feeds of " + p->path + " cover " + std::to_string(row) + " of " +
                               std::to_string(p->out) + " rows");
            if (p->experts > 0) {
                if (config.dropout > 0)
                    throw_unsupported("LoRA on " + model.architecture + "'s experts (" + m +
                                      ") cannot use dropout: PEFT's LoRA on expert parameters (target_parameters) "
                                      "has none; set the LoRA dropout to 0");
                // PEFT nests the ParamWrappers of one module: the one made last (down_proj, the module's second
                // parameter) is the outer one; with both adapted, gate_up_proj's is under base_layer.
                const bool inner = m == kExpertsGateUp && config.targets(kExpertsDown);
                const std::string path = p->path + (inner ? ".base_layer" : "");
                const int64_t E = p->experts;
                out.push_back({peft_tensor_name(l, path, true), l, m, p->path, true, {E * r, p->in}, p->feeds, rows, E,
                               p->interleaved, p->transposed});
                out.push_back({peft_tensor_name(l, path, false), l, m, p->path, false, {p->out, E * r}, p->feeds, rows,
                               E, p->interleaved, p->transposed});
                continue;
            }
            out.push_back({peft_tensor_name(l, p->path, true), l, m, p->path, true, {r, p->in}, p->feeds, rows});
            out.push_back({peft_tensor_name(l, p->path, false), l, m, p->path, false, {p->out, r}, p->feeds, rows});
        }
    }
    return out;
}

LoraIndex lora_index_of(const std::vector<LoraTensorSpec>& specs, int L) {
    LoraIndex index(static_cast<size_t>(L));
    for (size_t i = 0; i < specs.size(); ++i) {
        const LoraTensorSpec& s = specs[i];
        if (!s.is_a) continue;
        if (s.feeds.empty() || s.feeds.size() != s.slot_row.size() || s.layer < 0 || s.layer >= L ||
            i + 1 >= specs.size() || specs[i + 1].is_a)
            throw_internal("model: unexpected LoRA spec " + s.name);
        for (size_t k = 0; k < s.feeds.size(); ++k)
            index[size_t(s.layer)][size_t(s.feeds[k])] = {int(i), s.slot_row[k], s.feeds[0]};
    }
    return index;
}

namespace {

// PEFT's row of the model's lora_B row o.
int64_t peft_row(int64_t o, int64_t out, bool interleaved) {
    if (!interleaved) return o;
    return o < out / 2 ? 2 * o : 2 * (o - out / 2) + 1;
}

}  // namespace

std::vector<float> expert_b_to_peft(const std::vector<float>& b, int64_t E, int64_t out, int64_t r, bool interleaved) {
    std::vector<float> p(b.size());
    for (int64_t e = 0; e < E; ++e)
        for (int64_t o = 0; o < out; ++o) {
            const int64_t po = peft_row(o, out, interleaved);
            for (int64_t j = 0; j < r; ++j) p[size_t(po * r * E + j * E + e)] = b[size_t((e * out + o) * r + j)];
        }
    return p;
}

std::vector<float> expert_b_from_peft(const std::vector<float>& p, int64_t E, int64_t out, int64_t r,
                                      bool interleaved) {
    std::vector<float> b(p.size());
    for (int64_t e = 0; e < E; ++e)
        for (int64_t o = 0; o < out; ++o) {
            const int64_t po = peft_row(o, out, interleaved);
            for (int64_t j = 0; j < r; ++j) b[size_t((e * out + o) * r + j)] = p[size_t(po * r * E + j * E + e)];
        }
    return b;
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
