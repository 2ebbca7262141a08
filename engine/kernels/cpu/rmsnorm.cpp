// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// RMSNorm on the CPU backend (see rmsnorm.h). N = rows, C = channels.
// Deterministic for any thread count: rows are independent; dweight is parallel over column blocks, each
// summing all rows in order.
#include "kernels/cpu/rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/check.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/fp8.h"

namespace tandem::cpu {

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C, float eps,
                     float weight_offset) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(rstd);
    TANDEM_KCHECK_PTR(inp);
    TANDEM_KCHECK_PTR(weight);
    TANDEM_KCHECK(N > 0 && C > 0);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float* x = inp + static_cast<size_t>(n) * C;  // [C]
        float* y = out + static_cast<size_t>(n) * C;        // [C]
        double ss = 0.0;
        for (int c = 0; c < C; c++) ss += static_cast<double>(x[c]) * x[c];
        const float r = static_cast<float>(1.0 / std::sqrt(ss / C + static_cast<double>(eps)));
        rstd[n] = r;
        for (int c = 0; c < C; c++) y[c] = (weight[c] + weight_offset) * (x[c] * r);
    }
}

void residual_rmsnorm_forward(float* residual, float* out, float* rstd, const float* a, const float* b,
                              const float* weight, int N, int C, float eps, float weight_offset) {
    TANDEM_KCHECK(N > 0 && C > 0);
    add(residual, a, b, static_cast<int64_t>(N) * C);  // checks the pointers; residual may alias a or b
    rmsnorm_forward(out, rstd, residual, weight, N, C, eps, weight_offset);
}

void rmsnorm_forward_fp8(float* residual, float* out, uint8_t* codes, float* scales, float* rstd, const float* a,
                         const float* b, const float* weight, int N, int C, float eps, float weight_offset) {
    TANDEM_KCHECK((residual == nullptr) == (b == nullptr));
    if (residual)
        residual_rmsnorm_forward(residual, out, rstd, a, b, weight, N, C, eps, weight_offset);
    else
        rmsnorm_forward(out, rstd, a, weight, N, C, eps, weight_offset);
    quantize_fp8_rows(codes, scales, out, N, C);
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int N, int C, float weight_offset) {
    TANDEM_KCHECK_PTR(dout);
    TANDEM_KCHECK_PTR(inp);
    TANDEM_KCHECK_PTR(rstd);
    TANDEM_KCHECK(N > 0 && C > 0);
    if (dinp) {
        TANDEM_KCHECK_PTR(weight);
        // y = w * x * r, r = (mean(x^2) + eps)^-1/2  =>  dx = r * (w*dy - x * r^2 * mean(w*dy*x))
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++) {
            const float* x = inp + static_cast<size_t>(n) * C;    // [C]
            const float* dy = dout + static_cast<size_t>(n) * C;  // [C]
            float* dx = dinp + static_cast<size_t>(n) * C;        // [C]
            const float r = rstd[n];
            double dot = 0.0;
            for (int c = 0; c < C; c++) dot += static_cast<double>((weight[c] + weight_offset) * dy[c]) * x[c];
            const float k = static_cast<float>(dot / C) * r * r;
            for (int c = 0; c < C; c++) dx[c] += r * ((weight[c] + weight_offset) * dy[c] - x[c] * k);
        }
    }
    if (dweight) {
        constexpr int kBlock = 16;
        const int nblocks = (C + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
        for (int b = 0; b < nblocks; b++) {
            const int c0 = b * kBlock, c1 = std::min(C, c0 + kBlock);
            double acc[kBlock] = {};
            for (int n = 0; n < N; n++) {
                const float* x = inp + static_cast<size_t>(n) * C;
                const float* dy = dout + static_cast<size_t>(n) * C;
                const float r = rstd[n];
                for (int c = c0; c < c1; c++) acc[c - c0] += static_cast<double>(dy[c]) * (x[c] * r);
            }
            for (int c = c0; c < c1; c++) dweight[c] += static_cast<float>(acc[c - c0]);
        }
    }
}

void rmsnorm_backward_fp8(float* dinp, uint8_t* codes, float* scales, const float* dout, const float* inp,
                          const float* weight, const float* rstd, int N, int C, float weight_offset) {
    TANDEM_KCHECK_PTR(dinp);
    rmsnorm_backward(dinp, nullptr, dout, inp, weight, rstd, N, C, weight_offset);
    quantize_fp8_grad_rows(codes, scales, dinp, N, C);  // an output gradient (the E5M2 ablation applies)
}

}  // namespace tandem::cpu
