// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// What the Model page shows about a model folder, gathered off the GUI thread through the engine's public
// API exactly as `tandem-cli info` does: inspect_model_dir (config, every tensor's shape, dtypes) plus the
// tokenizer when the folder has one. A pre-quantized checkpoint's quantization is described in words
// (describeQuantization). Every failure becomes `error` (with the engine's message, which names
// the file and what to do), never an exception: the page only has to display the result.
#pragma once

#include <QString>
#include <QStringList>

#include <cstdint>

#include "tandem/model_config.h"

namespace tandem::ui {

struct ModelInspection {
    QString folder;
    bool inspected = false;  // inspect_model_dir succeeded (the fields below are filled)
    bool supported = false;  // trainable by Tandem
    QString reason;          // why not, when !supported (the engine's message)
    QString architecture;    // "LlamaForCausalLM"
    QString modelType;       // "llama"
    int64_t layers = 0;
    int64_t hiddenSize = 0;
    int64_t contextLength = 0;  // max_position_embeddings
    int64_t parameters = 0;
    int64_t experts = 0;           // mixture of experts: experts per MoE layer (0: dense)
    int64_t expertsPerToken = 0;
    int64_t activeParameters = 0;  // the parameters one token runs through (= parameters when dense)
    QStringList dtypes;  // {"BF16"}
    // A pre-quantized (bitsandbytes *-bnb-4bit) checkpoint's format, e.g. "4-bit NF4 (bitsandbytes, double
    // quantization): trains as QLoRA"; empty for float weights.
    QString quantization;
    uint64_t weightBytes = 0;
    QString tokenizer;  // "SentencePiece BPE, 356 ids" or why there is none
    bool hasTokenizer = false;
    bool hasChatTemplate = false;
    bool demo = false;  // the built-in demo model (random weights)
    QStringList notes;  // the engine's remarks (ignored files, skipped checks)
};

// A pre-quantized checkpoint's quantization in words ("4-bit NF4 (bitsandbytes, double quantization): trains as
// QLoRA"); empty when the projections are stored in float.
QString describeQuantization(const WeightQuantization& q, bool trainable);

// Runs on a worker thread. Never throws.
ModelInspection inspectModelFolder(const QString& folder);

// Writes the built-in demo model into `folder` unless a complete one is already there, then inspects it.
// Runs on a worker thread. Never throws (a write failure becomes the result's reason).
ModelInspection createAndInspectDemo(const QString& folder);

// "1.24B", "494.0M", "12.3K", "512"
QString humanCount(int64_t n);
// "1.50 GiB", "12.0 MiB", "3.0 KiB"
QString humanBytes(uint64_t bytes);

}  // namespace tandem::ui
