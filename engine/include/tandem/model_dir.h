// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Hugging Face model folders: config.json + safetensors weights (single file, or index + shards) +
// tokenizer files. inspect_model_dir() validates a folder the way training will use it — every tensor the
// config implies must exist with the right shape and a floating-point dtype — and reports what is there.
// Pickle checkpoints (pytorch_model.bin, *.pt, *.pth, *.ckpt) are refused: unpickling runs arbitrary code.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tandem/model_config.h"
#include "tandem/safetensors.h"

namespace tandem {

struct ModelInfo {
    std::filesystem::path dir;
    std::filesystem::path config_path;
    ModelConfig config;
    std::vector<std::filesystem::path> weight_files;  // the .safetensors files in use, sorted
    std::filesystem::path index_file;                 // model.safetensors.index.json, or empty
    bool has_tokenizer_json = false;
    bool has_tokenizer_config = false;
    bool has_chat_template = false;  // "chat_template" in tokenizer_config.json, or chat_template.jinja/.json
    bool has_generation_config = false;
    std::vector<std::string> dtypes;  // distinct dtypes of the model's tensors, e.g. {"BF16"}
    uint64_t weight_bytes = 0;        // tensor data bytes in the weight files
    // Elements over the tensors the model uses, read from the file headers (equals
    // config.parameter_count() when tensors_checked). Unchecked: all tensors except rotary_emb.inv_freq.
    int64_t parameter_count = 0;
    bool tensors_checked = false;            // false for parsed-but-not-trainable architectures
    std::vector<std::string> extra_tensors;  // in the files but not used (e.g. rotary_emb.inv_freq)
    std::vector<std::string> notes;          // remarks for the user (ignored files, skipped checks)
};

// Throws Error{InvalidInput} for a missing folder, a missing/invalid config.json, missing or misshapen
// tensors (naming the tensor, its shape and the expected one), broken index/shards; Error{Unsupported} for
// unknown architectures, pickle-only folders (with how to convert), quantized dtypes.
ModelInfo inspect_model_dir(const std::filesystem::path& dir);

// inspect_model_dir plus the mapped weights, for loading.
struct ModelDir {
    ModelInfo info;
    SafetensorsSet weights;
};
ModelDir open_model_dir(const std::filesystem::path& dir);

}  // namespace tandem
