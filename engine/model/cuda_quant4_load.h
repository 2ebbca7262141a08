// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The CUDA model's load of 4-bit projections (see model/quant4_load.h): pre-quantized parts copied up as they
// are, float weights streamed from the mapped file through the workspace in chunks and quantized on the
// device (NF4 + double quantization, bit-identical to bitsandbytes' CUDA kernels), random ones (benchmarks)
// drawn on the device and quantized. CUDA builds only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/plan.h"
#include "tandem/safetensors.h"

namespace tandem {

// The workspace the load may use: stage_bytes at stage (the workspace arena, free during load). It must hold
// one tensor's fp32 absmax (y.quant_max_blocks floats) plus kQuant4StageBytes (make_plan ensures it).
struct Quant4Stage {
    char* base = nullptr;
    size_t bytes = 0;
    int64_t max_blocks = 0;
};

// Entry e's pieces (weights arena W at weights_base, device memory) from the checkpoint.
void upload_quant4(const ArenaLayout& W, void* weights_base, const WeightEntry& e, const Dims& d,
                   const SafetensorsSet& ws, const Quant4Stage& stage);

// Elements first .. first+count-1 of a float checkpoint tensor (float_tensor checked it) as fp32 at dst (device):
// BF16 through bf16_scratch (count bf16, device) and a conversion kernel, F32 straight, F16 / F64 converted on the
// host in `host` (pageable copies: each returns once the driver staged it, so `host` may be refilled).
void upload_as_f32(float* dst, void* bf16_scratch, const TensorInfo& t, int64_t first, int64_t count,
                   std::vector<float>& host);

// Entry e's pieces from uniform(-bound, bound) bf16 weights drawn with `seed` and quantized.
void random_quant4(const ArenaLayout& W, void* weights_base, const WeightEntry& e, const Dims& d, uint64_t seed,
                   float bound, const Quant4Stage& stage);

}  // namespace tandem
