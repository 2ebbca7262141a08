// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Architecture presets: the ModelConfig of a few well-known models by name, without their files, for
// benchmarks and memory planning on random weights (`tandem-cli bench --config qwen3-0.6b`).
// Decision a reader must know: each preset is the model's real Hugging Face config.json (the fields that
// matter for shapes, copied from the hub) run through parse_model_config, so a preset means exactly what
// the downloaded folder would — same defaults, same validation, same parameter count.
// bench/hf_peft_baseline.py holds the same configs as Python dicts; change both together.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/model_config.h"

namespace tandem {

// "qwen3-0.6b", "llama-3.2-1b", "llama-3.1-8b", "tiny-llama" (2 layers, hidden 256: smoke tests), "qwen3-14b",
// "qwen3-30b-a3b" (Qwen3-MoE: 128 experts, 8 per token). nullopt for an unknown name.
std::optional<ModelConfig> architecture_preset(std::string_view name);

// The names above, in that order (for help texts and error messages).
std::vector<std::string> architecture_preset_names();

// The config.json a preset is parsed from (nullopt for an unknown name): what a baseline needs to build
// the same architecture.
std::optional<nlohmann::json> architecture_preset_json(std::string_view name);

}  // namespace tandem
