// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// 4-bit base weights in bitsandbytes' layout (QLoRA's NF4, and FP4 for loading): the codes, the per-block
// absmax (optionally double-quantized to 8 bits), and the ops that make and read them on the CPU backend.
// n = elements of the weight [OUT,IN] in row-major order, blocks = ceil(n / blocksize).
// The layout, as bitsandbytes' quantize_4bit writes it and *-bnb-4bit checkpoints store it:
//  - codes [ceil(n/2)] uint8: element 2i in the high nibble of byte i, element 2i+1 in the low nibble (an odd
//    n pads the last low nibble with the code of 0.0).
//  - A block's scale is absmax = max |x| over its elements; element x is stored as the code whose value
//    (code[16]: the NF4 table, quantiles of N(0,1) scaled to [-1,1]) is nearest to x / absmax, the ties and
//    thresholds being the midpoints of neighbouring values; value = code[c] * absmax.
//  - Double quantization (compress_statistics): offset = mean(absmax) is subtracted and absmax - offset is
//    quantized blockwise to 8 bits (blocks of nested_blocksize = 256, bitsandbytes' signed dynamic code
//    nested_code[256], binary search to the nearest code); absmax = nested_code[q] * nested_absmax + offset.
// Decisions a reader must know:
//  - The scale is x * (1 / absmax), the reciprocal rounded once, as bitsandbytes computes it. Its CUDA kernels
//    are built with --use_fast_math, so there the reciprocal is the GPU's rcp.approx (within one ulp); the
//    CUDA twins use that same instruction and are bit-identical to bitsandbytes' CUDA kernels. The CPU twins
//    use the IEEE reciprocal (bitsandbytes' torch backend does the same), so a CPU code can differ from the
//    CUDA one only for an element whose scaled value lies within an ulp of a threshold (tests check exactly
//    that).
//  - dequantize_4bit here writes fp32 (the product code * absmax, not rounded); the CUDA twin rounds that
//    product to bf16 once, as bitsandbytes' dequantize_4bit to a bf16 weight does.
#pragma once

#include <cstdint>

#include "core/quant4.h"


namespace tandem::cpu {

// out[count] = the values of elements first .. first+count-1 of w (fp32, see the header comment). first and
// count are any element range inside [0, n).
void dequantize_4bit(float* out, const Quant4Ref& w, int64_t first, int64_t count);

// FP8 GEMMs on a 4-bit weight (kernels/cuda/nf4.h's twin): the slot [OUT, IN] at element `first` dequantized,
// each value rounded to bf16 (as the CUDA dequantize_4bit rounds it), then quantize_fp8_weight (kernels/cpu/fp8.h),
// and with `transposed` fp8_transpose of that; computed one 128x128 block at a time (no copy of the slot). The same
// codes and scales as CUDA's, bit for bit.
void dequantize_4bit_fp8(uint8_t* codes, float* scales, const Quant4Ref& w, int64_t first, int OUT, int IN,
                         bool transposed);

// codes[ceil(n/2)], absmax[blocks] (fp32) = NF4 quantization of in[n] in blocks of `blocksize`.
void quantize_4bit(uint8_t* codes, float* absmax, const float* in, int64_t n, int blocksize);

// The offset of double quantization: mean(absmax[n]) (summed in double, rounded to float once).
float absmax_mean(const float* absmax, int64_t n);

// q[n], block_absmax[ceil(n/blocksize)] = 8-bit blockwise quantization of (in[i] - offset) to `code` (sorted,
// 256 values): per block absmax = max |in - offset|, code = the nearest of code[] to (in - offset) / absmax
// (bitsandbytes' binary search and midpoint rule).
void quantize_blockwise_8bit(uint8_t* q, float* block_absmax, const float* in, float offset, const float* code,
                             int64_t n, int blocksize);

// The NF4 code of a scaled value (x in [-1, 1]; NaN gives code 0, as bitsandbytes' tree does).
uint8_t nf4_code_of(float x);

}  // namespace tandem::cpu
