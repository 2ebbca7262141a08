// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The bulk of an expert GEMM as ONE cuBLASLt GEMM batched over chunks of the experts' rows (internal to kernels/cuda/moe.cu's
// grouped_matmul_forward / _backward; no twin: the op's result is the same, the rows are only split differently).
// Decisions a reader must know:
//  - The grouped mma.sync kernel runs at 32-42% of cuBLASLt's dense bf16 rate on the experts' shapes; cuBLASLt
//    has no grouped GEMM whose group sizes stay on the device (cublasGemmGroupedBatchedEx reads them on the host:
//    a host sync per layer). What it has is a batch over pointer arrays with ONE row count for every batch. So
//    every expert's rows are cut into chunks of `cap` rows (256, or 128 when the experts average fewer than
//    512 rows), a one-block kernel numbers the chunks of all experts on the device (an exclusive scan of
//    rows_e / cap) and writes one batch's pointers per chunk, and ONE batched GEMM of B = N / cap batches (the
//    most chunks there can be) runs them all; the grouped kernel then does each expert's last rows_e % cap rows
//    (its groups start at starts[e]). Any routing, balanced or not, leaves at most cap - 1 rows per expert to
//    the kernel. No host sync, no allocation inside a captured step.
//  - The batches past the real chunks (about E / 2 of them) multiply expert 0's first rows into a dummy output
//    that nobody reads (they race on it; the results are discarded): the price of a batch count fixed on the host.
//  - A forward's bias (gpt-oss) is written into (or added to) the chunk rows by a kernel in front of the GEMM,
//    which then adds its product (beta 1); the kernel's rows get theirs in its epilogue as before.
//  - Taken only for the large expert projections (IN and OUT >= 256, multiples of 8, 16-byte aligned,
//    at least 128 rows per expert on average) and while the dummy output fits kExpertScratchBytes; else nullptr
//    and the grouped kernel does all rows, as before. TANDEM_EXPERT_BATCHED=0 in the environment turns it off
//    (the ablation of bench --grouped-gemm).
//  - The pointer arrays, starts[] and the dummy live in a per-thread, per-device scratch of kExpertScratchBytes,
//    allocated on first use (the first micro-batch of a shape runs eagerly, so a capture never allocates; a call
//    inside a capture without it falls back to the kernel); the memory plan counts it with the library workspace.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/cuda/context.h"

namespace tandem::cuda {

inline constexpr size_t kExpertScratchBytes = size_t(32) << 20;

enum class ExpertGemm { Forward, Backward };

// Forward: out[r,:] = (accumulate ? out[r,:] : 0) + alpha * inp[r,:] @ W_e^T (+ bias_e when bias: bias + e *
// bias_stride, [OUT]) for the rows r of every whole chunk
// of cap rows of each expert. Backward: dinp[r,:] += alpha * dout[r,:] @ W_e for the same rows (a = dout,
// out = dinp, accumulate ignored). Returns starts[E] on the device (the first row each expert still needs from
// the grouped kernel), or nullptr when the batched head is not taken (nothing was launched).
const int32_t* expert_batched_head(ExpertGemm g, bf16* out, const bf16* a, const bf16* w, int64_t w_stride,
                                   const int32_t* offsets, int N, int IN, int OUT, int E, float alpha,
                                   bool accumulate, const bf16* bias = nullptr, int64_t bias_stride = 0);

}  // namespace tandem::cuda
