// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// 4-bit weights on the CUDA backend (twins of kernels/cpu/nf4.h; the layout and the rules are described
// there). Quant4Ref's pointers are device pointers. The quantization kernels compute the block scale with
// the GPU's rcp.approx (as bitsandbytes' --use_fast_math kernels do), so their codes are bit-identical to
// bitsandbytes' CUDA quantize_4bit / quantize_blockwise.
#pragma once

#include <cstdint>

#include "core/cuda/context.h"
#include "core/quant4.h"

namespace tandem::cuda {

// out[count] (bf16) = elements first .. first+count-1 of w, each code * absmax rounded to bf16 once.
void dequantize_4bit(bf16* out, const Quant4Ref& w, int64_t first, int64_t count);

// codes[ceil(n/2)], absmax[blocks] = NF4 quantization of in[n] (fp32) in blocks of `blocksize` (64 or 128).
void quantize_4bit(uint8_t* codes, float* absmax, const float* in, int64_t n, int blocksize);

// q[n], block_absmax[ceil(n/blocksize)] = 8-bit blockwise quantization of in[n] - offset to the sorted
// 256-value `code` (device); blocksize 256.
void quantize_blockwise_8bit(uint8_t* q, float* block_absmax, const float* in, float offset, const float* code,
                             int64_t n, int blocksize);

}  // namespace tandem::cuda
