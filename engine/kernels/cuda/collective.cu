// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Rank-ordered sums over the buffers of several ranks (see collective.h).
#include "kernels/cuda/collective.h"

#include <algorithm>

#include "core/cuda/context.h"

namespace tandem::cuda {

namespace {

constexpr int kThreads = 256;

template <class T>
struct Bufs {
    T* p[cpu::kMaxCollectiveRanks];
};

template <class T>
__global__ void sum_ranks_kernel(Bufs<T> b, int ranks, size_t lo, size_t hi) {
    for (size_t i = lo + size_t(blockIdx.x) * kThreads + threadIdx.x; i < hi; i += size_t(gridDim.x) * kThreads) {
        T s = b.p[0][i];
        for (int r = 1; r < ranks; ++r) s += b.p[r][i];
        for (int r = 0; r < ranks; ++r) b.p[r][i] = s;
    }
}

template <class T>
void launch(T* const* bufs, int ranks, size_t lo, size_t hi, cudaStream_t s) {
    TANDEM_KCHECK(bufs && ranks >= 1 && ranks <= cpu::kMaxCollectiveRanks && lo <= hi);
    if (hi == lo) return;
    Bufs<T> b{};
    for (int r = 0; r < ranks; ++r) b.p[r] = bufs[r];
    const size_t blocks = std::min<size_t>((hi - lo + kThreads - 1) / kThreads, 1024);
    sum_ranks_kernel<T><<<unsigned(blocks), kThreads, 0, s>>>(b, ranks, lo, hi);
    TANDEM_CUDA_LAUNCH_CHECK();
}

}  // namespace

void sum_ranks(float* const* bufs, int ranks, size_t lo, size_t hi, cudaStream_t s) { launch(bufs, ranks, lo, hi, s); }
void sum_ranks(double* const* bufs, int ranks, size_t lo, size_t hi, cudaStream_t s) { launch(bufs, ranks, lo, hi, s); }

}  // namespace tandem::cuda
