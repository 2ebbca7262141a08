// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// FP8 base GEMMs on the CUDA backend (twins of kernels/cpu/fp8.h; layouts and rounding in core/fp8.h).
// quantize_fp8_weight runs at load (fp32 input); quantize_fp8_rows and fp8_transpose run in front of every FP8
// GEMM (bf16 activations / output gradients); fp8_matmul is cuBLASLt's block-scaled FP8 GEMM (Hopper:
// BLK128x128_32F for the weight, VEC128_32F for the activations, fp32 accumulation, bf16 output), in
// matmul.cu beside the bf16 GEMMs so it shares their plan cache.
#pragma once

#include <cstdint>

#include "core/cuda/context.h"
#include "core/fp8.h"

namespace tandem::cuda {

// codes[OUT, INp], scales[ceil(OUT/128), INp/128] from w[OUT, IN] (fp32, device).
void quantize_fp8_weight(uint8_t* codes, float* scales, const float* w, int OUT, int IN);

// codes[fp8_code_rows(rows), Kp] and the scales (core/fp8.h's layout) from x[rows, K].
void quantize_fp8_rows(uint8_t* codes, float* scales, const bf16* x, int rows, int K);

// quantize_fp8_rows of an output gradient: E4M3, as every quantization here. The CPU backend's E5M2 ablation
// (kernels/cpu/fp8.h, TANDEM_FP8_GRADS=e5m2) is refused here, never ignored.
void quantize_fp8_grad_rows(uint8_t* codes, float* scales, const bf16* x, int rows, int K);

// wt_codes[IN, OUTp], wt_scales[ceil(IN/128), OUTp/128] from codes[OUT, INp], scales[ceil(OUT/128), INp/128].
void fp8_transpose(uint8_t* wt_codes, float* wt_scales, const uint8_t* codes, const float* scales, int OUT, int IN);

// out[N, M] = beta * out + x[N, K] @ w[M, K]^T (+ bias[M]); x and w FP8 as above; beta 0 or 1. Rows up to
// fp8_head_rows(N) in one GEMM, the rest (N not a multiple of 16) as a 16-row GEMM into tail [16, M] (a
// scratch; may be nullptr when N is a multiple of 16), copied out.
void fp8_matmul(bf16* out, const uint8_t* x_codes, const float* x_scales, const uint8_t* w_codes,
                const float* w_scales, const bf16* bias, int N, int K, int M, float beta, bf16* tail);

}  // namespace tandem::cuda
