// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The experts' widening products: a few (K <= 64) columns per row multiplied into a wide output, per expert
// over the rows offsets[e] <= r < offsets[e+1] (internal to kernels/cuda/moe.cu's grouped_matmul_forward /
// _backward; no twin: the op's result is the same, computed by another kernel). These are the LoRA B forward
// (out += s * tmp B_e^T, K = R) and the LoRA A input gradient (dinp += d_tmp A_e, K = R).
// Decisions a reader must know:
//  - Memory-bound: the multiply-adds are K per output element, the traffic the output's read and write. The
//    grouped kernel's 128x256 tiles with one block per SM run them at a quarter of the bandwidth (a tile does
//    one K step, then waits on its epilogue's memory). Here a block owns 64 rows and walks their columns 64 at a
//    time with 4 warps and 36 KiB of shared memory, the next column tile's old values loaded while this one is
//    computed. ptxas gives it 164 registers a thread: 3 blocks per SM, not the 6 the shared memory allows (a
//    register prefetch of the weight tiles was slower; measured, docs/benchmarks.md).
//  - A block's rows are the global rows [64 i, 64 i + 64), whatever the experts: per column tile it runs one
//    pass per expert whose rows meet the block (one or two for training's 1000-row experts) and each pass
//    writes only its expert's rows, so every output element is written once (no atomics, deterministic). The
//    experts of the first and last row are counted from offsets[] by the whole block at once (no search per
//    tile, no grid upper bound). No host sync.
//  - bf16 mma.sync m16n8k16 with fp32 accumulation, K zero-padded to a multiple of 16; the result goes through
//    shared memory as fp32 and is rounded once: (accumulate ? old : 0) + alpha * acc (+ bias_e).
//  - Taken when K <= 64, K and the output width are multiples of 8 and the pointers 16-byte aligned; else the
//    caller's grouped kernel.
#pragma once

#include <cstdint>

#include "core/cuda/context.h"

namespace tandem::cuda {

inline constexpr int kWidenMaxK = 64;

enum class ExpertWiden {
    Forward,   // out[r,:ncols] = (accumulate ? out : 0) + alpha * a[r,:K] @ W_e^T (+ bias_e); W_e [ncols, K]
    Backward,  // out[r,:ncols] += alpha * a[r,:K] @ W_e; W_e [K, ncols] (accumulate must be true)
};

// Runs the product and returns true, or returns false (nothing launched) when the shape or alignment does not
// qualify. W_e = w + e * w_stride; bias_e = bias + e * bias_stride (Forward only; may be nullptr).
bool expert_widen(ExpertWiden g, bf16* out, const bf16* a, const bf16* w, int64_t w_stride, const bf16* bias,
                  int64_t bias_stride, const int32_t* offsets, int N, int K, int ncols, int E, float alpha,
                  bool accumulate);

}  // namespace tandem::cuda
