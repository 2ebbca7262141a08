// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// RMSNorm on the CPU backend, as transformers' LlamaRMSNorm / Qwen3RMSNorm (weight * x / sqrt(mean(x^2)+eps)).
// N = rows, C = channels. Also the per-head q/k norm of Qwen3: N = tokens * heads, C = head_dim.
// Decisions: rstd[N] is saved by forward for backward; backward ACCUMULATES into dinp (+=), because its
// main caller adds into the residual stream's gradient; dweight (+=) is optional (norm weights are frozen
// under LoRA). Row sums of squares are taken in double. weight_offset is added to every weight (Gemma stores
// w of (1 + w): offset 1, in fp32 as transformers' Gemma RMSNorm).
#pragma once

#include <cstdint>

namespace tandem::cpu {

// out[N,C] = inp[N,C] * rstd[N] * weight[C],  rstd[N] = 1 / sqrt(mean(inp^2) + eps) (written).
// out may alias inp.
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C, float eps,
                     float weight_offset = 0.0f);

// The block's fused residual + norm (twin of the CUDA one): residual[N,C] = a + b, then out = rmsnorm(residual)
// as above. residual may alias a or b; out must not alias a or b.
void residual_rmsnorm_forward(float* residual, float* out, float* rstd, const float* a, const float* b,
                              const float* weight, int N, int C, float eps, float weight_offset = 0.0f);

// FP8 models (twin of kernels/cuda/rmsnorm.h): the norm above (with residual and b: the fused residual form; both
// nullptr: the plain one of a), then quantize_fp8_rows(codes, scales, out, N, C) (kernels/cpu/fp8.h) of its output
// for the FP8 GEMMs it feeds.
void rmsnorm_forward_fp8(float* residual, float* out, uint8_t* codes, float* scales, float* rstd, const float* a,
                         const float* b, const float* weight, int N, int C, float eps, float weight_offset);

// dinp[N,C] += gradient w.r.t. inp; dweight[C] += sum_n dout * inp * rstd (nullptr to skip).
// dinp must not alias dout or inp.
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int N, int C, float weight_offset = 0.0f);

// FP8 models (twin of kernels/cuda/rmsnorm.h): rmsnorm_backward's dinp += (no dweight), then
// quantize_fp8_grad_rows(codes, scales, dinp, N, C) of the updated dinp: the output gradient of the FP8 GEMM it feeds.
void rmsnorm_backward_fp8(float* dinp, uint8_t* codes, float* scales, const float* dout, const float* inp,
                          const float* weight, const float* rstd, int N, int C, float weight_offset);

}  // namespace tandem::cpu
