// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Linear layers on the CPU backend (see matmul.h). N = rows, IN = input features, OUT = output features,
// R = LoRA rank. All matrices row-major; every product goes through gemm() (gemm.h), whose fixed tiling makes
// the result independent of the thread count.
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <cstddef>

#include "core/check.h"
#include "kernels/cpu/gemm.h"

namespace tandem::cpu {

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int IN, int OUT) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(inp);
    TANDEM_KCHECK_PTR(weight);
    TANDEM_KCHECK(N > 0 && IN > 0 && OUT > 0);
    float beta = 0.0f;
    if (bias) {
        // out rows start as the bias; sgemm then adds x W^T (beta = 1).
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++) std::copy(bias, bias + OUT, out + static_cast<size_t>(n) * OUT);
        beta = 1.0f;
    }
    // out[N,OUT] = inp[N,IN] @ weight[OUT,IN]^T
    gemm(false, true, N, OUT, IN, 1.0f, inp, IN, weight, IN, beta, out, OUT);
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int IN, int OUT) {
    TANDEM_KCHECK_PTR(dout);
    TANDEM_KCHECK(N > 0 && IN > 0 && OUT > 0);
    if (dinp) {
        TANDEM_KCHECK_PTR(weight);
        // dinp[N,IN] += dout[N,OUT] @ weight[OUT,IN]
        gemm(false, false, N, IN, OUT, 1.0f, dout, OUT, weight, IN, 1.0f, dinp, IN);
    }
    if (dweight) {
        TANDEM_KCHECK_PTR(inp);
        // dweight[OUT,IN] += dout[N,OUT]^T @ inp[N,IN]
        gemm(true, false, OUT, IN, N, 1.0f, dout, OUT, inp, IN, 1.0f, dweight, IN);
    }
    if (dbias) {
        // Parallel over blocks of columns; each block sums all rows in order (deterministic for any thread
        // count), in double.
        constexpr int kBlock = 64;
        const int nblocks = (OUT + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
        for (int b = 0; b < nblocks; b++) {
            const int o0 = b * kBlock, o1 = std::min(OUT, o0 + kBlock);
            double acc[kBlock] = {};
            for (int n = 0; n < N; n++) {
                const float* row = dout + static_cast<size_t>(n) * OUT;
                for (int o = o0; o < o1; o++) acc[o - o0] += row[o];
            }
            for (int o = o0; o < o1; o++) dbias[o] += static_cast<float>(acc[o - o0]);
        }
    }
}

void lora_forward(float* out, float* tmp, const float* inp, const float* lora_a, const float* lora_b, float scaling,
                  int N, int IN, int OUT, int R) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(tmp);
    TANDEM_KCHECK_PTR(inp);
    TANDEM_KCHECK_PTR(lora_a);
    TANDEM_KCHECK_PTR(lora_b);
    TANDEM_KCHECK(N > 0 && IN > 0 && OUT > 0 && R > 0);
    lora_tmp_forward(tmp, inp, lora_a, N, IN, R);
    // out[N,OUT] += scaling * tmp[N,R] @ lora_b[OUT,R]^T
    gemm(false, true, N, OUT, R, scaling, tmp, R, lora_b, R, 1.0f, out, OUT);
}

void lora_tmp_forward(float* tmp, const float* inp, const float* lora_a, int N, int IN, int R) {
    TANDEM_KCHECK_PTR(tmp);
    TANDEM_KCHECK_PTR(inp);
    TANDEM_KCHECK_PTR(lora_a);
    TANDEM_KCHECK(N > 0 && IN > 0 && R > 0);
    // tmp[N,R] = inp[N,IN] @ lora_a[R,IN]^T
    gemm(false, true, N, R, IN, 1.0f, inp, IN, lora_a, IN, 0.0f, tmp, R);
}

void lora_backward(float* dinp, float* dlora_a, float* dlora_b, float* dtmp, const float* dout, const float* inp,
                   const float* tmp, const float* lora_a, const float* lora_b, float scaling, int N, int IN, int OUT,
                   int R) {
    TANDEM_KCHECK_PTR(dtmp);
    TANDEM_KCHECK_PTR(dout);
    TANDEM_KCHECK_PTR(lora_b);
    TANDEM_KCHECK(N > 0 && IN > 0 && OUT > 0 && R > 0);
    // The LoRA weight gradients sum over rows in fixed blocks of kLoraGradRows, one GEMM each, in order: the
    // same bits whether the rows come in one call or in chunks of a multiple of the block (the chunked MLP).
    auto over_rows = [&](auto&& gemm_rows) {
        for (int r0 = 0; r0 < N; r0 += kLoraGradRows) gemm_rows(r0, std::min(kLoraGradRows, N - r0));
    };
    if (dlora_b) {
        TANDEM_KCHECK_PTR(tmp);
        // dlora_b[OUT,R] += scaling * dout[N,OUT]^T @ tmp[N,R]
        over_rows([&](int r0, int n) {
            gemm(true, false, OUT, R, n, scaling, dout + int64_t(r0) * OUT, OUT, tmp + int64_t(r0) * R, R, 1.0f,
                 dlora_b, R);
        });
    }
    if (!dlora_a && !dinp) return;
    // dtmp[N,R] = scaling * dout[N,OUT] @ lora_b[OUT,R]
    gemm(false, false, N, R, OUT, scaling, dout, OUT, lora_b, R, 0.0f, dtmp, R);
    if (dlora_a) {
        TANDEM_KCHECK_PTR(inp);
        // dlora_a[R,IN] += dtmp[N,R]^T @ inp[N,IN]
        over_rows([&](int r0, int n) {
            gemm(true, false, R, IN, n, 1.0f, dtmp + int64_t(r0) * R, R, inp + int64_t(r0) * IN, IN, 1.0f, dlora_a, IN);
        });
    }
    if (dinp) {
        TANDEM_KCHECK_PTR(lora_a);
        // dinp[N,IN] += dtmp[N,R] @ lora_a[R,IN]
        gemm(false, false, N, IN, R, 1.0f, dtmp, R, lora_a, IN, 1.0f, dinp, IN);
    }
}

}  // namespace tandem::cpu
