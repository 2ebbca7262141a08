// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Loading FP8 projections (precision fp8; model/plan.h Fp8Pieces, core/fp8.h): a float checkpoint tensor is
// quantized at load, 128 rows at a time, on the backend that holds it (the CPU here, CUDA in
// cuda_fp8_load.h), with the same rounding on both.
#pragma once

#include "tandem/safetensors.h"
#include "model/plan.h"

namespace tandem {

// CPU backend: entry e's codes and scales in the weights arena at base (host memory).
void load_fp8_host(const ArenaLayout& W, void* base, const WeightEntry& e, const SafetensorsSet& ws);

// The tensor of entry e, checked: its element count is the projection's and its dtype converts to fp32.
const TensorInfo& fp8_source_tensor(const SafetensorsSet& ws, const WeightEntry& e);

}  // namespace tandem
