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

// FP8 GEMMs on a 4-bit weight (precision fp8 with quantization nf4): the slot [OUT, IN] at element `first`,
// dequantized as dequantize_4bit does (code * absmax rounded to bf16), then quantized in 128x128 blocks as
// quantize_fp8_weight does (kernels/cuda/fp8.h): codes [OUT, fp8_padded(IN)] and scales [fp8_blocks(OUT),
// fp8_scale_ld(IN)], or with `transposed` the layout fp8_transpose writes (codes [IN, fp8_padded(OUT)], scales
// [fp8_blocks(IN), fp8_scale_ld(OUT)]) for the input-gradient GEMM. One pass over the 4-bit codes.
void dequantize_4bit_fp8(uint8_t* codes, float* scales, const Quant4Ref& w, int64_t first, int OUT, int IN,
                         bool transposed);

// codes[ceil(n/2)], absmax[blocks] = NF4 quantization of in[n] (fp32) in blocks of `blocksize` (64 or 128).
void quantize_4bit(uint8_t* codes, float* absmax, const float* in, int64_t n, int blocksize);

// q[n], block_absmax[ceil(n/blocksize)] = 8-bit blockwise quantization of in[n] - offset to the sorted
// 256-value `code` (device); blocksize 256.
void quantize_blockwise_8bit(uint8_t* q, float* block_absmax, const float* in, float offset, const float* code,
                             int64_t n, int blocksize);

}  // namespace tandem::cuda
