// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Fused, chunked lm_head + cross-entropy on the CPU backend (see cross_entropy.h).
// N = tokens, C = channels, V = vocab, K = rows per chunk.
// Per chunk: scratch[K,V] = hidden_chunk @ weight^T (sgemm); per row (parallel): max, lse, loss, and the
// row overwritten with grad_scale * (softmax - onehot) (zeros for an ignored row); then
// dhidden_chunk[K,C] = scratch @ weight (sgemm).
#include "kernels/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/matmul.h"

namespace tandem::cpu {

namespace {

// Both public forms: returns the loss sum (row losses in double, summed in row order); losses[N] (optional)
// receives each row's loss rounded to fp32.
double cross_entropy_chunked(float* dhidden, float* losses, const float* hidden, const float* weight,
                             const int32_t* targets, int N, int C, int V, float grad_scale, int chunk_rows,
                             float* scratch, float softcap) {
    TANDEM_KCHECK_PTR(hidden);
    TANDEM_KCHECK_PTR(weight);
    TANDEM_KCHECK_PTR(targets);
    TANDEM_KCHECK_PTR(scratch);
    TANDEM_KCHECK(N > 0 && C > 0 && V > 0 && chunk_rows > 0);
    for (int n = 0; n < N; n++)
        if (targets[n] != kIgnoreIndex && (targets[n] < 0 || targets[n] >= V))
            throw_invalid("cross-entropy: target id " + std::to_string(targets[n]) + " at token " + std::to_string(n) +
                          " is outside the vocabulary (size " + std::to_string(V) +
                          "); the tokenizer does not match the model");
    const int K = std::min(chunk_rows, N);
    std::vector<double> row_loss(static_cast<size_t>(K));  // [K]
    double loss_sum = 0.0;
    for (int n0 = 0; n0 < N; n0 += K) {
        const int rows = std::min(K, N - n0);
        // scratch[rows,V] = hidden[n0:n0+rows, C] @ weight[V,C]^T
        gemm(false, true, rows, V, C, 1.0f, hidden + static_cast<size_t>(n0) * C, C, weight, C, 0.0f, scratch, V);
#pragma omp parallel for schedule(static)
        for (int r = 0; r < rows; r++) {
            float* z = scratch + static_cast<size_t>(r) * V;  // [V] logits, then their gradient
            const int32_t target = targets[n0 + r];
            if (softcap > 0.0f)
                for (int i = 0; i < V; i++) z[i] = softcap * std::tanh(z[i] / softcap);
            if (target == kIgnoreIndex) {
                row_loss[r] = 0.0;
                if (dhidden) std::fill(z, z + V, 0.0f);
                continue;
            }
            float m = -INFINITY;
            for (int i = 0; i < V; i++) m = std::max(m, z[i]);
            double sum = 0.0;
            for (int i = 0; i < V; i++) sum += std::exp(z[i] - m);
            const double lse = static_cast<double>(m) + std::log(sum);
            row_loss[r] = lse - static_cast<double>(z[target]);
            if (dhidden) {
                const float lse_f = static_cast<float>(lse);
                for (int i = 0; i < V; i++) {
                    const float zc = z[i];
                    float g = std::exp(zc - lse_f) * grad_scale;
                    if (i == target) g -= grad_scale;
                    if (softcap > 0.0f) g *= 1.0f - (zc / softcap) * (zc / softcap);  // through the tanh cap
                    z[i] = g;
                }
            }
        }
        for (int r = 0; r < rows; r++) loss_sum += row_loss[r];  // in row order: deterministic
        if (losses)
            for (int r = 0; r < rows; r++) losses[n0 + r] = static_cast<float>(row_loss[r]);
        if (dhidden) {
            // dhidden[n0:n0+rows, C] = scratch[rows,V] @ weight[V,C]
            gemm(false, false, rows, C, V, 1.0f, scratch, V, weight, C, 0.0f, dhidden + static_cast<size_t>(n0) * C, C);
        }
    }
    return loss_sum;
}

}  // namespace

double lm_head_cross_entropy(float* dhidden, const float* hidden, const float* weight, const int32_t* targets, int N,
                             int C, int V, float grad_scale, int chunk_rows, float* scratch, float softcap) {
    return cross_entropy_chunked(dhidden, nullptr, hidden, weight, targets, N, C, V, grad_scale, chunk_rows, scratch,
                                 softcap);
}

void lm_head_cross_entropy(float* dhidden, float* losses, const float* hidden, const float* weight,
                           const int32_t* targets, int N, int C, int V, const float* grad_scale, int chunk_rows,
                           void* workspace, float softcap) {
    TANDEM_KCHECK_PTR(losses);
    TANDEM_KCHECK_PTR(grad_scale);
    cross_entropy_chunked(dhidden, losses, hidden, weight, targets, N, C, V, *grad_scale, chunk_rows,
                          static_cast<float*>(workspace), softcap);
}

void lm_head_logits(float* out, const float* hidden, const float* weight, int N, int C, int V, float softcap) {
    matmul_forward(out, hidden, weight, nullptr, N, C, V);
    if (softcap > 0.0f)
        for (int64_t i = 0; i < int64_t(N) * V; i++) out[i] = softcap * std::tanh(out[i] / softcap);
}

}  // namespace tandem::cpu
