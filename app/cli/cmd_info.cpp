// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// `tandem-cli info MODEL_DIR [--json]` — what a model folder holds: architecture, sizes, parameter count,
// dtype, tokenizer and chat template, and whether Tandem can train it (or why not). Validates the folder the
// way training will (every tensor the config implies, with the right shape), so a folder that passes `info`
// loads.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "tandem/model_dir.h"
#include "tandem/tokenizer.h"

namespace tandem::cli {
namespace {

std::string human_count(int64_t n) {
    char buf[32];
    if (n >= 1'000'000'000) std::snprintf(buf, sizeof buf, "%.2fB", n / 1e9);
    else if (n >= 1'000'000) std::snprintf(buf, sizeof buf, "%.2fM", n / 1e6);
    else if (n >= 1'000) std::snprintf(buf, sizeof buf, "%.1fK", n / 1e3);
    else std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(n));
    return buf;
}

std::string human_bytes(uint64_t n) {
    char buf[32];
    if (n >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", n / double(1ull << 30));
    else if (n >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", n / double(1ull << 20));
    else std::snprintf(buf, sizeof buf, "%.1f KiB", n / 1024.0);
    return buf;
}

std::string rope_scaling_name(const RopeScaling& r) {
    switch (r.type) {
    case RopeScalingType::None: return "none";
    case RopeScalingType::Linear: return "linear";
    case RopeScalingType::Llama3: return "llama3";
    case RopeScalingType::LongRope: return "longrope";
    case RopeScalingType::Yarn: return "yarn";
    }
    return "?";
}

std::string join(const std::vector<std::string>& v, const char* sep) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
    return s;
}

}  // namespace

Run add_info_command(CLI::App& app) {
    struct Opts {
        std::string dir;
        bool json = false;
    };
    auto o = std::make_shared<Opts>();
    auto* sub = app.add_subcommand("info", "Describe a Hugging Face model folder and check Tandem can use it");
    sub->add_option("MODEL_DIR", o->dir, "model folder (config.json, *.safetensors, tokenizer.json)")->required();
    sub->add_flag("--json", o->json, "print JSON instead of text");
    return [o]() {
        const ModelInfo info = inspect_model_dir(o->dir);
        const ModelConfig& c = info.config;
        // The tokenizer is optional for `info`: a folder without one is still described.
        std::optional<Tokenizer> tok;
        if (info.has_tokenizer_json) tok.emplace(Tokenizer::load(info.dir));
        nlohmann::ordered_json j;
        j["path"] = info.dir.string();
        j["architecture"] = c.architecture;
        j["model_type"] = c.model_type;
        j["supported"] = c.supported;
        if (!c.supported) j["unsupported_reason"] = c.unsupported_reason;
        j["demo"] = false;
        j["hidden_size"] = c.hidden_size;
        j["intermediate_size"] = c.intermediate_size;
        j["num_hidden_layers"] = c.num_hidden_layers;
        j["num_attention_heads"] = c.num_attention_heads;
        j["num_key_value_heads"] = c.num_key_value_heads;
        j["head_dim"] = c.head_dim;
        j["vocab_size"] = c.vocab_size;
        j["max_position_embeddings"] = c.max_position_embeddings;
        j["rope_theta"] = c.rope_theta;
        j["rope_scaling"] = rope_scaling_name(c.rope_scaling);
        j["rms_norm_eps"] = c.rms_norm_eps;
        j["tie_word_embeddings"] = c.tie_word_embeddings;
        j["attention_bias"] = c.attention_bias;
        j["qk_norm"] = c.qk_norm;
        if (c.num_experts) {
            j["num_experts"] = c.num_experts;
            j["num_experts_per_tok"] = c.num_experts_per_tok;
        }
        j["parameters"] = info.parameter_count;
        j["dtypes"] = info.dtypes;
        const WeightQuantization& q = c.quantization;
        const std::string quant =
            q.prequantized ? "4-bit " + q.quant_type + " (bitsandbytes" + (q.double_quant ? ", double quantization" : "") +
                                 "): trained as QLoRA"
                           : "none";
        j["quantization"] = q.prequantized ? nlohmann::ordered_json{{"method", "bitsandbytes"},
                                                                    {"quant_type", q.quant_type},
                                                                    {"double_quant", q.double_quant},
                                                                    {"skip_modules", q.skip_modules}}
                                           : nlohmann::ordered_json(nullptr);
        j["weight_files"] = info.weight_files.size();
        j["weight_bytes"] = info.weight_bytes;
        j["tokenizer"] = tok ? nlohmann::ordered_json{{"kind", tok->kind()},
                                                       {"vocab_size", tok->vocab_size()},
                                                       {"bos_token", tok->config().bos_token},
                                                       {"eos_token", tok->config().eos_token}}
                             : nlohmann::ordered_json(nullptr);
        j["chat_template"] = info.has_chat_template;
        j["notes"] = info.notes;
        // The built-in demo model says so in its config.json.
        try {
            std::ifstream in(info.config_path);
            j["demo"] = nlohmann::json::parse(in).contains("tandem_demo");
        } catch (...) {
        }

        if (o->json) {
            std::cout << j.dump(2) << "\n";
            return 0;
        }
        std::cout << "model         " << info.dir.string() << (j["demo"].get<bool>() ? "  (built-in demo: random weights, not trained)" : "") << "\n"
                  << "architecture  " << c.architecture << " (" << c.model_type << ")  "
                  << (c.supported ? "supported" : "not yet supported: " + c.unsupported_reason) << "\n"
                  << "layers        " << c.num_hidden_layers << "  hidden " << c.hidden_size << "  intermediate "
                  << c.intermediate_size << "\n"
                  << "attention     " << c.num_attention_heads << " heads, " << c.num_key_value_heads
                  << " kv heads, head_dim " << c.head_dim << (c.attention_bias ? ", qkv bias" : "")
                  << (c.qk_norm ? ", q/k norm" : "") << "\n"
                  << "positions     " << c.max_position_embeddings << "  rope theta " << c.rope_theta << ", scaling "
                  << rope_scaling_name(c.rope_scaling) << "  rms eps " << c.rms_norm_eps << "\n";
        if (c.num_experts)
            std::cout << "experts       " << c.num_experts << " (" << c.num_experts_per_tok << " per token)\n";
        std::cout << "vocab         " << c.vocab_size << (c.tie_word_embeddings ? "  (tied embeddings)" : "") << "\n"
                  << "parameters    " << info.parameter_count << " (" << human_count(info.parameter_count) << ")\n"
                  << "weights       " << info.weight_files.size() << " safetensors file(s), "
                  << join(info.dtypes, "/") << ", " << human_bytes(info.weight_bytes) << "\n"
                  << "quantization  " << quant << "\n";
        if (tok)
            std::cout << "tokenizer     " << tok->kind() << ", " << tok->vocab_size() << " ids, bos '"
                      << tok->config().bos_token << "', eos '" << tok->config().eos_token << "'\n";
        else
            std::cout << "tokenizer     none (tokenizer.json missing)\n";
        std::cout << "chat template " << (info.has_chat_template ? "yes" : "none (built-ins: chatml, alpaca, llama3)")
                  << "\n";
        for (const auto& n : info.notes) std::cout << "note          " << n << "\n";
        return 0;
    };
}

}  // namespace tandem::cli
