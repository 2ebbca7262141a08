// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// KV cache write and attention against the cache on the CPU backend (see kv_cache.h).
// T = query rows, N = slots, L = layers, M = positions per slot, Hq / Hkv = heads, G = Hq / Hkv, D = head_dim.
// decode_attention: one task per (row, query head), the loop of cpu::attention_forward for that row.
#include "kernels/cpu/kv_cache.h"
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/check.h"

namespace tandem::cpu {
namespace {

inline float capped(float s, float cap) { return cap > 0.0f ? cap * std::tanh(s / cap) : s; }

// The same reduction as attention.cpp's dot, so scores agree bit for bit.
inline float dot(const float* a, const float* b, int D) {
    float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
    for (int d = 0; d < D; d++) acc += a[d] * b[d];
    return acc;
}

void check_rows(const int32_t* row_slot, const int32_t* row_pos, int T, int layer, int N, int L, int M) {
    TANDEM_KCHECK_PTR(row_slot);
    TANDEM_KCHECK_PTR(row_pos);
    TANDEM_KCHECK(T > 0 && N > 0 && L > 0 && M > 0);
    TANDEM_KCHECK(layer >= 0 && layer < L);
    for (int t = 0; t < T; t++) {
        if (row_slot[t] < 0 || row_slot[t] >= N)
            throw_internal("kv cache: row " + std::to_string(t) + " names slot " + std::to_string(row_slot[t]) +
                           ", the cache has " + std::to_string(N));
        if (row_pos[t] < 0 || row_pos[t] >= M)
            throw_internal("kv cache: row " + std::to_string(t) + " is at position " + std::to_string(row_pos[t]) +
                           ", the cache holds " + std::to_string(M));
    }
}

inline size_t cache_row(int slot, int layer, int pos, int L, int M) {
    return (static_cast<size_t>(slot) * L + layer) * M + pos;
}

}  // namespace

void kv_cache_write(float* k_cache, float* v_cache, const float* k, const float* v, const int32_t* row_slot,
                    const int32_t* row_pos, int T, int layer, int N, int L, int M, int KV) {
    TANDEM_KCHECK_PTR(k_cache);
    TANDEM_KCHECK_PTR(v_cache);
    TANDEM_KCHECK_PTR(k);
    TANDEM_KCHECK_PTR(v);
    TANDEM_KCHECK(KV > 0);
    check_rows(row_slot, row_pos, T, layer, N, L, M);
    for (int t = 0; t < T; t++) {
        const size_t r = cache_row(row_slot[t], layer, row_pos[t], L, M) * KV;
        std::memcpy(k_cache + r, k + static_cast<size_t>(t) * KV, static_cast<size_t>(KV) * sizeof(float));
        std::memcpy(v_cache + r, v + static_cast<size_t>(t) * KV, static_cast<size_t>(KV) * sizeof(float));
    }
}

void decode_attention(float* out, const float* q, const float* k_cache, const float* v_cache,
                      const int32_t* row_slot, const int32_t* row_pos, int T, int layer, int N, int L, int M, int Hq,
                      int Hkv, int D, float scale, int window, float softcap, const float* sinks) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(q);
    TANDEM_KCHECK_PTR(k_cache);
    TANDEM_KCHECK_PTR(v_cache);
    TANDEM_KCHECK(Hq > 0 && Hkv > 0 && D > 0 && Hq % Hkv == 0);
    TANDEM_KCHECK(window >= 0);
    check_rows(row_slot, row_pos, T, layer, N, L, M);
    const int G = Hq / Hkv;
    const int64_t tasks = static_cast<int64_t>(T) * Hq;
    const size_t qs = static_cast<size_t>(Hq) * D, ks = static_cast<size_t>(Hkv) * D;  // row strides
    int longest = 0;
    for (int t = 0; t < T; t++) longest = std::max(longest, row_pos[t] + 1);
#pragma omp parallel
    {
        std::vector<float> p(static_cast<size_t>(longest));  // scores, then exponentials, of one row
        std::vector<float> acc(static_cast<size_t>(D));
#pragma omp for schedule(dynamic, 4)
        for (int64_t task = 0; task < tasks; task++) {
            const int t = static_cast<int>(task / Hq), h = static_cast<int>(task % Hq);
            const int g = h / G, pos = row_pos[t];
            const int b = window > 0 ? std::max(0, pos - window + 1) : 0;
            const float* kc = k_cache + cache_row(row_slot[t], layer, 0, L, M) * ks;  // [M, KV]
            const float* vc = v_cache + cache_row(row_slot[t], layer, 0, L, M) * ks;
            const float* qt = q + t * qs + static_cast<size_t>(h) * D;  // [D]
            float m = -INFINITY;
            for (int j = b; j <= pos; j++) {
                const float sc = capped(scale * dot(qt, kc + j * ks + static_cast<size_t>(g) * D, D), softcap);
                p[j - b] = sc;
                m = std::max(m, sc);
            }
            double l = 0.0;
            for (int j = b; j <= pos; j++) {
                const float e = std::exp(p[j - b] - m);
                p[j - b] = e;
                l += e;
            }
            std::fill(acc.begin(), acc.end(), 0.0f);
            for (int j = b; j <= pos; j++) {
                const float* vj = vc + j * ks + static_cast<size_t>(g) * D;
                const float pj = p[j - b];
                for (int d = 0; d < D; d++) acc[d] += pj * vj[d];
            }
            const float inv_l = static_cast<float>(1.0 / l);
            float* ot = out + t * qs + static_cast<size_t>(h) * D;
            for (int d = 0; d < D; d++) ot[d] = acc[d] * inv_l;
            if (sinks) {  // as attention_sinks after attention_forward: the same bits
                float lse = m + static_cast<float>(std::log(l));
                const float keep = sink_rescale(lse, sinks[h]);
                for (int d = 0; d < D; d++) ot[d] *= keep;
            }
        }
    }
}

}  // namespace tandem::cpu
