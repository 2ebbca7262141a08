// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The experts' widening products (kernels/cuda/expert_widen.h says what and why).
#include "kernels/cuda/expert_widen.h"

#include <climits>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/vec.cuh"
#include "tandem/error.h"

namespace tandem::cuda {

namespace {

constexpr int kTM = 64, kTN = 64;           // a block's rows and output columns
constexpr int kThreads = 128;               // 4 warps, 16 rows x 64 columns each
constexpr int kLdS = kWidenMaxK + 8;        // [rows][k] tiles (a, and W_e forward): 144-byte rows
constexpr int kLdT = kTN + 8;               // the [k][columns] tile (W_e backward)
constexpr int kLdC = kTN + 4;               // the fp32 staging rows
constexpr int kChunks = kTN / 8;            // 16-byte chunks per output row of the tile
constexpr int kPer = kTM * kChunks / kThreads;
static_assert(kTM * kLdS >= kWidenMaxK * kLdT && kPer * kThreads == kTM * kChunks);

__device__ __forceinline__ Pack<bf16, 8> zero_pack() {
    Pack<bf16, 8> z;
#pragma unroll
    for (int q = 0; q < 8; q++) z.v[q] = __float2bfloat16_rn(0.0f);
    return z;
}

// The old output values of columns [n0, n0 + kTN) of the block's rows, one 16-byte load each, all in flight.
__device__ __forceinline__ void load_old(Pack<bf16, 8> (&old)[kPer], const bf16* __restrict__ out, int m0, int n0,
                                         int N, int ncols) {
#pragma unroll
    for (int i = 0; i < kPer; i++) {
        const int c = i * kThreads + static_cast<int>(threadIdx.x), row = m0 + c / kChunks,
                  col = n0 + (c % kChunks) * 8;
        if (row < N && col < ncols) old[i] = load_pack<8>(out + static_cast<int64_t>(row) * ncols + col);
    }
}

// One block: rows [m0, m0 + kTM) x every column, kTN columns at a time (the next tile's old values loaded while
// this one is computed); per column tile one pass per expert whose rows meet the block's rows.
// BT: W_e is [K, ncols] (backward), else [ncols, K] (forward).
template <bool BT>
__global__ void __launch_bounds__(kThreads)
widen_kernel(bf16* __restrict__ out, const bf16* __restrict__ a, const bf16* __restrict__ w, int64_t w_stride,
             const bf16* __restrict__ bias, int64_t bias_stride, const int32_t* __restrict__ offsets, int N, int K,
             int ncols, int E, float alpha, bool accumulate) {
    __shared__ __align__(16) bf16 sA[kTM * kLdS];
    __shared__ __align__(16) bf16 sB[kTM * kLdS];
    __shared__ __align__(16) float sC[kTM * kLdC];
    const int m0 = static_cast<int>(blockIdx.x) * kTM;
    const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
    const int m_end = min(m0 + kTM, N), kp = (K + 15) / 16 * 16, kc8 = kp / 8;
    // The experts of the first and last row: the last e with offsets[e] <= row is the number of e in [1, E) with
    // offsets[e] <= row (offsets rise; an expert without rows is never the one). Every load at once, counted
    // by the block.
    int e_first = 0, e_last = 0;
    for (int e0 = 1; e0 < E; e0 += kThreads) {
        const int e = e0 + tid;
        const int off = e < E ? offsets[e] : INT_MAX;
        e_first += __syncthreads_count(off <= m0);
        e_last += __syncthreads_count(off <= m_end - 1);
    }
    // The rows' K inputs, zero-padded to kp columns and past N.
    for (int c = tid; c < kTM * kc8; c += kThreads) {
        const int r = c / kc8, col = (c % kc8) * 8;
        const bool ok = m0 + r < N && col < K;
        store_pack<8>(sA + r * kLdS + col, ok ? load_pack<8>(a + static_cast<int64_t>(m0 + r) * K + col) : zero_pack());
    }
    Pack<bf16, 8> old[kPer], next[kPer];
    if (accumulate) load_old(old, out, m0, 0, N, ncols);
    for (int n0 = 0; n0 < ncols; n0 += kTN) {
        if (accumulate && n0 + kTN < ncols) load_old(next, out, m0, n0 + kTN, N, ncols);
        for (int e = e_first; e <= e_last; ++e) {
            const int r_lo = max(offsets[e], m0), r_hi = min(offsets[e + 1], m_end);
            if (r_lo >= r_hi) continue;  // the same for every thread of the block
            const bf16* W = w + static_cast<int64_t>(e) * w_stride;
            if constexpr (BT) {
                for (int c = tid; c < kp * kChunks; c += kThreads) {
                    const int k = c / kChunks, col = (c % kChunks) * 8;
                    const bool ok = k < K && n0 + col < ncols;
                    store_pack<8>(sB + k * kLdT + col,
                                  ok ? load_pack<8>(W + static_cast<int64_t>(k) * ncols + n0 + col) : zero_pack());
                }
            } else {
                for (int c = tid; c < kTN * kc8; c += kThreads) {
                    const int n = c / kc8, col = (c % kc8) * 8;
                    const bool ok = n0 + n < ncols && col < K;
                    store_pack<8>(sB + n * kLdS + col,
                                  ok ? load_pack<8>(W + static_cast<int64_t>(n0 + n) * K + col) : zero_pack());
                }
            }
            __syncthreads();  // sA (first pass) and sB are complete
            float acc[kTN / 8][4] = {};
            for (int kc = 0; kc < kp / 16; kc++) {
                uint32_t af[4];
                ldsm_x4(af, sA + (warp * 16 + lane % 16) * kLdS + kc * 16 + (lane / 16) * 8);
#pragma unroll
                for (int np = 0; np < kTN / 16; np++) {
                    uint32_t b[4];
                    if constexpr (BT)
                        ldsm_x4_trans(b, sB + (kc * 16 + lane % 8 + ((lane / 8) % 2) * 8) * kLdT + np * 16 +
                                             (lane / 16) * 8);
                    else
                        ldsm_x4(b, sB + (np * 16 + lane % 8 + (lane / 16) * 8) * kLdS + kc * 16 + ((lane / 8) % 2) * 8);
                    mma_16816(acc[2 * np], af, b[0], b[1]);
                    mma_16816(acc[2 * np + 1], af, b[2], b[3]);
                }
            }
            // acc[n][i] sits at row warp*16 + lane/4 + 8*(i/2), column n*8 + 2*(lane%4) + i%2.
#pragma unroll
            for (int n = 0; n < kTN / 8; n++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int lrow = warp * 16 + lane / 4 + h * 8, col = n * 8 + (lane % 4) * 2;
                    *reinterpret_cast<float2*>(sC + lrow * kLdC + col) =
                        make_float2(alpha * acc[n][2 * h], alpha * acc[n][2 * h + 1]);
                }
            __syncthreads();
            const bf16* be = bias ? bias + static_cast<int64_t>(e) * bias_stride : nullptr;
#pragma unroll
            for (int i = 0; i < kPer; i++) {
                const int c = i * kThreads + tid, lrow = c / kChunks, lcol = (c % kChunks) * 8;
                const int row = m0 + lrow, col = n0 + lcol;
                if (row < r_lo || row >= r_hi || col >= ncols) continue;
                const float* src = sC + lrow * kLdC + lcol;
                Pack<bf16, 8> y;
#pragma unroll
                for (int q = 0; q < 8; q++) {
                    float v = src[q];
                    if (be) v += __bfloat162float(be[col + q]);
                    if (accumulate) v += __bfloat162float(old[i].v[q]);
                    y.v[q] = __float2bfloat16_rn(v);
                }
                store_pack<8>(out + static_cast<int64_t>(row) * ncols + col, y);
            }
            __syncthreads();  // sB and sC are rewritten by the next pass
        }
        if (accumulate) {
#pragma unroll
            for (int i = 0; i < kPer; i++) old[i] = next[i];
        }
    }
}

bool enabled() {
    static const bool on = [] {
        const char* v = std::getenv("TANDEM_EXPERT_WIDEN");
        return !(v && std::strcmp(v, "0") == 0);
    }();
    return on;
}

}  // namespace

bool expert_widen(ExpertWiden g, bf16* out, const bf16* a, const bf16* w, int64_t w_stride, const bf16* bias,
                  int64_t bias_stride, const int32_t* offsets, int N, int K, int ncols, int E, float alpha,
                  bool accumulate) {
    if (!enabled() || N <= 0 || E <= 0 || K <= 0 || K > kWidenMaxK || K % 8 || ncols <= 0 || ncols % 8 ||
        w_stride % 8 || !aligned16(out) || !aligned16(a) || !aligned16(w))
        return false;
    const dim3 grid(static_cast<unsigned>((N + kTM - 1) / kTM));
    const cudaStream_t s = context().stream;
    if (g == ExpertWiden::Backward)
        widen_kernel<true><<<grid, kThreads, 0, s>>>(out, a, w, w_stride, nullptr, 0, offsets, N, K, ncols, E, alpha,
                                                     accumulate);
    else
        widen_kernel<false><<<grid, kThreads, 0, s>>>(out, a, w, w_stride, bias, bias_stride, offsets, N, K, ncols, E,
                                                      alpha, accumulate);
    TANDEM_CUDA_LAUNCH_CHECK();
    return true;
}

}  // namespace tandem::cuda
