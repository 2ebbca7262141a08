// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Deterministic tiled sgemm of the CPU backend (see gemm.h). M, N = rows and columns of C, K = inner size.
#include "kernels/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "core/check.h"

namespace tandem::cpu {

namespace {

std::once_flag g_blas_single_thread;

}  // namespace

void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
          int ldb, float beta, float* C, int ldc) {
    TANDEM_KCHECK(A && B && C);
    TANDEM_KCHECK(M > 0 && N > 0 && K > 0);
    TANDEM_KCHECK(lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N) && ldc >= N);
    // OpenBLAS's own threads would make results depend on the thread count (see gemm.h), and they would
    // compete with ours; from here on every call runs in the calling OpenMP thread.
    std::call_once(g_blas_single_thread, [] { openblas_set_num_threads(1); });
    const int tiles_m = (M + kTileM - 1) / kTileM, tiles_n = (N + kTileN - 1) / kTileN;
    const int tiles = tiles_m * tiles_n;
    const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
#pragma omp parallel for schedule(dynamic, 1) if (tiles > 1)
    for (int tile = 0; tile < tiles; tile++) {
        const int m0 = (tile / tiles_n) * kTileM, n0 = (tile % tiles_n) * kTileN;
        const int mb = std::min(kTileM, M - m0), nb = std::min(kTileN, N - n0);
        // Rows m0.. of op(A): rows of A, or columns of A when transposed; likewise columns n0.. of op(B).
        const float* a = trans_a ? A + m0 : A + static_cast<size_t>(m0) * lda;
        const float* b = trans_b ? B + static_cast<size_t>(n0) * ldb : B + n0;
        float* c = C + static_cast<size_t>(m0) * ldc + n0;
        cblas_sgemm(CblasRowMajor, ta, tb, mb, nb, K, alpha, a, lda, b, ldb, beta, c, ldc);
    }
}

}  // namespace tandem::cpu
