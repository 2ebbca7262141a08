// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Fuzzes reading a PEFT adapter folder's weights (read_peft_adapter, engine/export/peft_adapter.cpp): the
// tensor names PEFT writes (base_model.model.model.layers.N.<module>.lora_A.weight, ...), their pairing,
// shapes and dtypes, on top of the safetensors reader. The first input byte picks one of the four
// adapter_config.json files of tests/fixtures/peft (for the 2-layer Qwen3 of tests/fixtures/models/qwen3) or
// a fifth with a rank_pattern (the reader zero-pads the smaller rank);
// the rest is adapter_model.safetensors.
#include <array>
#include <cstring>

#include "export/peft_adapter.h"
#include "fuzz_common.h"

namespace {

const tandem::ModelConfig& qwen3() {
    static const tandem::ModelConfig c = tandem::parse_model_config(
        nlohmann::json::parse(R"({"architectures": ["Qwen3ForCausalLM"], "head_dim": 32, "hidden_size": 64,
          "intermediate_size": 96, "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
          "vocab_size": 101, "max_position_embeddings": 256, "tie_word_embeddings": false})"),
        "tests/fixtures/models/qwen3/config.json");
    return c;
}

// The LoRA keys of tests/fixtures/peft/{bf16,layers,regex,regex_layer}/adapter_config.json, and one with patterns.
constexpr std::array<const char*, 5> kConfigs = {
    R"j({"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 2, "lora_alpha": 4, "target_modules": ["q_proj", "gate_proj"]})j",
    R"j({"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 2, "lora_alpha": 4, "target_modules": ["k_proj", "o_proj"],
        "layers_to_transform": [0]})j",
    R"j({"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 2, "lora_alpha": 4, "target_modules": ".*\\.(q_proj|v_proj)"})j",
    R"j({"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 2, "lora_alpha": 4,
        "target_modules": "model\\.layers\\.1\\.mlp\\.(up|down)_proj"})j",
    // rank_pattern with one scaling: q_proj's rank-2 tensors are zero-padded to v_proj's rank 4.
    R"j({"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 2, "lora_alpha": 4, "target_modules": ["q_proj", "v_proj"],
        "rank_pattern": {"v_proj": 4}, "alpha_pattern": {"v_proj": 8}})j",
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const char* config = kConfigs[data[0] % kConfigs.size()];
    const auto dir = tandem::fuzz::scratch_dir() / "adapter";
    tandem::fuzz::write_scratch("adapter/adapter_config.json", reinterpret_cast<const uint8_t*>(config),
                                std::strlen(config));
    tandem::fuzz::write_scratch("adapter/adapter_model.safetensors", data + 1, size - 1);
    tandem::fuzz::run_parser([&] { (void)tandem::read_peft_adapter(dir, qwen3()); });
    return 0;
}
