// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// GGUF model and LoRA-adapter export and the Ollama Modelfile (see gguf.h).
// C = hidden size, D = head_dim, Hq / Hkv = query / key-value heads, r = LoRA rank.
#include "export/gguf.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <system_error>

#include <nlohmann/json.hpp>

#include "arch/arch.h"
#include "core/files.h"
#include "export/base_weights.h"
#include "export/gguf_file.h"
#include "export/merged.h"
#include "io/atomic_file.h"
#include "io/mxfp4.h"
#include "model/expert_layout.h"
#include "tandem/chat_template.h"
#include "tandem/error.h"
#include "tandem/safetensors.h"
#include "tandem/tokenizer.h"

namespace tandem {

namespace fs = std::filesystem;
using gguf::GgmlType;
using gguf::GgufHeader;

namespace {

// ---------------------------------------------------------------------------------------------------------------
// Architectures

struct GgufArch {
    std::string name;         // llama.cpp's architecture name
    bool permute_qk = false;  // llama.cpp applies interleaved-pair RoPE to this arch (LLM_ARCH_LLAMA)
    bool gemma = false;       // norms stored as w of (1 + w); Gemma's norm names
};

// The sliding-window period of a layer layout where the last layer of each period is global (llama.cpp's
// set_swa_pattern), or 0 when the layout is not such a pattern.
int64_t swa_period(const ModelConfig& c) {
    if (c.sliding_layers.empty()) return 0;
    for (int64_t p = 1; p <= int64_t(c.sliding_layers.size()); ++p) {
        bool ok = true;
        for (size_t l = 0; l < c.sliding_layers.size() && ok; ++l)
            ok = c.sliding_layers[l] == ((int64_t(l) % p) < p - 1);
        if (ok) return p;
    }
    return 0;
}

GgufArch gguf_arch(const ModelConfig& c) {
    const std::string& a = c.architecture;
    GgufArch g;
    if (a == "LlamaForCausalLM" || a == "MistralForCausalLM") g = {"llama", true, false};
    else if (a == "Qwen2ForCausalLM") g = {"qwen2", false, false};
    else if (a == "Qwen3ForCausalLM") g = {"qwen3", false, false};
    else if (a == "Phi3ForCausalLM") g = {"phi3", false, false};
    else if (a == "Gemma2ForCausalLM") g = {"gemma2", false, true};
    else if (a == "Gemma3ForCausalLM") g = {"gemma3", false, true};
    else if (a == "MixtralForCausalLM") g = {"llama", true, false};  // llama.cpp's llama graph with experts
    else if (a == "Qwen3MoeForCausalLM") g = {"qwen3moe", false, false};
    else if (a == "GptOssForCausalLM") g = {"gpt-oss", false, false};
    else
        throw_unsupported("GGUF export: " + a +
                          " has no GGUF mapping in Tandem (supported: Llama, Mistral, Qwen2, Qwen3, Phi-3, Gemma 2, "
                          "Gemma 3, Qwen3-MoE, Mixtral, gpt-oss); export --format merged and convert it with "
                          "llama.cpp's converter");
    if (g.name == "qwen3moe") {
        // llama.cpp's qwen3moe graph: every layer routes, and the chosen experts' weights are renormalised.
        for (int64_t l = 0; l < c.num_hidden_layers; ++l)
            if (!c.is_moe_layer(l))
                throw_unsupported("GGUF export: layer " + std::to_string(l) + " of this Qwen3-MoE has a dense MLP "
                                  "(mlp_only_layers / decoder_sparse_step), which llama.cpp's qwen3moe cannot hold");
        if (!c.moe_renormalize)
            throw_unsupported("GGUF export: norm_topk_prob is false; llama.cpp's qwen3moe always renormalises the "
                              "chosen experts' weights");
    }
    if (c.rope_scaling.type == RopeScalingType::Yarn && g.name != "gpt-oss")
        throw_unsupported("GGUF export: YaRN RoPE scaling is written for gpt-oss only");
    if (g.name == "gpt-oss" && swa_period(c) != 2)
        throw_unsupported("GGUF export: llama.cpp's gpt-oss alternates sliding and full layers (sliding first); this "
                          "model's layer_types differ");
    if (c.rope_scaling.type == RopeScalingType::Llama3 && g.name != "llama")
        throw_unsupported("GGUF export: llama3 RoPE scaling on " + a + " has no llama.cpp representation");
    if (c.rope_scaling.type == RopeScalingType::LongRope && g.name != "phi3")
        throw_unsupported("GGUF export: longrope RoPE scaling on " + a + " has no llama.cpp representation");
    if (g.gemma) {
        // llama.cpp derives the attention scale: 1/sqrt(C / Hq) for its "27B" layer counts, 1/sqrt(D) otherwise.
        const bool big = (g.name == "gemma2" && c.num_hidden_layers == 46) || (g.name == "gemma3" && c.num_hidden_layers == 62);
        const double expect = big ? double(c.hidden_size) / double(c.num_attention_heads) : double(c.head_dim);
        const double have = c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : double(c.head_dim);
        if (std::fabs(have - expect) > 1e-6)
            throw_unsupported("GGUF export: query_pre_attn_scalar " + std::to_string(have) +
                              " is not the attention scale llama.cpp derives for this model (" +
                              std::to_string(expect) + "); llama.cpp cannot represent it");
        if (!c.sliding_layers.empty() && swa_period(c) == 0)
            throw_unsupported("GGUF export: the sliding-window layers of this model are not a periodic pattern, "
                              "which llama.cpp cannot represent");
    }
    return g;
}

// transformers' name -> llama.cpp's; "" for tensors that are not written (tied lm_head, rotary buffers).
// Error{Unsupported} for a tensor with no llama.cpp name.
std::string gguf_tensor_name(const std::string& hf, const GgufArch& arch, const ModelConfig& c, int64_t& layer) {
    layer = -1;
    if (hf == "model.embed_tokens.weight") return "token_embd.weight";
    if (hf == "model.norm.weight") return "output_norm.weight";
    if (hf == "lm_head.weight") return c.tie_word_embeddings ? "" : "output.weight";
    const std::string pre = "model.layers.";
    if (hf.rfind(pre, 0) == 0) {
        const size_t dot = hf.find('.', pre.size());
        if (dot != std::string::npos) {
            layer = std::stoi(hf.substr(pre.size(), dot - pre.size()));
            const std::string rest = hf.substr(dot + 1);
            if (rest.find("rotary_emb.inv_freq") != std::string::npos) return "";
            if (rest == "self_attn.sinks") return "blk." + std::to_string(layer) + ".attn_sinks.weight";  // gpt-oss
            const size_t last = rest.rfind('.');
            const std::string module = rest.substr(0, last), kind = rest.substr(last + 1);  // weight | bias
            static const std::map<std::string, std::string> common = {
                {"input_layernorm", "attn_norm"},        {"self_attn.q_proj", "attn_q"},
                {"self_attn.k_proj", "attn_k"},          {"self_attn.v_proj", "attn_v"},
                {"self_attn.o_proj", "attn_output"},     {"self_attn.q_norm", "attn_q_norm"},
                {"self_attn.k_norm", "attn_k_norm"},     {"self_attn.qkv_proj", "attn_qkv"},
                {"mlp.gate_proj", "ffn_gate"},           {"mlp.up_proj", "ffn_up"},
                {"mlp.down_proj", "ffn_down"},           {"mlp.gate_up_proj", "ffn_up"},
                {"pre_feedforward_layernorm", "ffn_norm"}, {"post_feedforward_layernorm", "post_ffw_norm"},
                {"mlp.gate", "ffn_gate_inp"},            {"block_sparse_moe.gate", "ffn_gate_inp"},
                {"mlp.router", "ffn_gate_inp"}};
            std::string g;
            if (module == "post_attention_layernorm")
                g = arch.gemma || arch.name == "gpt-oss" ? "post_attention_norm" : "ffn_norm";
            else if (const auto it = common.find(module); it != common.end()) g = it->second;
            if (!g.empty() && (kind == "weight" || kind == "bias"))
                return "blk." + std::to_string(layer) + "." + g + "." + kind;
        }
    }
    throw_unsupported("GGUF export: tensor " + hf + " has no llama.cpp name for arch " + arch.name);
}

bool is_q(const std::string& g) { return g.find(".attn_q.") != std::string::npos; }
bool is_k(const std::string& g) { return g.find(".attn_k.") != std::string::npos; }

// Rows of a q/k projection [Hq*D or Hkv*D, ...] from rotate-half order to interleaved pairs, per head:
// new row h*D + 2i + j <- old row h*D + j*D/2 + i.
void permute_rows(std::vector<float>& w, int64_t rows, int64_t cols, int64_t heads) {
    const int64_t d = rows / heads, half = d / 2;
    std::vector<float> out(w.size());
    for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < half; ++i)
            for (int64_t j = 0; j < 2; ++j)
                std::copy_n(w.begin() + (h * d + j * half + i) * cols, cols, out.begin() + (h * d + 2 * i + j) * cols);
    w.swap(out);
}

// ---------------------------------------------------------------------------------------------------------------
// Quant mixes

bool more_bits(int64_t layer, int64_t n) { return layer < n / 8 || layer >= 7 * n / 8 || (layer - n / 8) % 3 == 2; }

GgmlType base_type(GgufQuant q) {
    switch (q) {
    case GgufQuant::F32: return GgmlType::F32;
    case GgufQuant::F16: return GgmlType::F16;
    case GgufQuant::BF16: return GgmlType::BF16;
    case GgufQuant::Q8_0: return GgmlType::Q8_0;
    case GgufQuant::Q4_K_M: return GgmlType::Q4_K;
    case GgufQuant::Q5_K_M: return GgmlType::Q5_K;
    case GgufQuant::Q6_K: return GgmlType::Q6_K;
    }
    return GgmlType::F16;
}

GgmlType tensor_type(GgufQuant q, const std::string& g, const std::vector<int64_t>& shape, int64_t layer,
                     int64_t n_layers, bool tied) {
    if (shape.size() < 2 || g.size() < 7 || g.compare(g.size() - 7, 7, ".weight") != 0 ||
        g.find("_norm.weight") != std::string::npos)
        return GgmlType::F32;
    GgmlType t = base_type(q);
    const bool mix = q == GgufQuant::Q4_K_M || q == GgufQuant::Q5_K_M || q == GgufQuant::Q6_K;
    if (mix) {
        if (g == "output.weight" || (tied && g == "token_embd.weight")) t = GgmlType::Q6_K;
        else if (q != GgufQuant::Q6_K &&
                 (g.find(".attn_v.") != std::string::npos || g.find(".ffn_down.") != std::string::npos ||
                  g.find(".ffn_down_exps.") != std::string::npos) &&
                 more_bits(layer, n_layers))
            t = GgmlType::Q6_K;
        else if (g.find(".attn_qkv.") != std::string::npos)
            t = q == GgufQuant::Q4_K_M ? GgmlType::Q5_K : GgmlType::Q6_K;
    }
    // A row that does not fill whole blocks: llama_model_quantize's fallbacks (Q4_K -> Q5_0, Q5_K -> Q5_1,
    // Q6_K -> Q8_0, on blocks of 32), else F16.
    const int64_t row = shape.back();
    if (!gguf::gguf_type_fits(t, row)) {
        t = t == GgmlType::Q4_K ? GgmlType::Q5_0 : t == GgmlType::Q5_K ? GgmlType::Q5_1 : GgmlType::Q8_0;
        if (!gguf::gguf_type_fits(t, row)) t = GgmlType::F16;
    }
    return t;
}

uint32_t file_type(GgufQuant q) {  // llama_ftype
    switch (q) {
    case GgufQuant::F32: return 0;
    case GgufQuant::F16: return 1;
    case GgufQuant::Q8_0: return 7;
    case GgufQuant::Q4_K_M: return 15;
    case GgufQuant::Q5_K_M: return 17;
    case GgufQuant::Q6_K: return 18;
    case GgufQuant::BF16: return 32;
    }
    return 1;
}

// ---------------------------------------------------------------------------------------------------------------
// The plan: every tensor of the file, its source and type, before any data is read.

// A piece of a source tensor (the experts: one GGUF tensor gathers several checkpoint tensors or rows of one).
struct Source {
    std::string hf;
    int64_t first = 0, count = 0;  // elements of the (merged) tensor, in the decoder's layout when `layout` says
    ExpertLayout layout;           // gpt-oss: [E, in, out] and / or interleaved in the checkpoint (model/plan.h)
};

struct Planned {
    std::string hf;    // source tensor ("" for computed ones, and for gathered ones: sources)
    std::vector<Source> sources;
    std::string name;  // GGUF name
    std::vector<int64_t> shape;
    GgmlType type = GgmlType::F32;
    int64_t layer = -1;
    std::vector<float> computed;  // RoPE factor tensors
};

// RoPE frequency factors of llama3 scaling [D/2] (llama.cpp divides each frequency by its factor).
std::vector<float> llama3_rope_factors(const ModelConfig& c) {
    const RopeScaling& s = c.rope_scaling;
    const double pi = 3.14159265358979323846;
    const double low_wavelen = double(s.original_max_position_embeddings) / s.low_freq_factor;
    const double high_wavelen = double(s.original_max_position_embeddings) / s.high_freq_factor;
    std::vector<float> f;
    for (int64_t i = 0; i < c.head_dim; i += 2) {
        const double freq = 1.0 / std::pow(c.rope_theta, double(i) / double(c.head_dim));
        const double wavelen = 2 * pi / freq;
        if (wavelen < high_wavelen) f.push_back(1.0f);
        else if (wavelen > low_wavelen) f.push_back(float(s.factor));
        else {
            const double smooth = (double(s.original_max_position_embeddings) / wavelen - s.low_freq_factor) /
                                  (s.high_freq_factor - s.low_freq_factor);
            f.push_back(float(1.0 / ((1 - smooth) / s.factor + smooth)));
        }
    }
    return f;
}

// A mixture-of-experts layer's experts as llama.cpp stores them: ffn_gate_exps / ffn_up_exps [E, F, H] and
// ffn_down_exps [E, H, F], gathered from transformers 5's fused gate_up_proj [E, 2F, H] / down_proj, or from the
// Hub's one tensor per expert. `expert_tensors` collects the checkpoint names they consume.
void plan_experts(const ModelConfig& c, const SafetensorsSet& base, std::vector<Planned>& out,
                  std::set<std::string>& expert_tensors) {
    const ArchSpec spec = arch_spec(c);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        const MoeSpec& m = spec.layers[size_t(l)].moe;
        if (m.experts == 0) continue;
        const int64_t E = m.experts, F = m.intermediate, H = c.hidden_size;
        const std::string pre = "model.layers." + std::to_string(l) + ".", blk = "blk." + std::to_string(l) + ".";
        Planned gate, up, down;
        gate.name = blk + "ffn_gate_exps.weight";
        up.name = blk + "ffn_up_exps.weight";
        down.name = blk + "ffn_down_exps.weight";
        gate.shape = up.shape = {E, F, H};
        down.shape = {E, H, F};
        gate.layer = up.layer = down.layer = l;
        const std::string gu = pre + m.gate_up, dn = pre + m.down;
        if (m.transposed) {  // gpt-oss: [E, in, out], gate / up interleaved, biases; maybe MXFP4
            const ExpertLayout lgu{E, H, 2 * F, true, m.interleaved}, ldn{E, F, H, true, false};
            for (int64_t e = 0; e < E; ++e) {
                gate.sources.push_back({gu, e * 2 * F * H, F * H, lgu});
                up.sources.push_back({gu, e * 2 * F * H + F * H, F * H, lgu});
            }
            down.sources.push_back({dn, 0, E * H * F, ldn});
            for (const std::string& t : {gu, dn})
                for (const char* suffix : {"", "_blocks", "_scales", "_bias"}) expert_tensors.insert(t + suffix);
            if (m.expert_bias) {
                Planned gb, ub, db;
                gb.name = blk + "ffn_gate_exps.bias";
                ub.name = blk + "ffn_up_exps.bias";
                db.name = blk + "ffn_down_exps.bias";
                gb.shape = ub.shape = {E, F};
                db.shape = {E, H};
                gb.layer = ub.layer = db.layer = l;
                const ExpertLayout lb{E, 1, 2 * F, false, m.interleaved};
                for (int64_t e = 0; e < E; ++e) {
                    gb.sources.push_back({gu + "_bias", e * 2 * F, F, lb});
                    ub.sources.push_back({gu + "_bias", e * 2 * F + F, F, lb});
                }
                db.sources.push_back({dn + "_bias", 0, E * H, {}});
                out.push_back(std::move(gb));
                out.push_back(std::move(ub));
                out.push_back(std::move(db));
            }
        } else if (base.find(gu) && base.find(dn)) {  // transformers 5: fused
            for (int64_t e = 0; e < E; ++e) {
                gate.sources.push_back({gu, e * 2 * F * H, F * H});
                up.sources.push_back({gu, e * 2 * F * H + F * H, F * H});
            }
            down.sources.push_back({dn, 0, E * H * F});
            expert_tensors.insert(gu);
            expert_tensors.insert(dn);
        } else {
            for (int64_t e = 0; e < E; ++e) {
                const std::string x = pre + m.per_expert + "." + std::to_string(e) + ".";
                gate.sources.push_back({x + m.gate + ".weight", 0, F * H});
                up.sources.push_back({x + m.up + ".weight", 0, F * H});
                down.sources.push_back({x + m.down_name + ".weight", 0, H * F});
                for (const Planned* p : {&gate, &up, &down}) expert_tensors.insert(p->sources.back().hf);
            }
        }
        for (Planned* p : {&gate, &up, &down})
            for (const Source& s : p->sources)
                if (!base.find(s.hf) && !is_mxfp4_tensor(base, s.hf))
                    throw_invalid(base.source_name() + ": tensor " + s.hf + " is missing; config.json says layer " +
                                  std::to_string(l) + " has " + std::to_string(E) + " experts");
        out.push_back(std::move(gate));
        out.push_back(std::move(up));
        out.push_back(std::move(down));
    }
}

std::vector<Planned> plan_model(const SafetensorsSet& base, const ModelConfig& c, const GgufArch& arch, GgufQuant q) {
    std::vector<Planned> out;
    std::set<std::string> expert_tensors;
    plan_experts(c, base, out, expert_tensors);
    bool has_output = false;
    for (const SafetensorsFile& file : base.files())
        for (const TensorInfo& t : file.tensors()) {
            if (base.file_of(t.name) != file.path()) continue;
            if (!is_base_tensor(base, t.name)) continue;  // a 4-bit weight's absmax, quant_state, ...
            if (expert_tensors.count(t.name)) continue;   // gathered by plan_experts
            Planned p;
            p.hf = t.name;
            p.name = gguf_tensor_name(t.name, arch, c, p.layer);
            if (p.name.empty()) continue;
            p.shape = base_tensor_shape(base, t);  // a 4-bit weight: its float shape
            has_output |= p.name == "output.weight";
            out.push_back(std::move(p));
        }
    const bool tied = !has_output;
    for (Planned& p : out) p.type = tensor_type(q, p.name, p.shape, p.layer, c.num_hidden_layers, tied);
    auto computed = [&](std::string name, std::vector<double> v) {
        Planned p;
        p.name = std::move(name);
        p.computed.assign(v.begin(), v.end());
        p.shape = {int64_t(v.size())};
        out.push_back(std::move(p));
    };
    if (c.rope_scaling.type == RopeScalingType::Llama3) {
        const auto f = llama3_rope_factors(c);
        computed("rope_freqs.weight", std::vector<double>(f.begin(), f.end()));
    }
    if (c.rope_scaling.type == RopeScalingType::LongRope) {
        computed("rope_factors_long.weight", c.rope_scaling.long_factor);
        computed("rope_factors_short.weight", c.rope_scaling.short_factor);
    }
    return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Metadata

std::string model_name(const fs::path& model_dir) {
    fs::path p = fs::weakly_canonical(model_dir);
    if (p.filename().empty()) p = p.parent_path();
    if (p.parent_path().filename() == "snapshots") {
        std::string n = p.parent_path().parent_path().filename().string();  // models--org--name
        if (n.rfind("models--", 0) == 0) n = n.substr(8);
        const size_t s = n.find("--");
        return s == std::string::npos ? n : n.substr(s + 2);
    }
    return p.filename().string();
}

void add_hparams(GgufHeader& h, const ModelConfig& c, const GgufArch& arch) {
    const std::string a = arch.name + ".";
    h.add_u32(a + "context_length", uint32_t(c.max_position_embeddings));
    h.add_u32(a + "embedding_length", uint32_t(c.hidden_size));
    h.add_u32(a + "block_count", uint32_t(c.num_hidden_layers));
    h.add_u32(a + "feed_forward_length", uint32_t(c.intermediate_size));
    h.add_u32(a + "attention.head_count", uint32_t(c.num_attention_heads));
    h.add_u32(a + "attention.head_count_kv", uint32_t(c.num_key_value_heads));
    h.add_u32(a + "attention.key_length", uint32_t(c.head_dim));
    h.add_u32(a + "attention.value_length", uint32_t(c.head_dim));
    h.add_f32(a + "attention.layer_norm_rms_epsilon", float(c.rms_norm_eps));
    h.add_f32(a + "rope.freq_base", float(c.rope_theta));
    h.add_u32(a + "rope.dimension_count", uint32_t(c.rotary_dim()));
    h.add_u32(a + "vocab_size", uint32_t(c.vocab_size));
    if (c.num_experts > 0) {
        h.add_u32(a + "expert_count", uint32_t(c.num_experts));
        h.add_u32(a + "expert_used_count", uint32_t(c.num_experts_per_tok));
        if (arch.name == "qwen3moe" || arch.name == "gpt-oss")
            h.add_u32(a + "expert_feed_forward_length", uint32_t(c.moe_intermediate_size));
    }
    const RopeScaling& rs = c.rope_scaling;
    if (rs.type == RopeScalingType::Linear) {
        h.add_string(a + "rope.scaling.type", "linear");
        h.add_f32(a + "rope.scaling.factor", float(rs.factor));
    } else if (rs.type == RopeScalingType::LongRope) {
        h.add_f32(a + "rope.scaling.attn_factor", float(rs.attention_factor));
        h.add_u32(a + "rope.scaling.original_context_length", uint32_t(rs.original_max_position_embeddings));
    }
    if ((arch.name == "phi3" || arch.name == "gpt-oss") && c.sliding_window > 0)
        h.add_u32(a + "attention.sliding_window", uint32_t(c.sliding_window));
    if (rs.type == RopeScalingType::Yarn) {  // gpt-oss (llama.cpp rounds the correction range as truncate=true does)
        h.add_string(a + "rope.scaling.type", "yarn");
        h.add_f32(a + "rope.scaling.factor", float(rs.factor));
        h.add_u32(a + "rope.scaling.original_context_length", uint32_t(rs.original_max_position_embeddings));
        h.add_f32(a + "rope.scaling.yarn_beta_fast", float(rs.beta_fast));
        h.add_f32(a + "rope.scaling.yarn_beta_slow", float(rs.beta_slow));
    }
    if (arch.gemma) {
        if (c.sliding_window > 0) {
            h.add_u32(a + "attention.sliding_window", uint32_t(c.sliding_window));
            if (const int64_t p = swa_period(c); p > 0) h.add_u32(a + "attention.sliding_window_pattern", uint32_t(p));
        }
        if (c.attn_logit_softcapping > 0) h.add_f32(a + "attn_logit_softcapping", float(c.attn_logit_softcapping));
        if (c.final_logit_softcapping > 0) h.add_f32(a + "final_logit_softcapping", float(c.final_logit_softcapping));
        if (c.rope_local_theta > 0) h.add_f32(a + "rope.freq_base_swa", float(c.rope_local_theta));
    }
}

// The tokenizer as llama.cpp's vocab loader reads it, from tokenizer.json (+ tokenizer_config.json).
void add_tokenizer(GgufHeader& h, const fs::path& model_dir, const ModelConfig& c) {
    const fs::path tj = model_dir / "tokenizer.json";
    if (!fs::is_regular_file(tj))
        throw_invalid(model_dir.string() + ": no tokenizer.json; a GGUF needs the model's tokenizer");
    const Tokenizer tok = Tokenizer::load(model_dir);
    const nlohmann::json j = read_json_file(tj);
    const auto& model = j.at("model");
    if (model.value("type", std::string("BPE")) != "BPE")
        throw_unsupported(tj.string() + ": only BPE tokenizers are written to GGUF");
    const bool byte_level = tok.kind() == "byte-level BPE";

    // Vocabulary in id order, padded to the embedding rows.
    std::map<int64_t, std::string> by_id;
    for (const auto& [text, id] : model.at("vocab").items()) by_id[id.get<int64_t>()] = text;
    std::map<int64_t, bool> added;  // id -> special
    if (j.contains("added_tokens"))
        for (const auto& t : j["added_tokens"]) {
            const int64_t id = t.at("id").get<int64_t>();
            by_id[id] = t.at("content").get<std::string>();
            added[id] = t.value("special", false);
        }
    const int64_t n = c.vocab_size;
    if (!by_id.empty() && by_id.rbegin()->first >= n)
        throw_invalid(tj.string() + ": token id " + std::to_string(by_id.rbegin()->first) +
                      " does not fit the model's vocab_size " + std::to_string(n));
    // Merge ranks (SentencePiece-style vocabularies get them as scores: llama.cpp merges the highest score first).
    std::vector<std::string> merges;
    if (model.contains("merges"))
        for (const auto& m : model["merges"])
            merges.push_back(m.is_string() ? m.get<std::string>()
                                           : m.at(0).get<std::string>() + " " + m.at(1).get<std::string>());
    std::map<std::string, size_t> rank;
    for (size_t i = 0; i < merges.size(); ++i) {
        const size_t sp = merges[i].find(' ');
        rank.emplace(merges[i].substr(0, sp) + merges[i].substr(sp + 1), i);
    }
    const std::string unk = model.value("unk_token", nlohmann::json()).is_string() ? model["unk_token"].get<std::string>()
                                                                                   : tok.config().unk_token;
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<int32_t> types;
    for (int64_t id = 0; id < n; ++id) {
        const auto it = by_id.find(id);
        if (it == by_id.end()) {
            tokens.push_back("[PAD" + std::to_string(id) + "]");
            scores.push_back(-1e9f);
            types.push_back(5);  // UNUSED
            continue;
        }
        const std::string& s = it->second;
        tokens.push_back(s);
        const auto r = rank.find(s);
        scores.push_back(r == rank.end() ? 0.0f : -float(r->second));
        int32_t type = 1;  // NORMAL
        if (!byte_level && s == unk) type = 2;                                               // UNKNOWN
        else if (const auto a = added.find(id); a != added.end()) type = a->second ? 3 : 4;  // CONTROL | USER_DEFINED
        else if (!byte_level && s.size() == 6 && s.rfind("<0x", 0) == 0 && s[5] == '>') type = 6;  // BYTE
        types.push_back(type);
    }

    if (byte_level) {
        std::string pre;
        std::string regex;
        bool bytelevel_regex = false;
        const nlohmann::json& pt = j.value("pre_tokenizer", nlohmann::json());
        auto visit = [&](const nlohmann::json& p) {
            if (!p.is_object()) return;
            if (p.value("type", "") == "Split" && p.contains("pattern") && p["pattern"].contains("Regex"))
                regex = p["pattern"]["Regex"].get<std::string>();
            if (p.value("type", "") == "ByteLevel" && p.value("use_regex", true)) bytelevel_regex = true;
        };
        visit(pt);
        if (pt.is_object() && pt.contains("pretokenizers"))
            for (const auto& p : pt["pretokenizers"]) visit(p);
        static const std::string kLlama3 =
            "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
        static const std::string kQwen2 =
            "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
        if (regex == kLlama3) pre = "llama-bpe";
        else if (regex == kQwen2) pre = "qwen2";
        else if (regex.empty() && bytelevel_regex) pre = "gpt-2";
        else
            throw_unsupported(tj.string() + ": its pre-tokenizer (" + (regex.empty() ? std::string("none") : regex) +
                              ") is not one Tandem can name for llama.cpp (Llama 3, Qwen2 or GPT-2 splitting)");
        h.add_string("tokenizer.ggml.model", "gpt2");
        h.add_string("tokenizer.ggml.pre", pre);
        h.add_strings("tokenizer.ggml.tokens", tokens);
        h.add_i32s("tokenizer.ggml.token_type", types);
        h.add_strings("tokenizer.ggml.merges", merges);
    } else {
        // SentencePiece-style: llama.cpp adds the leading "▁" itself when add_space_prefix is set, as the
        // Prepend normalizer / Metaspace pre-tokenizer (prepend_scheme other than "never") does here.
        const std::string dump = j.value("normalizer", nlohmann::json()).dump() + j.value("pre_tokenizer", nlohmann::json()).dump();
        const bool prefix = dump.find("\"Prepend\"") != std::string::npos ||
                            (dump.find("\"Metaspace\"") != std::string::npos && dump.find("\"never\"") == std::string::npos &&
                             dump.find("\"add_prefix_space\":false") == std::string::npos);
        h.add_string("tokenizer.ggml.model", "llama");
        h.add_string("tokenizer.ggml.pre", "default");
        h.add_strings("tokenizer.ggml.tokens", tokens);
        h.add_f32s("tokenizer.ggml.scores", scores);
        h.add_i32s("tokenizer.ggml.token_type", types);
        h.add_bool("tokenizer.ggml.add_space_prefix", prefix);
    }
    // Special ids: tokenizer_config.json's tokens, else config.json's ids.
    auto id_of = [&](const std::string& s) -> std::optional<int32_t> {
        if (s.empty()) return std::nullopt;
        return tok.token_to_id(s);
    };
    std::optional<int32_t> bos = tok.bos_id(), eos = tok.eos_id(), pad = tok.pad_id(), unk_id = id_of(unk);
    if (!bos && !c.bos_token_ids.empty()) bos = int32_t(c.bos_token_ids.front());
    if (!eos && !c.eos_token_ids.empty()) eos = int32_t(c.eos_token_ids.front());
    if (bos) h.add_u32("tokenizer.ggml.bos_token_id", uint32_t(*bos));
    if (eos) h.add_u32("tokenizer.ggml.eos_token_id", uint32_t(*eos));
    if (unk_id) h.add_u32("tokenizer.ggml.unknown_token_id", uint32_t(*unk_id));
    if (pad) h.add_u32("tokenizer.ggml.padding_token_id", uint32_t(*pad));
    // add_bos / add_eos: tokenizer_config.json's flags, else what the post-processor does.
    const std::vector<int32_t> probe = tok.encode("a", true), plain = tok.encode("a", false);
    const bool add_bos = tok.config().add_bos_token.value_or(bos && probe.size() > plain.size() && probe.front() == *bos);
    const bool add_eos = tok.config().add_eos_token.value_or(eos && probe.size() > plain.size() && probe.back() == *eos);
    h.add_bool("tokenizer.ggml.add_bos_token", add_bos);
    h.add_bool("tokenizer.ggml.add_eos_token", add_eos);
    if (!tok.config().chat_template.empty()) h.add_string("tokenizer.chat_template", tok.config().chat_template);
}

// ---------------------------------------------------------------------------------------------------------------
// Output folder: written under a temporary name next to out_dir, renamed at the end.

struct TempDir {
    fs::path tmp, target;
    bool overwrite = false;
    TempDir(const fs::path& out_dir, bool overwrite_) : target(out_dir), overwrite(overwrite_) {
        std::error_code ec;
        if (fs::exists(out_dir, ec) && !overwrite && !fs::is_empty(out_dir, ec))
            throw_invalid(out_dir.string() + ": exists and is not empty; choose another folder, or allow overwriting");
        const fs::path parent = out_dir.parent_path().empty() ? fs::path(".") : out_dir.parent_path();
        fs::create_directories(parent, ec);
        tmp = parent / (out_dir.filename().string() + ".partial-" +
                        std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
        fs::create_directories(tmp, ec);
        if (ec || !fs::is_directory(tmp))
            throw_io(tmp.string() + ": cannot create the export folder" + (ec ? ": " + ec.message() : std::string()) +
                     "; choose a folder you can write to");
    }
    ~TempDir() {
        std::error_code ec;
        if (!tmp.empty()) fs::remove_all(tmp, ec);
    }
    void commit() {
        std::error_code ec;
        if (fs::exists(target, ec)) {
            fs::remove_all(target, ec);
            if (ec) throw_io(target.string() + ": cannot replace it: " + ec.message());
        }
        fs::rename(tmp, target, ec);
        if (ec) throw_io(target.string() + ": cannot move the export into place: " + ec.message());
        tmp.clear();
    }
};

void check_cancel(const GgufOptions& o) {
    if (o.cancel && o.cancel->load()) throw Error(ErrorCategory::Cancelled, "export cancelled");
}

// Quantizes `w` (rows of shape.back() values) row by row and hands the bytes to the writer in pieces of ~4 MiB.
void write_values(gguf::GgufStreamWriter& out, GgmlType type, const std::vector<float>& w, int64_t row,
                  std::vector<std::byte>& buf) {
    const uint64_t rb = gguf::ggml_row_bytes(type, row);
    const int64_t rows = int64_t(w.size()) / row;
    const int64_t per = std::max<int64_t>(1, int64_t((uint64_t(4) << 20) / std::max<uint64_t>(rb, 1)));
    for (int64_t r0 = 0; r0 < rows; r0 += per) {
        const int64_t nr = std::min(per, rows - r0);
        buf.resize(size_t(uint64_t(nr) * rb));
        for (int64_t r = 0; r < nr; ++r)
            gguf::quantize_row(type, std::span<const float>(w.data() + (r0 + r) * row, size_t(row)),
                               std::span<std::byte>(buf.data() + uint64_t(r) * rb, rb));
        out.write(buf);
    }
}

GgufHeader model_header(const fs::path& model_dir, const ModelConfig& c, const GgufArch& arch,
                        const std::vector<Planned>& plan, GgufQuant q) {
    GgufHeader h;
    h.add_string("general.architecture", arch.name);
    h.add_string("general.type", "model");
    h.add_string("general.name", model_name(model_dir));
    h.add_u32("general.file_type", file_type(q));
    if (q != GgufQuant::F32 && q != GgufQuant::F16 && q != GgufQuant::BF16) h.add_u32("general.quantization_version", 2);
    add_hparams(h, c, arch);
    add_tokenizer(h, model_dir, c);
    for (const Planned& p : plan) h.add_tensor(p.name, p.shape, p.type);
    return h;
}

// --- Modelfile -------------------------------------------------------------------------------------------------

struct ChatFormat {
    const char* name;
    const char* marker;     // present in the Jinja source
    const char* end;        // end-of-turn token
    const char* sys_begin;  // what precedes the system prompt in a rendering
    const char* sys_end;    // what follows it
    const char* tmpl;       // Ollama (Go) template
};

const ChatFormat kFormats[] = {
    {"chatml", "<|im_start|>", "<|im_end|>", "<|im_start|>system\n", "<|im_end|>",
     "{{- if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}"
     "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n"},
    {"llama3", "<|start_header_id|>", "<|eot_id|>", "<|start_header_id|>system<|end_header_id|>\n\n", "<|eot_id|>",
     "{{- if .System }}<|start_header_id|>system<|end_header_id|>\n\n{{ .System }}<|eot_id|>{{ end }}"
     "{{- range .Messages }}<|start_header_id|>{{ .Role }}<|end_header_id|>\n\n{{ .Content }}<|eot_id|>{{ end }}"
     "<|start_header_id|>assistant<|end_header_id|>\n\n"},
    {"gemma", "<start_of_turn>", "<end_of_turn>", "<start_of_turn>user\n", "\n\n",
     "{{- range $i, $_ := .Messages }}<start_of_turn>{{ if eq .Role \"assistant\" }}model{{ else }}{{ .Role }}{{ end }}\n"
     "{{ if and (eq $i 0) $.System }}{{ $.System }}\n\n{{ end }}{{ .Content }}<end_of_turn>\n{{ end }}<start_of_turn>model\n"},
    {"phi3", "<|assistant|>", "<|end|>", "<|system|>\n", "<|end|>",
     "{{- if .System }}<|system|>\n{{ .System }}<|end|>\n{{ end }}"
     "{{- range .Messages }}<|{{ .Role }}|>\n{{ .Content }}<|end|>\n{{ end }}<|assistant|>\n"},
    {"inst", "[INST]", "</s>", "[INST] ", "\n\n",
     "{{- range $i, $_ := .Messages }}{{ if eq .Role \"user\" }}[INST] {{ if and (eq $i 0) $.System }}{{ $.System }}\n\n"
     "{{ end }}{{ .Content }} [/INST]{{ else if eq .Role \"assistant\" }} {{ .Content }}</s>{{ end }}{{ end }}"},
};

std::string quoted(const std::string& s) {
    std::string o = "\"";
    for (char ch : s) {
        if (ch == '"' || ch == '\\') o += '\\';
        o += ch;
    }
    return o + "\"";
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------

GgufQuant parse_gguf_quant(const std::string& name) {
    std::string n = name;
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
    if (n == "f32" || n == "fp32") return GgufQuant::F32;
    if (n == "f16" || n == "fp16") return GgufQuant::F16;
    if (n == "bf16") return GgufQuant::BF16;
    if (n == "q8_0") return GgufQuant::Q8_0;
    if (n == "q4_k_m") return GgufQuant::Q4_K_M;
    if (n == "q5_k_m") return GgufQuant::Q5_K_M;
    if (n == "q6_k") return GgufQuant::Q6_K;
    throw_invalid("GGUF quant '" + name + "': expected f16, bf16, q8_0, q4_k_m, q5_k_m or q6_k (f32 too)");
}

std::string gguf_quant_name(GgufQuant q) {
    switch (q) {
    case GgufQuant::F32: return "F32";
    case GgufQuant::F16: return "F16";
    case GgufQuant::BF16: return "BF16";
    case GgufQuant::Q8_0: return "Q8_0";
    case GgufQuant::Q4_K_M: return "Q4_K_M";
    case GgufQuant::Q5_K_M: return "Q5_K_M";
    case GgufQuant::Q6_K: return "Q6_K";
    }
    return "?";
}

std::string gguf_model_file_name(GgufQuant q) { return "model-" + gguf_quant_name(q) + ".gguf"; }
std::string gguf_lora_file_name(GgufQuant q) { return "adapter-" + gguf_quant_name(q) + ".gguf"; }

void write_gguf_model(const fs::path& model_dir, const ModelConfig& model, const LoraConfig& lora,
                      const LoraTensors& tensors, const fs::path& out_dir, const GgufOptions& options) {
    const GgufArch arch = gguf_arch(model);
    const LoraMerge merge(model, lora, tensors);
    const SafetensorsSet base = SafetensorsSet::open(model_dir);
    for (const std::string& name : merge.missing_in(base))
        throw_invalid(base.source_name() + ": the adapter adapts " + name + ", which the model does not have");
    const std::vector<Planned> plan = plan_model(base, model, arch, options.quant);
    const GgufHeader header = model_header(model_dir, model, arch, plan, options.quant);
    const std::string file = gguf_model_file_name(options.quant);
    const std::string modelfile = ollama_modelfile(model_dir, model, file);

    TempDir dir(out_dir, options.overwrite);
    const uint64_t total = header.file_size();
    gguf::GgufStreamWriter out(dir.tmp / file, header);
    std::vector<float> w, held_values;
    std::string held;  // the merged checkpoint tensor held_values holds (the experts' sources)
    std::vector<std::byte> buf;
    for (const Planned& p : plan) {
        check_cancel(options);
        if (!p.sources.empty()) {  // experts: pieces of merged checkpoint tensors (each read and merged once)
            w.clear();
            for (const Source& s : p.sources) {
                if (s.hf != held) {
                    const TensorInfo* found = base.find(s.hf);
                    const TensorInfo& t = found ? *found : base.at(s.hf + "_blocks");  // MXFP4: dequantized
                    read_base_tensor(base, t, held_values, "the GGUF export");
                    merge.apply(s.hf, base_tensor_shape(base, t), held_values, base.source_name());
                    if (s.layout.experts > 0)
                        held_values = expert_tensor_from_checkpoint(std::move(held_values), s.layout);
                    held = s.hf;
                }
                if (s.first + s.count > int64_t(held_values.size()))
                    throw_invalid(base.source_name() + ": tensor " + s.hf + " is smaller than config.json implies");
                w.insert(w.end(), held_values.begin() + s.first, held_values.begin() + s.first + s.count);
            }
        } else if (p.hf.empty()) {
            w = p.computed;
        } else {
            const TensorInfo& t = base.at(p.hf);
            read_base_tensor(base, t, w, "the GGUF export");  // 4-bit weights dequantized first
            merge.apply(t.name, p.shape, w, base.source_name());
            if (arch.gemma && p.name.find("norm.weight") != std::string::npos)
                for (float& v : w) v += 1.0f;
            if (arch.permute_qk && (is_q(p.name) || is_k(p.name))) {
                const int64_t heads = is_q(p.name) ? model.num_attention_heads : model.num_key_value_heads;
                permute_rows(w, p.shape[0], p.shape.size() > 1 ? p.shape[1] : 1, heads);
            }
        }
        write_values(out, p.type, w, p.shape.back(), buf);
        if (options.progress) options.progress(out.written(), total);
    }
    out.finish();
    write_file_atomic(dir.tmp / kModelfileName, modelfile);
    dir.commit();
}

void write_gguf_lora(const fs::path& model_dir, const ModelConfig& model, const LoraConfig& lora,
                     const LoraTensors& tensors, const fs::path& out_dir, const GgufOptions& options) {
    const GgufArch arch = gguf_arch(model);
    if (options.quant != GgufQuant::F32 && options.quant != GgufQuant::F16 && options.quant != GgufQuant::BF16)
        throw_invalid("GGUF LoRA adapter: --quant must be f32, f16 or bf16 (got " + gguf_quant_name(options.quant) + ")");
    const LoraMerge check(model, lora, tensors);  // the same validation as the merge
    const GgmlType type = base_type(options.quant);

    GgufHeader h;
    h.add_string("general.architecture", arch.name);
    h.add_string("general.type", "adapter");
    h.add_string("general.name", model_name(model_dir) + "-lora");
    h.add_u32("general.file_type", file_type(options.quant));
    h.add_string("adapter.type", "lora");
    // llama.cpp scales by alpha / r; the adapter's scaling is alpha / r, or alpha / sqrt(r) with rsLoRA.
    h.add_f32("adapter.lora.alpha", float(lora.scaling() * double(lora.r)));
    struct Item {
        const LoraTensorSpec* spec;
        std::string name;
    };
    std::vector<Item> items;
    const std::vector<LoraTensorSpec> specs = lora_tensor_specs(model, lora);
    for (const LoraTensorSpec& s : specs) {
        if (s.experts > 0)
            throw_unsupported("GGUF LoRA adapter: the adapter adapts the experts (" + s.module +
                              "), which llama.cpp's LoRA adapters cannot hold; export --format gguf (the adapter "
                              "merged into the model) instead");
        int64_t layer = -1;
        const std::string g = gguf_tensor_name(lora_module_path(s.layer, s.path) + ".weight", arch, model, layer);
        items.push_back({&s, g + (s.is_a ? ".lora_a" : ".lora_b")});
        const int64_t row = s.shape.back();
        h.add_tensor(items.back().name, s.shape, gguf::gguf_type_fits(type, row) ? type : GgmlType::F32);
    }

    TempDir dir(out_dir, options.overwrite);
    const uint64_t total = h.file_size();
    const std::string file = gguf_lora_file_name(options.quant);
    gguf::GgufStreamWriter out(dir.tmp / file, h);
    std::vector<float> w;
    std::vector<std::byte> buf;
    for (size_t i = 0; i < items.size(); ++i) {
        check_cancel(options);
        const LoraTensorSpec& s = *items[i].spec;
        w = tensors.at(s.name);
        if (!s.is_a && arch.permute_qk && (is_q(items[i].name) || is_k(items[i].name)))
            permute_rows(w, s.shape[0], s.shape[1],
                         is_q(items[i].name) ? model.num_attention_heads : model.num_key_value_heads);
        write_values(out, h.tensors()[i].type, w, s.shape.back(), buf);
        if (options.progress) options.progress(out.written(), total);
    }
    out.finish();
    dir.commit();
}

uint64_t estimate_gguf_model_bytes(const fs::path& model_dir, const ModelConfig& model, GgufQuant q) {
    const GgufArch arch = gguf_arch(model);
    const SafetensorsSet base = SafetensorsSet::open(model_dir);
    GgufHeader h;
    for (const Planned& p : plan_model(base, model, arch, q)) h.add_tensor(p.name, p.shape, p.type);
    std::error_code ec;
    const auto tj = fs::file_size(model_dir / "tokenizer.json", ec);
    return h.file_size() + (ec ? 0 : uint64_t(tj));
}

std::string ollama_modelfile(const fs::path& model_dir, const ModelConfig& model, const std::string& gguf_file) {
    std::string out = "# Ollama Modelfile written by Tandem: ollama create NAME -f Modelfile\nFROM ./" + gguf_file + "\n";
    std::optional<Tokenizer> tok;
    try {
        tok.emplace(Tokenizer::load(model_dir));
    } catch (const Error&) {
    }
    const std::string src = tok ? tok->config().chat_template : std::string();
    const ChatFormat* fmt = nullptr;
    for (const ChatFormat& f : kFormats)
        if (!src.empty() && src.find(f.marker) != std::string::npos) {
            fmt = &f;
            break;
        }
    std::string system;
    if (fmt) {
        out += "TEMPLATE \"\"\"" + std::string(fmt->tmpl) + "\"\"\"\n";
        // The default system prompt: what the template puts in the system slot when given none.
        try {
            const ChatTemplate ct = ChatTemplate::compile(src, tok->config().bos_token, tok->config().eos_token);
            const std::string user = "\x01TANDEM_USER\x01";
            const std::string r = ct.render(nlohmann::json::array({{{"role", "user"}, {"content", user}}}), true);
            const size_t u = r.find(user), b = r.find(fmt->sys_begin);
            if (u != std::string::npos && b != std::string::npos && b < u) {
                const size_t s = b + std::string(fmt->sys_begin).size();
                const size_t e = r.find(fmt->sys_end, s);
                if (e != std::string::npos && e <= u) system = r.substr(s, e - s);
            }
        } catch (const Error&) {
        }
    } else if (!src.empty()) {
        out += "# The model's chat template is not one Tandem translates (ChatML, Llama 3, Gemma, Phi-3, [INST]);\n"
               "# prompts are passed through as they are.\nTEMPLATE \"\"\"{{ .Prompt }}\"\"\"\n";
    } else {
        out += "TEMPLATE \"\"\"{{ .Prompt }}\"\"\"\n";
    }
    // Every end token: the tokenizer's eos, the ids of config.json / generation_config.json, the format's end.
    std::vector<std::string> stops;
    auto add = [&](const std::string& s) {
        if (!s.empty() && std::find(stops.begin(), stops.end(), s) == stops.end()) stops.push_back(s);
    };
    if (fmt && (!tok || tok->token_to_id(fmt->end))) add(fmt->end);
    if (tok) {
        add(tok->config().eos_token);
        std::vector<int64_t> ids = model.eos_token_ids;
        std::error_code ec;
        if (fs::is_regular_file(model_dir / "generation_config.json", ec)) {
            try {
                const nlohmann::json g = read_json_file(model_dir / "generation_config.json", size_t(1) << 20);
                if (g.contains("eos_token_id")) {
                    const auto& e = g["eos_token_id"];
                    if (e.is_number_integer()) ids.push_back(e.get<int64_t>());
                    else if (e.is_array())
                        for (const auto& v : e)
                            if (v.is_number_integer()) ids.push_back(v.get<int64_t>());
                }
            } catch (const std::exception&) {
            }
        }
        for (int64_t id : ids) add(tok->id_to_token(int32_t(id)));
    }
    for (const std::string& s : stops) out += "PARAMETER stop " + quoted(s) + "\n";
    if (!system.empty()) out += "SYSTEM \"\"\"" + system + "\"\"\"\n";
    return out;
}

}  // namespace tandem
