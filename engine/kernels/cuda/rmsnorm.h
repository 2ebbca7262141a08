// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// RMSNorm on the CUDA backend (twin of kernels/cpu/rmsnorm.h), plus the fused residual-add variant the
// block uses. bf16 in/out, fp32 statistics; one warp (or block for wide rows) per row.
#pragma once

#include "core/cuda/context.h"

namespace tandem::cuda {

// out[N,C] = inp * rstd * weight, rstd[N] (fp32) written. out may alias inp. Also q/k norm (N=T*H, C=D).
// weight_offset is added to every weight in fp32 (Gemma's (1 + w)).
void rmsnorm_forward(bf16* out, float* rstd, const bf16* inp, const bf16* weight, int N, int C, float eps,
                     float weight_offset = 0.0f);

// Fused residual + norm: residual[N,C] = a + b (rounded to bf16), then out = rmsnorm(residual) as above.
// residual may alias a or b.
void residual_rmsnorm_forward(bf16* residual, bf16* out, float* rstd, const bf16* a, const bf16* b,
                              const bf16* weight, int N, int C, float eps, float weight_offset = 0.0f);

// FP8 models: the norm above (with residual and b: the fused residual form; both nullptr: the plain one of a) whose
// output is also quantized for the FP8 GEMMs it feeds, codes / scales in quantize_fp8_rows' layout (core/fp8.h,
// kernels/cuda/fp8.h), from the bf16 values stored: the same codes as quantize_fp8_rows of out. One pass where
// C % 128 == 0 and the pointers are 16-byte aligned; otherwise the norm, then quantize_fp8_rows.
void rmsnorm_forward_fp8(bf16* residual, bf16* out, uint8_t* codes, float* scales, float* rstd, const bf16* a,
                         const bf16* b, const bf16* weight, int N, int C, float eps, float weight_offset);

// dinp[N,C] += d/d(inp) of dout (fp32 math, one bf16 rounding of the sum); dweight[C] (fp32) += optional
// (nullptr to skip). dinp must not alias dout or inp.
void rmsnorm_backward(bf16* dinp, float* dweight, const bf16* dout, const bf16* inp, const bf16* weight,
                      const float* rstd, int N, int C, float weight_offset = 0.0f);

// FP8 models: rmsnorm_backward's dinp += (no dweight) whose updated dinp is also quantized, as rmsnorm_forward_fp8
// quantizes its output: the output gradient of the FP8 GEMM it feeds (the residual stream's gradient). One pass
// where C % 128 == 0 and the pointers are 16-byte aligned; otherwise the backward, then quantize_fp8_rows.
void rmsnorm_backward_fp8(bf16* dinp, uint8_t* codes, float* scales, const bf16* dout, const bf16* inp,
                          const bf16* weight, const float* rstd, int N, int C, float weight_offset);

}  // namespace tandem::cuda
