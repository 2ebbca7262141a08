// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The block-scaled FP8 GEMM of the CPU backend (see fp8.h), apart from the quantizations because it needs OpenBLAS
// (the parser fuzzers compile fp8.cpp without it).
#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/fp8.h"

namespace tandem::cpu {

namespace {
std::once_flag g_blas_one_thread;  // OpenBLAS runs one thread a call (the tiles are this file's parallelism)
}  // namespace

void fp8_matmul(float* out, const uint8_t* x_codes, const float* x_scales, const uint8_t* w_codes,
                const float* w_scales, const float* bias, int N, int K, int M, float beta, float* /*tail*/) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(x_codes);
    TANDEM_KCHECK_PTR(x_scales);
    TANDEM_KCHECK_PTR(w_codes);
    TANDEM_KCHECK_PTR(w_scales);
    TANDEM_KCHECK(N > 0 && K > 0 && M > 0);
    TANDEM_KCHECK(beta == 0.0f || beta == 1.0f);
    const int64_t Kp = fp8_padded(K), cols = Kp / kFp8Block, wld = fp8_scale_ld(K);
    double lut[256];
    for (int c = 0; c < 256; ++c) lut[c] = double(e4m3_value(uint8_t(c)));
    // A block's sum of 128 code products is exact in double (each product is an 8-bit integer times a power of two
    // in [2^-18, 2^17.7]; the sums need fewer than 53 bits), so any summation order gives the same sums: here one
    // dgemm per block column and tile of rows (one OpenBLAS thread per call, tiles in parallel: the same bits for
    // any thread count), then each block's sum rounded to fp32, times the two scales, added in block order.
    std::call_once(g_blas_one_thread, [] { openblas_set_num_threads(1); });
    constexpr int64_t kRows = 64;
    const int64_t tiles = (N + kRows - 1) / kRows;
    std::vector<float> acc(size_t(N) * size_t(M), 0.0f);
    std::vector<double> wd(size_t(M) * kFp8Block);
    // Every thread walks the block columns; each column's two loops are shared out (their ends are barriers).
#pragma omp parallel
    {
        std::vector<double> xd(size_t(kRows) * kFp8Block), part(size_t(kRows) * size_t(M));  // this thread's tile
        for (int64_t cb = 0; cb < cols; ++cb) {
            const int64_t k0 = cb * kFp8Block;
#pragma omp for schedule(static)
            for (int64_t m = 0; m < M; ++m)
                for (int64_t k = 0; k < kFp8Block; ++k) wd[size_t(m * kFp8Block + k)] = lut[w_codes[m * Kp + k0 + k]];
#pragma omp for schedule(static)
            for (int64_t t = 0; t < tiles; ++t) {
                const int64_t n0 = t * kRows, rows = std::min<int64_t>(kRows, N - n0);
                for (int64_t r = 0; r < rows; ++r)
                    for (int64_t k = 0; k < kFp8Block; ++k)
                        xd[size_t(r * kFp8Block + k)] = lut[x_codes[(n0 + r) * Kp + k0 + k]];
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(rows), M, kFp8Block, 1.0, xd.data(), kFp8Block,
                            wd.data(), kFp8Block, 0.0, part.data(), M);
                for (int64_t r = 0; r < rows; ++r) {
                    const float xs = x_scales[fp8_row_scale_at(n0 + r, cb, N, cols)];
                    float* a = acc.data() + (n0 + r) * M;
                    for (int64_t m = 0; m < M; ++m)
                        a[m] += float(part[size_t(r * M + m)]) * (xs * w_scales[(m / kFp8Block) * wld + cb]);
                }
            }
        }
    }
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; ++n)
        for (int64_t m = 0; m < M; ++m) {
            float a = acc[size_t(n * M + m)];
            if (bias) a += bias[m];
            float& o = out[n * M + m];
            o = beta == 0.0f ? a : o + a;
        }
}

}  // namespace tandem::cpu
