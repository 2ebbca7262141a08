// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Fuzzes adapter_config.json -> LoRA settings (parse_peft_adapter_config, engine/export/peft_adapter.cpp):
// target_modules as a list, a module name, a regex or "all-linear", layers_to_transform, the refused LoRA
// variants. Each input is resolved against three small models: Llama (separate q/k/v, gate/up), a Qwen3-MoE
// (target_parameters of the experts) and Phi-3
// (fused qkv_proj, gate_up_proj), since module resolution differs between them.
#include "core/files.h"
#include "export/peft_adapter.h"
#include "fuzz_common.h"

namespace {

const tandem::ModelConfig& model(int which) {
    static const tandem::ModelConfig llama = tandem::parse_model_config(
        nlohmann::json::parse(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 16,
          "intermediate_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
          "vocab_size": 50})"),
        "llama config");
    static const tandem::ModelConfig phi3 = tandem::parse_model_config(
        nlohmann::json::parse(R"({"architectures": ["Phi3ForCausalLM"], "hidden_size": 16,
          "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
          "vocab_size": 50})"),
        "phi3 config");
    static const tandem::ModelConfig moe = tandem::parse_model_config(  // target_parameters: the experts
        nlohmann::json::parse(R"({"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 16,
          "intermediate_size": 32, "moe_intermediate_size": 8, "num_experts": 4, "num_experts_per_tok": 2,
          "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 4,
          "vocab_size": 50})"),
        "qwen3-moe config");
    return which == 0 ? llama : which == 1 ? phi3 : moe;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    nlohmann::json j;
    bool parsed = false;
    tandem::fuzz::run_parser([&] {
        j = tandem::parse_json(tandem::fuzz::as_string(data, size), "adapter_config.json");
        parsed = true;
    });
    if (!parsed) return 0;
    for (int m = 0; m < 3; ++m)
        tandem::fuzz::run_parser([&] {
            const auto a = tandem::parse_peft_adapter_config(j, model(m), "adapter_config.json");
            (void)tandem::peft_adapter_config_json(a.config, a.base_model_name_or_path);
        });
    return 0;
}
