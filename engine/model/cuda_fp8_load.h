// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The CUDA model's load of FP8 projections (see model/fp8_load.h): each band of 128 rows goes through the
// staging span as fp32 (make_plan reserves 6 bytes per element of the widest band) and is quantized on the
// device by quantize_fp8_weight, the CPU's rounding.
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/plan.h"
#include "tandem/safetensors.h"

namespace tandem {

struct Fp8Stage {
    char* base = nullptr;
    size_t bytes = 0;
};

// Entry e's codes and scales from its float checkpoint tensor.
void upload_fp8(const ArenaLayout& W, void* weights_base, const WeightEntry& e, const SafetensorsSet& ws,
                const Fp8Stage& stage);

// A random model's FP8 projection: uniform(-bound, bound) bf16 values (one seed per band), then quantized.
void random_fp8(const ArenaLayout& W, void* weights_base, const WeightEntry& e, uint64_t seed, float bound,
                const Fp8Stage& stage);

}  // namespace tandem
