// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Settings that are valid but probably not what the user wants, said on the Train page before Train is
// pressed: a learning rate far above what LoRA trains with, a rank above the model's hidden size, a max seq
// len above the model's context (the engine caps it and only a log line would say so), precision FP8 on a model
// too small to gain from it. They warn and never block: validate_run_config and the memory estimate decide what
// cannot run.
#pragma once

#include <QStringList>

#include <cstdint>

#include "tandem/run_config.h"

namespace tandem::ui {

inline constexpr double kHighLearningRate = 1e-2;

// What the Model page knows of the chosen model; 0 = unknown (the check is skipped).
struct ModelShape {
    int64_t hiddenSize = 0;
    int64_t contextLength = 0;  // max_position_embeddings
};

// One sentence per finding, in the Train page's words, each saying what to change.
QStringList plausibilityWarnings(const tandem::RunConfig& config, const ModelShape& model);

}  // namespace tandem::ui
