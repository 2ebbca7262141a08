// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The CUDA twin of kernels/cpu/collective.h: the rank-ordered sum of the peer communicator
// (train/cuda_communicators.h), whose ranks are threads of one process with their buffers on GPUs that can
// read each other's memory (or on one GPU).
// Unlike every other op this one takes its stream: it runs on a rank's communication stream, beside the
// compute stream, so a layer's gradients are summed while the next layer's backward runs.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

#include "kernels/cpu/collective.h"  // kMaxCollectiveRanks

namespace tandem::cuda {

// bufs[ranks] device pointers (passed by value): elements lo..hi-1 of every buffer replaced by their
// rank-ordered sum, on stream s. The caller makes s wait until every rank's buffer is ready.
void sum_ranks(float* const* bufs, int ranks, size_t lo, size_t hi, cudaStream_t s);
void sum_ranks(double* const* bufs, int ranks, size_t lo, size_t hi, cudaStream_t s);

}  // namespace tandem::cuda
