// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// FP8 base GEMMs on the CPU backend (see fp8.h). Every loop is parallel over independent rows or blocks, so
// the results do not depend on the thread count.
#include "kernels/cpu/fp8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"

namespace tandem::cpu {

void quantize_fp8_weight(uint8_t* codes, float* scales, const float* w, int OUT, int IN) {
    TANDEM_KCHECK_PTR(codes);
    TANDEM_KCHECK_PTR(scales);
    TANDEM_KCHECK_PTR(w);
    TANDEM_KCHECK(OUT > 0 && IN > 0);
    const int64_t INp = fp8_padded(IN), cols = INp / kFp8Block, ld = fp8_scale_ld(IN), bands = fp8_blocks(OUT);
#pragma omp parallel for schedule(static)
    for (int64_t band = 0; band < bands; ++band) {
        const int64_t r0 = band * kFp8Block, r1 = std::min<int64_t>(OUT, r0 + kFp8Block);
        for (int64_t cb = cols; cb < ld; ++cb) scales[band * ld + cb] = 1.0f;
        for (int64_t cb = 0; cb < cols; ++cb) {
            const int64_t c0 = cb * kFp8Block, c1 = std::min<int64_t>(IN, c0 + kFp8Block);
            float amax = 0.0f;
            for (int64_t r = r0; r < r1; ++r)
                for (int64_t c = c0; c < c1; ++c) amax = fp8_amax_step(amax, w[r * IN + c]);
            const Fp8Scale s = fp8_scale_of(amax);
            scales[band * ld + cb] = s.scale;
            for (int64_t r = r0; r < r1; ++r) {
                uint8_t* q = codes + r * INp;
                for (int64_t c = c0; c < c1; ++c) q[c] = e4m3_code(w[r * IN + c] * s.inv);
                for (int64_t c = std::max(c0, int64_t(IN)); c < c0 + kFp8Block; ++c) q[c] = 0;
            }
        }
    }
}

void quantize_fp8_rows(uint8_t* codes, float* scales, const float* x, int rows, int K) {
    TANDEM_KCHECK_PTR(codes);
    TANDEM_KCHECK_PTR(scales);
    TANDEM_KCHECK_PTR(x);
    TANDEM_KCHECK(rows > 0 && K > 0);
    const int64_t Kp = fp8_padded(K), cols = Kp / kFp8Block;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < fp8_code_rows(rows); ++r) {
        uint8_t* q = codes + r * Kp;
        if (r >= rows) {  // a pad row of the tail GEMM
            std::memset(q, 0, size_t(Kp));
            for (int64_t cb = 0; cb < cols; ++cb) scales[fp8_row_scale_at(r, cb, rows, cols)] = 1.0f;
            continue;
        }
        const float* xr = x + r * K;
        for (int64_t cb = 0; cb < cols; ++cb) {
            const int64_t c0 = cb * kFp8Block, c1 = std::min<int64_t>(K, c0 + kFp8Block);
            float amax = 0.0f;
            for (int64_t c = c0; c < c1; ++c) amax = fp8_amax_step(amax, xr[c]);
            const Fp8Scale s = fp8_scale_of(amax);
            scales[fp8_row_scale_at(r, cb, rows, cols)] = s.scale;
            for (int64_t c = c0; c < c1; ++c) q[c] = e4m3_code(xr[c] * s.inv);
            for (int64_t c = std::max(c0, int64_t(K)); c < c0 + kFp8Block; ++c) q[c] = 0;
        }
    }
}

void quantize_fp8_grad_rows(uint8_t* codes, float* scales, const float* x, int rows, int K) {
    quantize_fp8_grad_rows_as(fp8_grad_format(), codes, scales, x, rows, K);
}

void quantize_fp8_grad_rows_as(Fp8GradFormat format, uint8_t* codes, float* scales, const float* x, int rows, int K) {
    if (format == Fp8GradFormat::E4M3) return quantize_fp8_rows(codes, scales, x, rows, K);
    TANDEM_KCHECK_PTR(x);
    TANDEM_KCHECK(rows > 0 && K > 0);
    std::vector<float> g(x, x + int64_t(rows) * K);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        float* gr = g.data() + r * K;
        for (int64_t c0 = 0; c0 < K; c0 += kFp8Block) {
            const int64_t c1 = std::min<int64_t>(K, c0 + kFp8Block);
            float amax = 0.0f;
            for (int64_t c = c0; c < c1; ++c) amax = fp8_amax_step(amax, gr[c]);
            if (!(amax > 0.0f)) continue;  // zeros stay zeros; a NaN amax shows in the scale
            const float s5 = amax / kE5M2Max;
            for (int64_t c = c0; c < c1; ++c) gr[c] = e5m2_round(gr[c] / s5) * s5;
        }
    }
    quantize_fp8_rows(codes, scales, g.data(), rows, K);
}

void fp8_transpose(uint8_t* wt_codes, float* wt_scales, const uint8_t* codes, const float* scales, int OUT, int IN) {
    TANDEM_KCHECK_PTR(wt_codes);
    TANDEM_KCHECK_PTR(wt_scales);
    TANDEM_KCHECK_PTR(codes);
    TANDEM_KCHECK_PTR(scales);
    TANDEM_KCHECK(OUT > 0 && IN > 0);
    const int64_t INp = fp8_padded(IN), OUTp = fp8_padded(OUT);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < IN; ++i) {
        uint8_t* t = wt_codes + i * OUTp;
        for (int64_t o = 0; o < OUT; ++o) t[o] = codes[o * INp + i];
        for (int64_t o = OUT; o < OUTp; ++o) t[o] = 0;
    }
    const int64_t in_ld = fp8_scale_ld(IN), out_cols = OUTp / kFp8Block, out_ld = fp8_scale_ld(OUT);
    const int64_t in_bands = fp8_blocks(IN);
    for (int64_t bi = 0; bi < in_bands; ++bi)
        for (int64_t bo = 0; bo < out_ld; ++bo)
            wt_scales[bi * out_ld + bo] = bo < out_cols ? scales[bo * in_ld + bi] : 1.0f;
}

}  // namespace tandem::cpu
