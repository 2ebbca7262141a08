// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// See schedule.h for the formulas.
#include "train/schedule.h"

#include "core/random.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace tandem::train {

double lr_multiplier(LrSchedule schedule, int64_t current_step, int64_t warmup_steps, int64_t total_steps) {
    const double step = static_cast<double>(current_step);
    if (current_step < warmup_steps) return step / static_cast<double>(std::max<int64_t>(1, warmup_steps));
    const double decay_span = static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
    switch (schedule) {
        case LrSchedule::Constant: return 1.0;
        case LrSchedule::Linear:
            return std::max(0.0, static_cast<double>(total_steps - current_step) / decay_span);
        case LrSchedule::Cosine: {
            const double progress = static_cast<double>(current_step - warmup_steps) / decay_span;
            return std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * 2.0 * 0.5 * progress)));
        }
    }
    return 1.0;
}

int64_t resolve_warmup_steps(const TrainingConfig& t, int64_t total_steps) {
    if (t.warmup_steps > 0) return t.warmup_steps;
    return static_cast<int64_t>(std::ceil(static_cast<double>(total_steps) * t.warmup_ratio));
}

uint64_t dropout_seed(uint64_t seed, int64_t step, int32_t micro) {
    return splitmix64(splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(step)) ^ static_cast<uint64_t>(micro));
}

}  // namespace tandem::train
