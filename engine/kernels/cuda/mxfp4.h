// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// MXFP4 weights on the CUDA backend (twin of kernels/cpu/mxfp4.h; the layout is described there): gpt-oss's
// experts stay 4-bit on the device and one parameter at a time is dequantized into a bf16 workspace before its
// grouped GEMMs. Device pointers; the values are exact in bf16 (E2M1 times a power of two).
#pragma once

#include <cstdint>

#include "core/cuda/context.h"

namespace tandem::cuda {

// out[G, R, C] bf16 from codes [G, R, C / 2] and scales [G, R, C / 32] (interleaved rows: kernels/cpu/mxfp4.h).
void dequantize_mxfp4(bf16* out, const uint8_t* codes, const uint8_t* scales, int64_t groups, int rows, int cols,
                      bool interleaved);

// Random weights for the benchmarks: uniform codes and every scale byte = scale (n codes bytes, n / 16 scales).
void fill_random_mxfp4(uint8_t* codes, uint8_t* scales, int64_t code_bytes, uint64_t seed, uint8_t scale);

}  // namespace tandem::cuda
