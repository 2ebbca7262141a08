// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// LoRA adapters in Hugging Face PEFT's on-disk layout: a folder with adapter_config.json and
// adapter_model.safetensors, so PEFT, vLLM and llama.cpp's converter load what we write, and we load what
// PEFT writes.
// Decisions a reader must know:
//  - Tensor names are PEFT's saved names for a *ForCausalLM base:
//    base_model.model.model.layers.{i}.self_attn.q_proj.lora_A.weight  A [r, in_features]
//    base_model.model.model.layers.{i}.mlp.down_proj.lora_B.weight     B [out_features, r]
//    in/out come from the base weight's shape in expected_tensors() (q_proj out is heads*head_dim, which
//    is not hidden_size for Qwen3). The update is W + scaling * B A.
//  - We write fp32 (F32, metadata {"format": "pt"}) through the safetensors writer, which mirrors the
//    reference library byte for byte; adapter_config.json holds PEFT's keys (sorted, indent 2, ASCII, as
//    PEFT's json.dumps writes them) and nothing else, so any PEFT version loads it without warnings.
//  - The reader accepts what PEFT writes for plain LoRA on the seven projections and refuses, with
//    Error{Unsupported} saying which feature, what changes the math in a way we do not implement (DoRA,
//    biases, modules_to_save, fan_in_fan_out, rank/alpha patterns that give modules different scalings, ...).
//    rank_pattern with one scaling (PEFT writes it when it turns an MoE model's gate_proj / up_proj targets
//    into gate_up_proj of rank 2r, alpha 2 alpha) is read by zero-padding the smaller ranks to the largest: the
//    same B A; written back, the adapter has that one rank everywhere and no patterns (the same update in
//    PEFT). F16/BF16 files are converted to fp32.
//  - Each file is written atomically. The two files are not one transaction: the weights are written
//    first, then the config (readers look for the config first); if the config cannot be written, a
//    weights file we just created is removed again (an overwritten one cannot be restored).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/lora_table.h"
#include "tandem/lora.h"
#include "tandem/model_config.h"

namespace tandem {

inline constexpr const char* kPeftConfigName = "adapter_config.json";
inline constexpr const char* kPeftWeightsName = "adapter_model.safetensors";

struct PeftAdapter {
    LoraConfig config;
    std::string base_model_name_or_path;  // as written in adapter_config.json ("" for null)
    LoraTensors tensors;                  // exactly the names lora_tensor_specs() gives
    // rank_pattern: the (layer, target) modules whose file tensors hold fewer ranks than config.r (the largest);
    // read_peft_adapter zero-pads them to config.r, which leaves their B A as it was.
    std::map<std::pair<int64_t, std::string>, int> ranks;
};

// adapter_config.json as we write it (PEFT's keys for a LoRA CAUSAL_LM adapter).
nlohmann::json peft_adapter_config_json(const LoraConfig& config, const std::string& base_model_name_or_path);

struct PeftWriteOptions {
    bool overwrite = false;  // replace an existing adapter in `dir`
};

// Writes dir/adapter_model.safetensors and dir/adapter_config.json (creating `dir`). `tensors` must hold
// exactly the names of lora_tensor_specs(model, config), each with the spec's element count and only
// finite values. Throws Error{InvalidInput} for a bad config, missing/extra/misshapen/non-finite tensors,
// `dir` being a file, or an existing adapter when !options.overwrite; Error{Io} when writing fails.
void write_peft_adapter(const std::filesystem::path& dir, const LoraConfig& config, const ModelConfig& model,
                        const std::string& base_model_name_or_path, const LoraTensors& tensors,
                        const PeftWriteOptions& options = {});

// Parses adapter_config.json into a LoraConfig, resolving target_modules (list, module name, regex,
// "all-linear") against the model's module paths. Keys it leaves out take PEFT's defaults (r 8, alpha 8).
// `source` names the file in errors.
PeftAdapter parse_peft_adapter_config(const nlohmann::json& json, const ModelConfig& model, const std::string& source);

// Reads a PEFT adapter folder for `model`: config, then every tensor (F32/F16/BF16 -> fp32), checking that
// each lora_A/lora_B exists, in pairs, with the shape the model and r imply, and that nothing else is there.
// Error{InvalidInput}: missing files, malformed config, missing/unexpected/misshapen tensors (naming the
// tensor, its shape and the expected one). Error{Unsupported}: features we do not implement (see above),
// adapter_model.bin (pickle).
PeftAdapter read_peft_adapter(const std::filesystem::path& dir, const ModelConfig& model);

}  // namespace tandem
