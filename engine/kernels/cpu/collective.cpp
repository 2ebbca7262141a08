// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Rank-ordered sums of an all-reduce (see collective.h).
#include "kernels/cpu/collective.h"

#include "core/check.h"

namespace tandem::cpu {

namespace {

template <class T>
void sum_ranks_impl(T* const* bufs, int ranks, size_t lo, size_t hi) {
    TANDEM_KCHECK(bufs && ranks >= 1 && ranks <= kMaxCollectiveRanks && lo <= hi);
    for (size_t i = lo; i < hi; ++i) {
        T s = bufs[0][i];
        for (int r = 1; r < ranks; ++r) s += bufs[r][i];
        for (int r = 0; r < ranks; ++r) bufs[r][i] = s;
    }
}

}  // namespace

void sum_ranks(float* const* bufs, int ranks, size_t lo, size_t hi) { sum_ranks_impl(bufs, ranks, lo, hi); }
void sum_ranks(double* const* bufs, int ranks, size_t lo, size_t hi) { sum_ranks_impl(bufs, ranks, lo, hi); }

}  // namespace tandem::cpu
