// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The arithmetic of an all-reduce between data-parallel ranks whose buffers one process can address
// (train/communicator.h): HostThreadCommunicator's on the CPU, the peer communicator's on GPUs (the CUDA twin in
// kernels/cuda/collective.h).
// Decision: every element is summed in rank order, bufs[0] + bufs[1] + ... + bufs[ranks-1], and the sum is
// written into every rank's buffer, so all ranks hold the same bits and a world's result depends only on its
// rank count. A caller splits the elements into disjoint shares [lo, hi), one per rank, so the ranks can sum
// concurrently without touching each other's elements.
#pragma once

#include <cstddef>

namespace tandem::cpu {

inline constexpr int kMaxCollectiveRanks = 16;

// bufs[ranks][...]: elements lo..hi-1 of every buffer replaced by their rank-ordered sum.
void sum_ranks(float* const* bufs, int ranks, size_t lo, size_t hi);
void sum_ranks(double* const* bufs, int ranks, size_t lo, size_t hi);

}  // namespace tandem::cpu
