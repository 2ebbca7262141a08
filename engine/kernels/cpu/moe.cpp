// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Mixture-of-experts ops on the CPU backend (see moe.h). Each expert's rows are a contiguous range of the
// sorted buffers, so the grouped ops are one gemm() per expert with rows (gemm.h: bitwise independent of the
// thread count). Routing, permutes and the unpermute sum are row-parallel loops with a fixed order inside a row.
#include "kernels/cpu/moe.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/gemm.h"

namespace tandem::cpu {

namespace {

size_t at(int64_t row, int64_t width) { return static_cast<size_t>(row * width); }

// f(e, first row, rows) for every expert with rows, after checking the offsets describe N rows.
template <class F>
void for_each_expert(const int32_t* offsets, int N, int E, F f) {
    TANDEM_KCHECK_PTR(offsets);
    TANDEM_KCHECK(offsets[0] == 0 && offsets[E] == N);
    for (int e = 0; e < E; ++e) TANDEM_KCHECK(offsets[e] <= offsets[e + 1]);
    for (int e = 0; e < E; ++e)
        if (offsets[e + 1] > offsets[e]) f(e, offsets[e], offsets[e + 1] - offsets[e]);
}

}  // namespace

void moe_router_forward(int32_t* idx, float* w, float* probs, const float* logits, int T, int E, int K, bool renorm,
                        bool given) {
    TANDEM_KCHECK_PTR(idx);
    TANDEM_KCHECK_PTR(w);
    TANDEM_KCHECK_PTR(probs);
    TANDEM_KCHECK_PTR(logits);
    TANDEM_KCHECK(T > 0 && E > 0 && K > 0 && K <= E);
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; ++t) {
        const float* z = logits + at(t, E);
        float* p = probs + at(t, E);
        float mx = z[0];
        for (int e = 1; e < E; ++e) mx = std::max(mx, z[e]);
        float sum = 0.0f;
        for (int e = 0; e < E; ++e) {
            p[e] = std::exp(z[e] - mx);
            sum += p[e];
        }
        const float inv = 1.0f / sum;
        for (int e = 0; e < E; ++e) p[e] *= inv;
        int32_t* it = idx + at(t, K);
        float* wt = w + at(t, K);
        float chosen = 0.0f;
        for (int j = 0; j < K; ++j) {  // repeated argmax: descending, ties to the lower index
            if (given) {
                TANDEM_KCHECK(it[j] >= 0 && it[j] < E);
                wt[j] = p[it[j]];
                chosen += wt[j];
                continue;
            }
            int best = -1;
            for (int e = 0; e < E; ++e) {
                bool taken = false;
                for (int i = 0; i < j; ++i) taken |= it[i] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            it[j] = best;
            wt[j] = p[best];
            chosen += p[best];
        }
        if (renorm)
            for (int j = 0; j < K; ++j) wt[j] /= chosen;
    }
}

void moe_router_backward(float* dlogits, const float* dw, const float* probs, const int32_t* idx, const float* w,
                         int T, int E, int K, bool renorm, const float* dense, const int32_t* real_rows) {
    TANDEM_KCHECK_PTR(dlogits);
    TANDEM_KCHECK_PTR(dw);
    TANDEM_KCHECK_PTR(probs);
    TANDEM_KCHECK_PTR(idx);
    TANDEM_KCHECK_PTR(w);
    TANDEM_KCHECK(T > 0 && E > 0 && K > 0 && K <= E);
    TANDEM_KCHECK(!dense || real_rows);
    TANDEM_KCHECK(K <= 512);  // dp below; checked here: nothing may throw inside the parallel region
    const int real = dense ? std::min(*real_rows, T) : 0;
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; ++t) {
        const float* p = probs + at(t, E);
        const int32_t* it = idx + at(t, K);
        const float* wt = w + at(t, K);
        const float* g = dw + at(t, K);
        const bool with_dense = t < real;
        // dp over the chosen experts: w_j = p_j / S (renorm) gives dp_m = (dw_m - sum_j dw_j w_j) / S.
        float dp[512];
        if (renorm) {
            float s = 0.0f, dot = 0.0f;
            for (int j = 0; j < K; ++j) {
                s += p[it[j]];
                dot += g[j] * wt[j];
            }
            for (int j = 0; j < K; ++j) dp[j] = (g[j] - dot) / s;
        } else {
            for (int j = 0; j < K; ++j) dp[j] = g[j];
        }
        // Softmax backward with a sparse dp: dlogits_e = p_e (dp_e - sum_m dp_m p_m).
        float inner = 0.0f;
        for (int j = 0; j < K; ++j) inner += dp[j] * p[it[j]];
        if (with_dense)
            for (int e = 0; e < E; ++e) inner += dense[e] * p[e];
        float* dz = dlogits + at(t, E);
        for (int e = 0; e < E; ++e) dz[e] = p[e] * ((with_dense ? dense[e] : 0.0f) - inner);
        for (int j = 0; j < K; ++j) dz[it[j]] += p[it[j]] * dp[j];
    }
}

void moe_aux_stats(float* stats, const float* probs, const int32_t* idx, const int32_t* real_rows, int T, int E, int K,
                   bool first) {
    TANDEM_KCHECK_PTR(stats);
    TANDEM_KCHECK_PTR(probs);
    TANDEM_KCHECK_PTR(idx);
    TANDEM_KCHECK_PTR(real_rows);
    TANDEM_KCHECK(T > 0 && E > 0 && K > 0 && K <= E);
    const int real = std::min(*real_rows, T);
    std::vector<double> sum(size_t(E), 0.0), count(size_t(E), 0.0);
    for (int t = 0; t < real; ++t) {  // rows in order: the same sums on every thread count
        for (int e = 0; e < E; ++e) sum[size_t(e)] += probs[at(t, E) + size_t(e)];
        for (int j = 0; j < K; ++j) count[size_t(idx[at(t, K) + size_t(j)])] += 1.0;
    }
    for (int e = 0; e < E; ++e) {
        stats[e] = float(sum[size_t(e)]) + (first ? 0.0f : stats[e]);
        stats[E + e] = float(count[size_t(e)]) + (first ? 0.0f : stats[E + e]);
    }
}

void moe_aux_loss(float* dense, double* loss_sum, const float* stats, const int32_t* real_rows, const float* label_count,
                  const float* grad_scale, int E, int layers, float coef, bool step) {
    TANDEM_KCHECK_PTR(dense);
    TANDEM_KCHECK_PTR(loss_sum);
    TANDEM_KCHECK_PTR(stats);
    TANDEM_KCHECK_PTR(real_rows);
    TANDEM_KCHECK_PTR(label_count);
    TANDEM_KCHECK_PTR(grad_scale);
    TANDEM_KCHECK(E > 0 && layers > 0);
    const double rows = double(layers) * double(*real_rows);
    double aux = 0.0;
    for (int e = 0; e < E; ++e) {
        const double f = rows > 0 ? stats[E + e] / rows : 0.0, P = rows > 0 ? stats[e] / rows : 0.0;
        aux += f * P;
        dense[e] = rows > 0 ? float(double(coef) * E * f / rows * double(*label_count) * double(*grad_scale)) : 0.0f;
    }
    loss_sum[0] += double(coef) * E * aux * double(*label_count);
    if (step) loss_sum[1] += loss_sum[0];
}

void moe_sort_count(int32_t* order, int32_t* inv, int32_t* offsets, const int32_t* idx, int N, int E) {
    TANDEM_KCHECK_PTR(order);
    TANDEM_KCHECK_PTR(inv);
    TANDEM_KCHECK_PTR(offsets);
    TANDEM_KCHECK_PTR(idx);
    TANDEM_KCHECK(N > 0 && E > 0);
    std::fill(offsets, offsets + E + 1, 0);
    for (int a = 0; a < N; ++a) {
        TANDEM_KCHECK(idx[a] >= 0 && idx[a] < E);
        offsets[idx[a] + 1]++;
    }
    for (int e = 0; e < E; ++e) offsets[e + 1] += offsets[e];
    std::vector<int32_t> next(offsets, offsets + E);
    for (int a = 0; a < N; ++a) {  // in assignment order: stable
        const int32_t i = next[size_t(idx[a])]++;
        order[i] = a;
        inv[a] = i;
    }
}

void moe_permute(float* xs, const float* x, const int32_t* inv, int T, int K, int C) {
    TANDEM_KCHECK_PTR(xs);
    TANDEM_KCHECK_PTR(x);
    TANDEM_KCHECK_PTR(inv);
    TANDEM_KCHECK(T > 0 && K > 0 && C > 0);
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; ++t) {
        const float* src = x + at(t, C);
        for (int j = 0; j < K; ++j) std::copy(src, src + C, xs + at(inv[int64_t(t) * K + j], C));
    }
}

void moe_permute_backward(float* dx, const float* dxs, const int32_t* inv, int T, int K, int C) {
    TANDEM_KCHECK_PTR(dx);
    TANDEM_KCHECK_PTR(dxs);
    TANDEM_KCHECK_PTR(inv);
    TANDEM_KCHECK(T > 0 && K > 0 && C > 0);
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; ++t) {
        float* d = dx + at(t, C);
        for (int j = 0; j < K; ++j) {
            const float* s = dxs + at(inv[t * K + j], C);
            for (int c = 0; c < C; ++c) d[c] += s[c];
        }
    }
}

void moe_unpermute(float* out, const float* ys, const float* w, const int32_t* inv, int T, int K, int C) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(ys);
    TANDEM_KCHECK_PTR(w);
    TANDEM_KCHECK_PTR(inv);
    TANDEM_KCHECK(T > 0 && K > 0 && C > 0);
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; ++t) {
        float* o = out + at(t, C);
        std::fill(o, o + C, 0.0f);
        for (int j = 0; j < K; ++j) {
            const float wj = w[t * K + j];
            const float* y = ys + at(inv[t * K + j], C);
            for (int c = 0; c < C; ++c) o[c] += wj * y[c];
        }
    }
}

void moe_unpermute_backward(float* dys, float* dw, const float* dout, const float* ys, const float* w,
                            const int32_t* inv, int T, int K, int C) {
    TANDEM_KCHECK_PTR(dys);
    TANDEM_KCHECK_PTR(dw);
    TANDEM_KCHECK_PTR(dout);
    TANDEM_KCHECK_PTR(ys);
    TANDEM_KCHECK_PTR(w);
    TANDEM_KCHECK_PTR(inv);
    TANDEM_KCHECK(T > 0 && K > 0 && C > 0);
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; ++t) {
        const float* g = dout + at(t, C);
        for (int j = 0; j < K; ++j) {
            const int32_t i = inv[t * K + j];
            const float wj = w[t * K + j];
            const float* y = ys + at(i, C);
            float* dy = dys + at(i, C);
            double dot = 0.0;
            for (int c = 0; c < C; ++c) {
                dy[c] = wj * g[c];
                dot += double(g[c]) * y[c];
            }
            dw[t * K + j] = float(dot);
        }
    }
}

void grouped_matmul_forward(float* out, const float* inp, const float* w, int64_t w_stride, const float* bias,
                            int64_t bias_stride, const int32_t* offsets, int N, int IN, int OUT, int E, float alpha,
                            bool accumulate) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(inp);
    TANDEM_KCHECK_PTR(w);
    TANDEM_KCHECK(N > 0 && IN > 0 && OUT > 0 && E > 0);
    for_each_expert(offsets, N, E, [&](int e, int r0, int rows) {
        float* o = out + at(r0, OUT);
        float beta = accumulate ? 1.0f : 0.0f;
        if (bias) {
            const float* b = bias + e * bias_stride;
            for (int r = 0; r < rows; ++r) {
                float* row = o + at(r, OUT);
                for (int c = 0; c < OUT; ++c) row[c] = (accumulate ? row[c] : 0.0f) + b[c];
            }
            beta = 1.0f;
        }
        // o[rows,OUT] = alpha * inp_e[rows,IN] @ W_e[OUT,IN]^T + beta * o
        gemm(false, true, rows, OUT, IN, alpha, inp + at(r0, IN), IN, w + e * w_stride, IN, beta, o, OUT);
    });
}

void grouped_matmul_backward(float* dinp, const float* dout, const float* w, int64_t w_stride, const int32_t* offsets,
                             int N, int IN, int OUT, int E, float alpha) {
    TANDEM_KCHECK_PTR(dinp);
    TANDEM_KCHECK_PTR(dout);
    TANDEM_KCHECK_PTR(w);
    TANDEM_KCHECK(N > 0 && IN > 0 && OUT > 0 && E > 0);
    for_each_expert(offsets, N, E, [&](int e, int r0, int rows) {
        // dinp_e[rows,IN] += alpha * dout_e[rows,OUT] @ W_e[OUT,IN]
        gemm(false, false, rows, IN, OUT, alpha, dout + at(r0, OUT), OUT, w + e * w_stride, IN, 1.0f,
             dinp + at(r0, IN), IN);
    });
}

void grouped_matmul_weight_grad(float* dw, int64_t dw_stride, const float* dout, const float* inp,
                                const int32_t* offsets, int N, int IN, int OUT, int E, float alpha) {
    TANDEM_KCHECK_PTR(dw);
    TANDEM_KCHECK_PTR(dout);
    TANDEM_KCHECK_PTR(inp);
    TANDEM_KCHECK(N > 0 && IN > 0 && OUT > 0 && E > 0);
    for_each_expert(offsets, N, E, [&](int e, int r0, int rows) {
        // dW_e[OUT,IN] += alpha * dout_e[rows,OUT]^T @ inp_e[rows,IN]
        gemm(true, false, OUT, IN, rows, alpha, dout + at(r0, OUT), OUT, inp + at(r0, IN), IN, 1.0f,
             dw + e * dw_stride, IN);
    });
}

}  // namespace tandem::cpu
