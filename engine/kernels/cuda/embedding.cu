// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Token embedding lookup on the CUDA backend (see embedding.h). N = tokens, C = channels, V = vocab.
// Decisions:
//  - forward: one thread per 16-byte piece of an output row when C % 8 == 0 and the pointers are aligned,
//    one per element otherwise.
//  - backward: one thread per channel c, looping over the tokens in order and adding dout[n, c] into
//    dtable[ids[n], c]. Column c has a single writer, so repeated ids need no atomics and the result is
//    deterministic (the same order as the CPU). Parallelism is only C threads, which is fine because
//    training never calls it (embeddings are frozen under LoRA).
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/vec.cuh"

#include <cstddef>
#include <cstdint>

namespace tandem::cuda {

namespace {

constexpr int kThreads = 256;

// ---------------------------------------------------------------------------------------------------------
// CUDA kernels

// W = 8: one thread per Pack<bf16, 8> of a row; W = 1: one per element.
template <int W>
__global__ void embedding_forward_kernel(bf16* out, const int32_t* ids, const bf16* table, int N, int C) {
    const int per_row = C / W;
    const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= int64_t(N) * per_row) return;
    const int n = int(idx / per_row);
    const int c = int(idx % per_row) * W;
    const bf16* src = table + size_t(ids[n]) * C + c;
    bf16* dst = out + size_t(n) * C + c;
    if constexpr (W == 8)
        *reinterpret_cast<Pack<bf16, 8>*>(dst) = *reinterpret_cast<const Pack<bf16, 8>*>(src);
    else
        *dst = *src;
}

__global__ void embedding_backward_kernel(float* dtable, const bf16* dout, const int32_t* ids, int N, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    for (int n = 0; n < N; n++) dtable[size_t(ids[n]) * C + c] += __bfloat162float(dout[size_t(n) * C + c]);
}

// ---------------------------------------------------------------------------------------------------------
// kernel launchers

}  // namespace

void embedding_forward(bf16* out, const int32_t* ids, const bf16* table, int N, int C, int V) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(ids);
    TANDEM_KCHECK_PTR(table);
    TANDEM_KCHECK(N > 0 && C > 0 && V > 0);
    if (C % 8 == 0 && aligned16(out) && aligned16(table))
        embedding_forward_kernel<8><<<grid_for(int64_t(N) * (C / 8), kThreads), kThreads, 0, context().stream>>>(
            out, ids, table, N, C);
    else
        embedding_forward_kernel<1><<<grid_for(int64_t(N) * C, kThreads), kThreads, 0, context().stream>>>(
            out, ids, table, N, C);
    TANDEM_CUDA_LAUNCH_CHECK();
}

void embedding_backward(float* dtable, const bf16* dout, const int32_t* ids, int N, int C, int V) {
    TANDEM_KCHECK_PTR(dtable);
    TANDEM_KCHECK_PTR(dout);
    TANDEM_KCHECK_PTR(ids);
    TANDEM_KCHECK(N > 0 && C > 0 && V > 0);
    embedding_backward_kernel<<<grid_for(C, kThreads), kThreads, 0, context().stream>>>(dtable, dout, ids, N, C);
    TANDEM_CUDA_LAUNCH_CHECK();
}

}  // namespace tandem::cuda
