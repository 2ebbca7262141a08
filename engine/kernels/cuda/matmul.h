// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Linear layers on the CUDA backend (twin of kernels/cpu/matmul.h) through cuBLASLt: bf16 inputs, fp32
// accumulation (CUBLAS_COMPUTE_32F), row-major [OUT, IN] weights as torch stores them.
// Gradient convention as on the CPU: every gradient ACCUMULATES (beta = 1); pointers may be nullptr to skip.
// Bias is a cuBLASLt epilogue (no extra pass); LoRA adds into the base GEMM's output with beta = 1 (no
// extra add pass). Weight gradients are fp32 (LoRA grads accumulate across micro-batches in fp32).
// Matmul descriptors and the heuristic's algorithm are cached per shape (one query per shape per run).
#pragma once

#include "core/cuda/context.h"

namespace tandem::cuda {

// out[N,OUT] = inp[N,IN] @ weight[OUT,IN]^T (+ bias[OUT]). out must not overlap inp.
void matmul_forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int N, int IN, int OUT);

// dinp[N,IN] += dout[N,OUT] @ weight;  dweight[OUT,IN] (fp32) += dout^T @ inp;  dbias[OUT] (fp32) += colsum.
void matmul_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp, const bf16* weight,
                     int N, int IN, int OUT);

// out[N,OUT] += scaling * (inp @ lora_a[R,IN]^T) @ lora_b[OUT,R]^T; tmp[N,R] = inp @ lora_a^T kept for backward.
// lora_a / lora_b are the bf16 copies of the fp32 masters (refreshed by adamw after each update).
void lora_forward(bf16* out, bf16* tmp, const bf16* inp, const bf16* lora_a, const bf16* lora_b, float scaling, int N,
                  int IN, int OUT, int R);

// lora_forward's first GEMM alone, tmp[N,R] = inp[N,IN] @ lora_a[R,IN]^T (the same call, so the same bits): the
// recompute of a block whose projection output is not needed again.
void lora_tmp_forward(bf16* tmp, const bf16* inp, const bf16* lora_a, int N, int IN, int R);

// dtmp[N,R] (scratch, written) = scaling * dout @ lora_b;  dlora_b[OUT,R] (fp32) += scaling * dout^T @ tmp;
// dlora_a[R,IN] (fp32) += dtmp^T @ inp;  dinp[N,IN] += dtmp @ lora_a.
void lora_backward(bf16* dinp, float* dlora_a, float* dlora_b, bf16* dtmp, const bf16* dout, const bf16* inp,
                   const bf16* tmp, const bf16* lora_a, const bf16* lora_b, float scaling, int N, int IN, int OUT,
                   int R);

// The general GEMM the above are built on (row-major, like cpu::gemm): C[M,N] = alpha * op(A) @ op(B) + beta * C
// with A, B bf16 and C bf16 or fp32 (c_f32). Exposed for the lm_head chunks and tests.
void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const bf16* A, int lda, const bf16* B, int ldb,
          float beta, void* C, int ldc, bool c_f32);

}  // namespace tandem::cuda
