// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The family registry and what every family shares: the dense layer, the tensor list, the LoRA targets.
#include "arch/arch.h"

#include <algorithm>

#include "tandem/error.h"

namespace tandem {

extern const Family kLlamaFamily, kMistralFamily, kQwen2Family, kQwen3Family, kPhi3Family, kGemma2Family,
    kGemma3Family;
extern const Family kQwen3MoeFamily, kMixtralFamily, kGptOssFamily;

const char* const kModuleNames[kNumModules] = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                               "gate_proj", "up_proj", "down_proj"};

std::span<const Family* const> families() {
    static const Family* const all[] = {&kLlamaFamily,   &kMistralFamily,  &kQwen2Family,   &kQwen3Family,
                                        &kPhi3Family,    &kGemma2Family,   &kGemma3Family,  &kQwen3MoeFamily,
                                        &kMixtralFamily, &kGptOssFamily};
    return all;
}

const Family* find_family(std::string_view architecture) {
    for (const Family* f : families())
        if (architecture == f->architecture) return f;
    return nullptr;
}

ProjectionSpec projection(std::string target, std::string path, int64_t in, int64_t out, bool bias,
                          std::vector<int> feeds) {
    return {std::move(target), std::move(path), in, out, bias, std::move(feeds)};
}

void add_projection(LayerSpec& l, ProjectionSpec p) {
    l.tensors.push_back({p.path + ".weight", {p.out, p.in}});
    if (p.bias) l.tensors.push_back({p.path + ".bias", {p.out}});
    l.projections.push_back(std::move(p));
}

LayerSpec dense_layer(const ModelConfig& c, bool mlp) {
    const int64_t H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), I = c.intermediate_size, D = c.head_dim;
    LayerSpec l;
    l.tensors.push_back({"input_layernorm.weight", {H}});
    add_projection(l, projection("q_proj", "self_attn.q_proj", H, Q, c.attention_bias, {kQ}));
    add_projection(l, projection("k_proj", "self_attn.k_proj", H, KV, c.attention_bias, {kK}));
    add_projection(l, projection("v_proj", "self_attn.v_proj", H, KV, c.attention_bias, {kV}));
    add_projection(l, projection("o_proj", "self_attn.o_proj", Q, H, c.o_proj_bias, {kO}));
    if (c.qk_norm) {
        l.tensors.push_back({"self_attn.q_norm.weight", {D}});
        l.tensors.push_back({"self_attn.k_norm.weight", {D}});
    }
    if (c.attention_sinks) l.tensors.push_back({"self_attn.sinks", {c.num_attention_heads}});
    l.tensors.push_back({"post_attention_layernorm.weight", {H}});
    if (mlp) {
        add_projection(l, projection("gate_proj", "mlp.gate_proj", H, I, c.mlp_bias, {kGate}));
        add_projection(l, projection("up_proj", "mlp.up_proj", H, I, c.mlp_bias, {kUp}));
        add_projection(l, projection("down_proj", "mlp.down_proj", I, H, c.mlp_bias, {kDown}));
    }
    return l;
}

void parse_experts(const ConfigFields& r, ModelConfig& c) {
    c.num_experts_per_tok = r.has("num_experts_per_tok") ? r.integer("num_experts_per_tok")
                                                         : r.integer("experts_per_token");
    check_range(r, "number of experts", c.num_experts, 1, 4096);
    check_range(r, "num_experts_per_tok", c.num_experts_per_tok, 1, c.num_experts);
    check_range(r, "moe_intermediate_size", c.moe_intermediate_size, 1, 1 << 20);
    // The load-balancing loss: transformers adds it when output_router_logits is true.
    c.moe_aux_loss = r.boolean("output_router_logits", false);
    c.router_aux_loss_coef = r.number("router_aux_loss_coef", 0.001);
    if (!(c.router_aux_loss_coef >= 0.0 && c.router_aux_loss_coef < 1e6))
        r.bad("router_aux_loss_coef (" + std::to_string(c.router_aux_loss_coef) + ") must be a non-negative number");
    // What changes training that Tandem does not do (yet): refused with the field to change.
    if (r.has("router_jitter_noise") && r.number("router_jitter_noise", 0.0) != 0.0) {
        c.supported = false;
        c.unsupported_reason = "router_jitter_noise is not 0 (random noise on the router's input while training); "
                               "set it to 0 in config.json";
    }
    check_range(r, "decoder_sparse_step", c.decoder_sparse_step, 1, c.num_hidden_layers);
}

LayerSpec sandwich_layer(const ModelConfig& c) {
    LayerSpec l = dense_layer(c);
    l.ln2 = "pre_feedforward_layernorm";
    l.attn_out_norm = "post_attention_layernorm";
    l.mlp_out_norm = "post_feedforward_layernorm";
    l.tensors.push_back({"pre_feedforward_layernorm.weight", {c.hidden_size}});
    l.tensors.push_back({"post_feedforward_layernorm.weight", {c.hidden_size}});
    return l;
}

void parse_layer_types(const ConfigFields& r, ModelConfig& c, int64_t pattern) {
    c.sliding_layers.assign(size_t(c.num_hidden_layers), false);
    if (!r.has("layer_types")) {
        for (int64_t l = 0; l < c.num_hidden_layers; ++l) c.sliding_layers[size_t(l)] = (l + 1) % pattern != 0;
        return;
    }
    const auto& types = r.raw()["layer_types"];
    if (!types.is_array() || int64_t(types.size()) != c.num_hidden_layers)
        r.bad("field 'layer_types' must list one type per layer (" + std::to_string(c.num_hidden_layers) + "), found " +
              ConfigFields::describe(types));
    for (size_t l = 0; l < types.size(); ++l) {
        const std::string t = types[l].is_string() ? types[l].get<std::string>() : std::string();
        if (t != "sliding_attention" && t != "full_attention")
            r.bad("layer_types[" + std::to_string(l) + "] is " + ConfigFields::describe(types[l]) +
                  "; expected \"sliding_attention\" or \"full_attention\"");
        c.sliding_layers[l] = t == "sliding_attention";
    }
}

void parse_local_experts(const ConfigFields& r, ModelConfig& c) {
    c.num_experts = r.integer("num_local_experts");
    c.moe_intermediate_size = c.intermediate_size;
    parse_experts(r, c);
}

void parse_qwen3_attention(const ConfigFields& r, ModelConfig& c) {
    c.qk_norm = true;
    c.attention_bias = c.o_proj_bias = r.boolean("attention_bias", false);
    if (r.boolean("use_sliding_window", false)) c.sliding_window = r.integer("sliding_window", 0);
}

LayerSpec moe_layer(const ModelConfig& c, const ExpertNames& n) {
    LayerSpec s = dense_layer(c, false);
    const int64_t H = c.hidden_size, Im = c.moe_intermediate_size, E = c.num_experts;
    MoeSpec& m = s.moe;
    m.experts = E;
    m.top_k = c.num_experts_per_tok;
    m.intermediate = Im;
    m.renormalize = c.moe_renormalize;
    m.fused = c.experts_fused;
    m.gate_up = kExpertsGateUp;
    m.down = kExpertsDown;
    m.per_expert = n.experts;
    m.gate = n.gate;
    m.up = n.up;
    m.down_name = n.down;
    if (m.fused) {
        m.router = "mlp.gate.weight";
        s.tensors.push_back({m.router, {E, H}});
        s.tensors.push_back({m.gate_up, {E, 2 * Im, H}});
        s.tensors.push_back({m.down, {E, H, Im}});
    } else {
        m.router = std::string(n.router) + ".weight";
        s.tensors.push_back({m.router, {E, H}});
        for (int64_t e = 0; e < E; ++e) {
            const std::string x = std::string(n.experts) + "." + std::to_string(e) + ".";
            s.tensors.push_back({x + n.gate + ".weight", {Im, H}});
            s.tensors.push_back({x + n.up + ".weight", {Im, H}});
            s.tensors.push_back({x + n.down + ".weight", {H, Im}});
        }
    }
    ProjectionSpec gu = projection(kExpertsGateUp, "mlp.experts", H, 2 * Im, false, {kGate, kUp});
    gu.experts = E;
    ProjectionSpec dn = projection(kExpertsDown, "mlp.experts", Im, H, false, {kDown});
    dn.experts = E;
    s.projections.push_back(gu);
    s.projections.push_back(dn);
    return s;
}

ArchSpec arch_spec(const ModelConfig& c) {
    const Family* f = find_family(c.architecture);
    if (!f) throw_internal("arch_spec: no family for architecture '" + c.architecture + "'");
    ArchSpec a;
    a.architecture = c.architecture;
    a.head.push_back({"model.embed_tokens.weight", {c.vocab_size, c.hidden_size}});
    a.layers.reserve(size_t(std::max<int64_t>(c.num_hidden_layers, 0)));
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) a.layers.push_back(f->layer(c, l));
    a.tail.push_back({"model.norm.weight", {c.hidden_size}});
    if (!c.tie_word_embeddings) a.tail.push_back({"lm_head.weight", {c.vocab_size, c.hidden_size}});
    return a;
}

std::vector<ExpectedTensor> ArchSpec::tensors() const {
    std::vector<ExpectedTensor> out = head;
    for (size_t l = 0; l < layers.size(); ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        for (const ExpectedTensor& t : layers[l].tensors) out.push_back({p + t.name, t.shape});
    }
    out.insert(out.end(), tail.begin(), tail.end());
    return out;
}

std::vector<std::string> ArchSpec::lora_targets() const {
    // An MoE model's dense MLP layers (Qwen3-MoE's mlp_only_layers) are not offered: PEFT turns their names into
    // the experts' (model/lora_table.cpp, resolve_lora_targets).
    const bool moe = std::any_of(layers.begin(), layers.end(), [](const LayerSpec& l) { return l.moe.experts > 0; });
    std::vector<std::string> out;
    for (const LayerSpec& l : layers)
        for (const ProjectionSpec& p : l.projections) {
            const bool mlp = std::any_of(p.feeds.begin(), p.feeds.end(),
                                         [](int slot) { return slot == kGate || slot == kUp || slot == kDown; });
            if (moe && mlp && p.experts == 0) continue;
            if (std::find(out.begin(), out.end(), p.target) == out.end()) out.push_back(p.target);
        }
    return out;
}

}  // namespace tandem
