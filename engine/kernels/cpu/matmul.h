// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Linear layers on the CPU backend: row-major wrappers over OpenBLAS sgemm, and the LoRA side branch.
// N = rows (tokens), IN = input features, OUT = output features, R = LoRA rank.
// Weights are stored as torch.nn.Linear stores them, [OUT, IN], so y = x W^T + b.
// Gradient convention: every gradient here ACCUMULATES (+=) into its buffer, input gradients included
// (q/k/v projections and their LoRA branches all add into the gradient of the same normed input); the
// caller zeroes once. Any gradient pointer may be nullptr to skip it (frozen weights, no bias).
// Determinism: GEMMs go through gemm.h (fixed tiles, one single-threaded OpenBLAS call each); the bias
// gradient is parallel over columns with rows summed in order. So results do not depend on the thread count.
#pragma once

namespace tandem::cpu {

// lora_backward's weight gradients sum over the rows in blocks of this many (one GEMM each, in order), so a
// caller that runs the rows in chunks of a multiple of it (the chunked MLP, model/plan.h) gets the same bits.
inline constexpr int kLoraGradRows = 256;

// out[N,OUT] = inp[N,IN] @ weight[OUT,IN]^T + bias[OUT] (bias may be nullptr). out is written and must not
// overlap inp (nor, in lora_forward, inp or tmp).
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int IN, int OUT);

// dinp[N,IN] += dout[N,OUT] @ weight[OUT,IN]
// dweight[OUT,IN] += dout^T @ inp[N,IN]
// dbias[OUT] += sum over rows of dout
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int IN, int OUT);

// LoRA branch: out[N,OUT] += scaling * (inp[N,IN] @ lora_a[R,IN]^T) @ lora_b[OUT,R]^T.
// tmp[N,R] receives inp @ lora_a^T and must be kept for lora_backward.
// Dropout hook: this file draws no random numbers. With LoRA dropout p > 0 the caller passes the already
// dropped input (mask * x / (1 - p)) as `inp`, keeps it for backward, and multiplies the `dinp` that
// lora_backward produces by the same mask / (1 - p) before adding it to the gradient of x. With p = 0 it
// passes x itself and the real gradient buffer.
void lora_forward(float* out, float* tmp, const float* inp, const float* lora_a, const float* lora_b, float scaling,
                  int N, int IN, int OUT, int R);

// Only lora_forward's first half, tmp[N,R] = inp[N,IN] @ lora_a[R,IN]^T (the same GEMM, so the same values):
// what recomputing a block needs when the projection's output itself is not needed again.
void lora_tmp_forward(float* tmp, const float* inp, const float* lora_a, int N, int IN, int R);

// dtmp[N,R]  (scratch, written) = scaling * dout[N,OUT] @ lora_b[OUT,R]
// dlora_b[OUT,R] += scaling * dout^T @ tmp[N,R]
// dlora_a[R,IN]  += dtmp^T @ inp[N,IN]
// dinp[N,IN]     += dtmp @ lora_a[R,IN]
// inp and tmp are what lora_forward saw and wrote. dinp/dlora_a/dlora_b may be nullptr; dtmp is required
// (a caller-owned [N,R] buffer, so nothing is allocated per call).
void lora_backward(float* dinp, float* dlora_a, float* dlora_b, float* dtmp, const float* dout, const float* inp,
                   const float* tmp, const float* lora_a, const float* lora_b, float scaling, int N, int IN, int OUT,
                   int R);

}  // namespace tandem::cpu
