// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Token embedding lookup on the CPU backend (see embedding.h). N = tokens, C = channels, V = vocab.
#include "kernels/cpu/embedding.h"

#include <algorithm>
#include <cstddef>
#include <string>

#include "core/check.h"

namespace tandem::cpu {

namespace {

void check_ids(const int32_t* ids, int N, int V) {
    for (int n = 0; n < N; n++)
        if (ids[n] < 0 || ids[n] >= V)
            throw_invalid("embedding: token id " + std::to_string(ids[n]) + " at position " + std::to_string(n) +
                          " is outside the embedding table (vocabulary size " + std::to_string(V) +
                          "); the tokenizer does not match the model");
}

}  // namespace

void embedding_forward(float* out, const int32_t* ids, const float* table, int N, int C, int V) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(ids);
    TANDEM_KCHECK_PTR(table);
    TANDEM_KCHECK(N > 0 && C > 0 && V > 0);
    check_ids(ids, N, V);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float* row = table + static_cast<size_t>(ids[n]) * C;
        std::copy(row, row + C, out + static_cast<size_t>(n) * C);
    }
}

void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int N, int C, int V) {
    TANDEM_KCHECK_PTR(dtable);
    TANDEM_KCHECK_PTR(dout);
    TANDEM_KCHECK_PTR(ids);
    TANDEM_KCHECK(N > 0 && C > 0 && V > 0);
    check_ids(ids, N, V);
    constexpr int kBlock = 64;
    const int nblocks = (C + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < nblocks; b++) {
        const int c0 = b * kBlock, c1 = std::min(C, c0 + kBlock);
        for (int n = 0; n < N; n++) {
            const float* src = dout + static_cast<size_t>(n) * C;
            float* dst = dtable + static_cast<size_t>(ids[n]) * C;
            for (int c = c0; c < c1; c++) dst[c] += src[c];
        }
    }
}

}  // namespace tandem::cpu
