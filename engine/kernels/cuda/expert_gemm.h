// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The bulk of an expert GEMM as ONE cuBLASLt GEMM batched over chunks of the experts' rows (internal to kernels/cuda/moe.cu's
// grouped_matmul_forward / _backward; no twin: the op's result is the same, the rows are only split differently).
// Decisions a reader must know:
//  - The grouped mma.sync kernel runs at 32-42% of cuBLASLt's dense bf16 rate on the experts' shapes, and the
//    LoRA A products (R = 16 output columns) at a quarter of the memory bandwidth; cuBLASLt has no grouped GEMM
//    whose group sizes stay on the device (cublasGemmGroupedBatchedEx reads them on the host: a host sync per
//    layer). What it has is a batch over pointer arrays with ONE row count for every batch. So every expert's
//    rows are cut into chunks: level 0 takes floor(rows_e / cap) chunks of cap = 128 rows (measured against
//    256 in expert_gemm.cu); where a product takes the lower levels, each (cap / 2, down to 32
//    rows) takes one more chunk of an expert when the rows it has left reach it. A one-block kernel numbers
//    every level's chunks on the device (an exclusive scan per level) and writes one batch's pointers per
//    chunk; ONE batched GEMM per level (B = N / cap batches at level 0, the most there can be; at most E at a
//    lower level) runs them; the grouped kernel then does each expert's last rows (its groups start at
//    starts[e]). No host sync, no allocation inside a captured step.
//  - The batches past a level's real chunks (about E / 2 of them per level) multiply expert 0's first rows into
//    a dummy output that nobody reads (they race on it; the results are discarded): the price of a batch count
//    fixed on the host. It decides the routes (measured, bench --grouped-gemm): the large projections (IN and
//    OUT >= 256) take level 0 only (lower levels' dummies cost more than the kernel saves on the last rows);
//    the LoRA A products (<= 64 output columns from >= 256: the forward's x A^T, the backward's dout B) take
//    every level (2x faster than the kernel); the LoRA products that widen R columns into a large output stay
//    in the grouped kernel (no faster batched). The weight gradients stay in the grouped kernel (a reduction
//    over an expert's rows).
//  - A forward's bias (gpt-oss) is written into (or added to) the chunk rows by a kernel in front of the GEMMs,
//    which then add their product (beta 1); the kernel's rows get theirs in its epilogue as before.
//  - Taken when IN and OUT are multiples of 8, the pointers 16-byte aligned, with at least 128 rows per expert on
//    average, while the dummy output fits kExpertScratchBytes; else nullptr and the grouped kernel does all
//    rows. TANDEM_EXPERT_BATCHED in the environment selects the ablations of bench --grouped-gemm and the MoE
//    benchmark: 0 off, 1 the large projections only (the first version), 2 every level for the large
//    projections too; TANDEM_EXPERT_CHUNK=64..1024 forces level 0's rows per chunk.
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
// bias_stride, [OUT]) for the rows r of every chunk of each expert. Backward: dinp[r,:] += alpha * dout[r,:] @
// W_e for the same rows (a = dout, out = dinp, accumulate ignored). Returns starts[E] on the device (the first row each expert still needs from
// the grouped kernel), or nullptr when the batched head is not taken (nothing was launched).
const int32_t* expert_batched_head(ExpertGemm g, bf16* out, const bf16* a, const bf16* w, int64_t w_stride,
                                   const int32_t* offsets, int N, int IN, int OUT, int E, float alpha,
                                   bool accumulate, const bf16* bias = nullptr, int64_t bias_stride = 0);

}  // namespace tandem::cuda
