// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Internal entry to the trainer: build a Trainer from a model and tokenized data that are already loaded.
// Trainer::prepare (prepare.cpp) loads the model + data and calls this; tests pass a fake model.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tandem/data.h"
#include "tandem/trainer.h"
#include "train/data_parallel.h"
#include "train/rendezvous.h"
#include "train/trainable_model.h"

namespace tandem::train {

// Turns the loaded (and, on resume, restored) model into this process's share of a multi-process world:
// given the fingerprint of what is about to be trained, it meets the other processes (rendezvous) and wraps
// the model (Trainer::prepare builds it from DistributedOptions; make_trainer calls it last).
using Distribute =
    std::function<std::unique_ptr<DataParallelModel>(std::unique_ptr<TrainableModel>, const std::vector<FingerprintPart>&)>;

struct TrainerInputs {
    RunConfig config;  // validated by make_trainer
    std::unique_ptr<TrainableModel> model;
    TokenizedDataset train;
    TokenizedDataset validation;  // empty: no evaluation
    int32_t pad_id = 0;
    std::optional<MemoryPlan> planned;  // a backend's prediction made before loading (Trainer::plan returns it)
    std::vector<std::string> notes;     // decisions to report when the run starts (device, checkpointing)
    Distribute distribute;              // several processes (TrainerOptions::distributed); empty: one
};

Trainer make_trainer(TrainerInputs inputs, TrainerOptions options);

}  // namespace tandem::train
