// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Internal entry to the trainer: build a Trainer from a model and tokenized data that are already loaded.
// Trainer::prepare (prepare.cpp) loads the model + data and calls this; tests pass a fake model.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tandem/data.h"
#include "tandem/trainer.h"
#include "train/trainable_model.h"

namespace tandem::train {

struct TrainerInputs {
    RunConfig config;  // validated by make_trainer
    std::unique_ptr<TrainableModel> model;
    TokenizedDataset train;
    TokenizedDataset validation;  // empty: no evaluation
    int32_t pad_id = 0;
    std::optional<MemoryPlan> planned;  // a backend's prediction made before loading (Trainer::plan returns it)
    std::vector<std::string> notes;     // decisions to report when the run starts (device, checkpointing)
};

Trainer make_trainer(TrainerInputs inputs, TrainerOptions options);

}  // namespace tandem::train
