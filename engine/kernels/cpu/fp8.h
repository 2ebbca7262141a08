// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// FP8 base GEMMs on the CPU backend (twins of kernels/cuda/fp8.h): the block quantization of weights and
// activations, the weight transpose the input-gradient GEMM needs, and the block-scaled GEMM itself, in the
// layouts of core/fp8.h.
// Decisions a reader must know:
//  - The CPU backend emulates FP8 exactly where the GPU is exact: the same codes and scales (e4m3_code and
//    fp8_scale_of are shared host/device code), so a CUDA code equals the CPU code for the same input values.
//  - fp8_matmul sums each 128-wide block's code products in double, multiplies by the two scales in fp32 and
//    accumulates the blocks in fp32 (cuBLASLt promotes per block into an fp32 accumulator too; its order inside
//    a block differs, so the two agree to fp32 rounding, not bit for bit). The double sums are exact (fp8_matmul.cpp
//    says why), so they are OpenBLAS dgemm calls: any order, the same bits.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/fp8.h"

namespace tandem::cpu {

// One step of a block's max |x|: NaN once any element is NaN or infinite (core/fp8.h: the scale then shows it).
inline float fp8_amax_step(float amax, float x) {
    const float a = std::fabs(x);
    if (!(a <= 3.4e38f)) return NAN;  // NaN, inf
    return std::isnan(amax) ? amax : std::max(amax, a);
}

// codes[OUT, INp], scales[ceil(OUT/128), fp8_scale_ld(IN)] = the 128x128-block quantization of w[OUT, IN]
// (core/fp8.h; the grid's pad entries 1).
void quantize_fp8_weight(uint8_t* codes, float* scales, const float* w, int OUT, int IN);

// codes[fp8_code_rows(rows), Kp], scales[fp8_code_rows(rows) * Kp/128] (core/fp8.h's layout) = the per-row
// 128-column quantization of x[rows, K]; the pad columns (K..Kp) and pad rows are code 0, pad rows scale 1.
void quantize_fp8_rows(uint8_t* codes, float* scales, const float* x, int rows, int K);

// quantize_fp8_rows of an output gradient (the input-gradient GEMM's x). With E5M2 (core/fp8.h fp8_grad_format) each
// (row, 128-column block) is first rounded to the E5M2 grid under its own scale amax / 57344 (e5m2_round); those
// values are then E4M3 codes under amax / 448 exactly, down to amax * 2^-14.8 (the scales differ by 2^7, and
// E4M3's 3 mantissa bits hold E5M2's 2), so the GEMM sees E5M2's rounding; smaller values, under 2^-14.8 of their
// block's largest, take E4M3's subnormal grid instead.
void quantize_fp8_grad_rows(uint8_t* codes, float* scales, const float* x, int rows, int K);
// The same in a given format (the tests').
void quantize_fp8_grad_rows_as(Fp8GradFormat format, uint8_t* codes, float* scales, const float* x, int rows, int K);

// The transposed weight for the input gradient: wt_codes[IN, OUTp], wt_scales[ceil(IN/128), fp8_scale_ld(OUT)]
// from codes[OUT, INp], scales[ceil(OUT/128), fp8_scale_ld(IN)] (code (o, i) moves to (i, o); block (bo, bi) to
// (bi, bo); the pad columns OUT..OUTp are code 0, the grid's pad entries 1). Exact: no rounding.
void fp8_transpose(uint8_t* wt_codes, float* wt_scales, const uint8_t* codes, const float* scales, int OUT, int IN);

// out[N, M] = beta * out + x[N, K] @ w[M, K]^T (+ bias[M]) with x and w FP8 (x as quantize_fp8_rows writes it;
// w: codes [M, Kp] and scales [ceil(M/128), fp8_scale_ld(K)]). beta is 0 (forward) or 1 (the input gradient
// accumulates). tail: the CUDA twin's scratch for a row count that is not a multiple of 16 (unused here).
void fp8_matmul(float* out, const uint8_t* x_codes, const float* x_scales, const uint8_t* w_codes,
                const float* w_scales, const float* bias, int N, int K, int M, float beta, float* tail = nullptr);

}  // namespace tandem::cpu
