// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Learning-rate schedules and per-micro-batch seeds of the trainer. The schedules are transformers'
// LambdaLR multipliers; `current_step` is the number of optimizer steps already taken (0 for the first
// step, so with warmup the first step runs at lr 0, exactly as HF's Trainer does):
//   warmup (all three):  current_step < W  ->  current_step / max(1, W)
//   constant (get_constant_schedule_with_warmup):  1
//   linear   (get_linear_schedule_with_warmup):    max(0, (T - current_step) / max(1, T - W))
//   cosine   (get_cosine_schedule_with_warmup, num_cycles = 0.5):
//            p = (current_step - W) / max(1, T - W);  max(0, 0.5 * (1 + cos(pi * 2 * 0.5 * p)))
// W = warmup steps, T = total optimizer steps. Arithmetic in double like Python's floats.
#pragma once

#include <cstdint>

#include "tandem/run_config.h"

namespace tandem::train {

double lr_multiplier(LrSchedule schedule, int64_t current_step, int64_t warmup_steps, int64_t total_steps);

// warmup_steps when > 0, else ceil(warmup_ratio * total_steps) (HF's TrainingArguments.get_warmup_steps).
int64_t resolve_warmup_steps(const TrainingConfig& training, int64_t total_steps);

// LoRA dropout seed of micro-batch `micro` of optimizer step `step` (1-based): splitmix64 mixing of the
// three, so it depends on nothing but the run seed and the position — resume reproduces it.
uint64_t dropout_seed(uint64_t seed, int64_t step, int32_t micro);

}  // namespace tandem::train
