// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Packed variable-length causal attention with GQA on the CUDA backend (see attention.h): the in-house
// FlashAttention-2 kernels. T = tokens, S = samples, Hq = query heads, Hkv = kv heads, G = Hq / Hkv,
// D = head_dim, L = length of one sample; token t of sample s attends to keys cu_seqlens[s]..t.
// Decisions a reader must know:
//  - Tensor cores through mma.sync m16n8k16 (bf16 in, fp32 accumulate) with ldmatrix from shared memory,
//    so the accumulator layout is known and softmax runs in registers (WMMA's fragments are opaque).
//    Fragment layout: accumulator element acc[r][n][e] of a warp sits at row r*16 + lane/4 + 8*(e/2),
//    column n*8 + 2*(lane%4) + e%2; an accumulator converts into an A operand without shuffles.
//  - One kernel per D bucket (DP = 64, 128, 256); a smaller D runs in its bucket with the missing columns
//    zero-filled in shared memory and skipped in the k-loops. Accumulators of the output columns must
//    live in registers, so DP = 256 splits the output columns into two slices of DS = 128 (separate
//    blocks that both recompute the scores): ~1.5x the flops, but no register spills.
//  - The grid is (tiles of max_seqlen x slices, heads, S); a block whose tile starts past its sample's
//    end exits at once. Query tiles are visited from the last (the most keys) to the first.
//  - Backward, deterministic, no atomics: delta = rowsum(dout * out) into the workspace, then one kernel
//    per key tile for dk/dv (looping over the G query heads of its kv head and the query tiles from the
//    key tile to the sample end), and one per query tile for dq (looping over the key tiles up to the
//    diagonal). P is recomputed from lse in both; the dq pass replaces the header's fp32 dq accumulation.
//  - Shared memory rows are padded by 16 bytes so ldmatrix reads are free of bank conflicts; tiles
//    arrive through cp.async (K/V of the next tile, or the next Q/dO tile, load while this one computes).
//    Every configuration stays under 99 KB of shared memory (the per-block limit of sm_86/89/120); those
//    over 48 KB opt in once per kernel (first use, on the current device).
//  - Tiles (rows x cols per step, warps): forward 128x64 (D<=64), 128x32 (D<=128), 64x32 (D<=256), 4 warps;
//    dk/dv 64 keys x 64/32/16 queries (4, 4, 2 warps; 32 keys for D>128); dq 64 queries x 64/32 keys
//    (4 warps; 32x16 with 2 warps for D>128). Measured on an H100 (4 x 4096 tokens, 32/8 heads, D=128):
//    forward ~260 TFLOP/s, backward ~140 (counted as 2.5x the forward's flops) — about 0.8x / 0.6x
//    FlashAttention-2 and 0.5x / 0.33x cuDNN; D=256 runs at about half that rate per flop.
#include "kernels/cuda/attention.h"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/vec.cuh"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tandem::cuda {

namespace {

constexpr float kLog2e = 1.4426950408889634f;

// ---------------------------------------------------------------------------------------------------------
// Warp-level building blocks

// smem_addr, cp_async*, ldsm_x4*, mma_16816: kernels/cuda/mma.cuh.

__device__ __forceinline__ float exp2_approx(float x) {  // 2^x; -inf gives 0
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    uint32_t r;
    memcpy(&r, &v, sizeof(r));
    return r;
}

// acc[RM*16 x N] += A[RM*16 x K] * B[N x K]^T with A and B row-major in shared memory (row strides lda,
// ldb); only k < kmax (a multiple of 16) is read.
template <int RM, int N, int K>
__device__ __forceinline__ void mma_nt(float (&acc)[RM][N / 8][4], const bf16* sA, int lda, const bf16* sB, int ldb,
                                       int kmax) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int kc = 0; kc < K / 16; kc++) {
        if (kc * 16 < kmax) {
            uint32_t a[RM][4];
#pragma unroll
            for (int r = 0; r < RM; r++) ldsm_x4(a[r], sA + (r * 16 + lane % 16) * lda + kc * 16 + (lane / 16) * 8);
#pragma unroll
            for (int np = 0; np < N / 16; np++) {
                uint32_t b[4];
                ldsm_x4(b, sB + (np * 16 + lane % 8 + (lane / 16) * 8) * ldb + kc * 16 + ((lane / 8) % 2) * 8);
#pragma unroll
                for (int r = 0; r < RM; r++) {
                    mma_16816(acc[r][2 * np], a[r], b[0], b[1]);
                    mma_16816(acc[r][2 * np + 1], a[r], b[2], b[3]);
                }
            }
        }
    }
}

// mma_nt on two independent products at once (acc0 += A0 B0^T, acc1 += A1 B1^T, same strides): twice the
// independent accumulators in flight, which hides the mma latency when N is small.
template <int RM, int N, int K>
__device__ __forceinline__ void mma_nt_pair(float (&acc0)[RM][N / 8][4], float (&acc1)[RM][N / 8][4], const bf16* sA0,
                                            const bf16* sA1, int lda, const bf16* sB0, const bf16* sB1, int ldb,
                                            int kmax) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int kc = 0; kc < K / 16; kc++) {
        if (kc * 16 < kmax) {
            uint32_t a0[RM][4], a1[RM][4];
#pragma unroll
            for (int r = 0; r < RM; r++) {
                const int off = (r * 16 + lane % 16) * lda + kc * 16 + (lane / 16) * 8;
                ldsm_x4(a0[r], sA0 + off);
                ldsm_x4(a1[r], sA1 + off);
            }
#pragma unroll
            for (int np = 0; np < N / 16; np++) {
                const int off = (np * 16 + lane % 8 + (lane / 16) * 8) * ldb + kc * 16 + ((lane / 8) % 2) * 8;
                uint32_t b0[4], b1[4];
                ldsm_x4(b0, sB0 + off);
                ldsm_x4(b1, sB1 + off);
#pragma unroll
                for (int r = 0; r < RM; r++) {
                    mma_16816(acc0[r][2 * np], a0[r], b0[0], b0[1]);
                    mma_16816(acc1[r][2 * np], a1[r], b1[0], b1[1]);
                    mma_16816(acc0[r][2 * np + 1], a0[r], b0[2], b0[3]);
                    mma_16816(acc1[r][2 * np + 1], a1[r], b1[2], b1[3]);
                }
            }
        }
    }
}

// acc[RM*16 x N] += A[RM*16 x K] * B[K x N] with A as operand fragments in registers and B row-major in
// shared memory (row stride ldb); only columns n < nmax (a multiple of 16) are computed.
template <int RM, int K, int N>
__device__ __forceinline__ void mma_nn(float (&acc)[RM][N / 8][4], const uint32_t (&a)[RM][K / 16][4],
                                       const bf16* sB, int ldb, int nmax) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int kc = 0; kc < K / 16; kc++) {
#pragma unroll
        for (int np = 0; np < N / 16; np++) {
            if (np * 16 < nmax) {
                uint32_t b[4];
                ldsm_x4_trans(b, sB + (kc * 16 + lane % 8 + ((lane / 8) % 2) * 8) * ldb + np * 16 + (lane / 16) * 8);
#pragma unroll
                for (int r = 0; r < RM; r++) {
                    mma_16816(acc[r][2 * np], a[r][kc], b[0], b[1]);
                    mma_16816(acc[r][2 * np + 1], a[r][kc], b[2], b[3]);
                }
            }
        }
    }
}

// Accumulator [RM*16 x N] (fp32) -> A operand fragments [RM*16 x N] (bf16).
template <int RM, int N>
__device__ __forceinline__ void to_afrag(uint32_t (&a)[RM][N / 16][4], const float (&c)[RM][N / 8][4]) {
#pragma unroll
    for (int r = 0; r < RM; r++) {
#pragma unroll
        for (int kc = 0; kc < N / 16; kc++) {
            a[r][kc][0] = pack_bf16(c[r][2 * kc][0], c[r][2 * kc][1]);
            a[r][kc][1] = pack_bf16(c[r][2 * kc][2], c[r][2 * kc][3]);
            a[r][kc][2] = pack_bf16(c[r][2 * kc + 1][0], c[r][2 * kc + 1][1]);
            a[r][kc][3] = pack_bf16(c[r][2 * kc + 1][2], c[r][2 * kc + 1][3]);
        }
    }
}

// Rows [row0, row0+ROWS) x columns [col0, col0+COLS) of a row-major bf16 matrix (row stride gstride) into
// shared memory (row stride lds); rows >= row_end and columns >= D are zero-filled.
template <int ROWS, int COLS, int NT>
__device__ __forceinline__ void load_tile(bf16* s, int lds, const bf16* g, size_t gstride, int row0, int row_end,
                                          int col0, int D) {
    constexpr int kChunksPerRow = COLS / 8, kChunks = ROWS * kChunksPerRow;
#pragma unroll
    for (int i = 0; i < (kChunks + NT - 1) / NT; i++) {
        const int c = i * NT + static_cast<int>(threadIdx.x);
        if (kChunks % NT == 0 || c < kChunks) {
            const int r = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
            const bool ok = row0 + r < row_end && col0 + col < D;
            const bf16* src = ok ? g + static_cast<size_t>(row0 + r) * gstride + col0 + col : g;
            cp_async16(s + r * lds + col, src, ok);
        }
    }
}

// g[i0 .. i0+N) into s[0 .. N), zero past i_end.
template <int N, int NT>
__device__ __forceinline__ void load_row(float* s, const float* g, int i0, int i_end) {
    for (int i = static_cast<int>(threadIdx.x); i < N; i += NT) {
        const bool ok = i0 + i < i_end;
        cp_async4(s + i, ok ? g + i0 + i : g, ok);
    }
}

// ---------------------------------------------------------------------------------------------------------
// Tile configurations. DP = padded head dim (k-dim of the score products), DS = output columns per block,
// NW = warps; each warp owns RM slabs of 16 rows of the tile it accumulates into.

template <int DP_, int DS_, int BM_, int BN_, int NW_>
struct FwdCfg {  // BM queries per block, BN keys per step
    static constexpr int DP = DP_, DS = DS_, BM = BM_, BN = BN_, NW = NW_;
    static constexpr int RM = BM / (16 * NW), NT = NW * 32, NSL = DP / DS;
    static constexpr int LDK = DP + 8, LDV = DS + 8;
    // sQ [BM, LDK], sK [BN, LDK], sV [BN, LDV]
    static constexpr size_t smem = sizeof(bf16) * (size_t(BM) * LDK + size_t(BN) * LDK + size_t(BN) * LDV);
    static_assert(RM >= 1 && BM == RM * 16 * NW && BN % 16 == 0 && DP % DS == 0 && DS % 16 == 0);
};

template <int DP_, int DS_, int BN_, int BM_, int NW_>
struct DkvCfg {  // BN keys per block, BM queries per step
    static constexpr int DP = DP_, DS = DS_, BN = BN_, BM = BM_, NW = NW_;
    static constexpr int RM = BN / (16 * NW), NT = NW * 32, NSL = DP / DS;
    static constexpr int LDK = DP + 8;
    // sK [BN, LDK], sV [BN, LDK], two stages of { sQ [BM, LDK], sdO [BM, LDK] }, two of { lse [BM], delta [BM] }
    static constexpr size_t smem = sizeof(bf16) * (2 * size_t(BN) * LDK + 4 * size_t(BM) * LDK) + sizeof(float) * 4 * BM;
    static_assert(RM >= 1 && BN == RM * 16 * NW && BM % 16 == 0 && DP % DS == 0 && DS % 16 == 0);
};

template <int DP_, int DS_, int BM_, int BN_, int NW_>
struct DqCfg {  // BM queries per block, BN keys per step
    static constexpr int DP = DP_, DS = DS_, BM = BM_, BN = BN_, NW = NW_;
    static constexpr int RM = BM / (16 * NW), NT = NW * 32, NSL = DP / DS;
    static constexpr int LDK = DP + 8;
    // sQ [BM, LDK], sdO [BM, LDK], two stages of { sK [BN, LDK], sV [BN, LDK] }
    static constexpr size_t smem = sizeof(bf16) * (2 * size_t(BM) * LDK + 4 * size_t(BN) * LDK);
    static_assert(RM >= 1 && BM == RM * 16 * NW && BN % 16 == 0 && DP % DS == 0 && DS % 16 == 0);
};

// ---------------------------------------------------------------------------------------------------------
// CUDA kernels

// One block per (query tile, output slice, query head, sample): out = softmax(scale q k^T) v, online over
// the key tiles of the sample up to the diagonal.
template <class C>
__global__ void __launch_bounds__(C::NT)
    attention_forward_kernel(bf16* __restrict__ out, float* __restrict__ lse, const bf16* __restrict__ q,
                             const bf16* __restrict__ k, const bf16* __restrict__ v,
                             const int32_t* __restrict__ cu_seqlens, int T, int Hq, int Hkv, int D, float scale,
                             int window, float softcap) {
    constexpr int DP = C::DP, DS = C::DS, BM = C::BM, BN = C::BN, RM = C::RM, NT = C::NT, NSL = C::NSL;
    constexpr int LDK = C::LDK, LDV = C::LDV;
    extern __shared__ __align__(16) unsigned char smem[];
    bf16* sQ = reinterpret_cast<bf16*>(smem);  // [BM, LDK]
    bf16* sK = sQ + BM * LDK;                  // [BN, LDK]
    bf16* sV = sK + BN * LDK;                  // [BN, LDV] columns ds0 .. ds0+DS

    const int ntiles = static_cast<int>(gridDim.x) / NSL;
    const int tile = ntiles - 1 - static_cast<int>(blockIdx.x) / NSL;
    const int ds0 = static_cast<int>(blockIdx.x) % NSL * DS;
    const int h = blockIdx.y, sample = blockIdx.z;
    const int start = cu_seqlens[sample], end = cu_seqlens[sample + 1];
    const int m0 = start + tile * BM;
    if (m0 >= end || ds0 >= D) return;
    const int g = h / (Hq / Hkv);
    const size_t qs = static_cast<size_t>(Hq) * D, ks = static_cast<size_t>(Hkv) * D;  // token strides
    const bf16* kg = k + static_cast<size_t>(g) * D;
    const bf16* vg = v + static_cast<size_t>(g) * D;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wr0 = warp * RM * 16;  // the warp's first row in the tile

    // With a sliding window the tile's first row sees keys from m0 - window + 1 on: earlier key tiles are skipped.
    const int jstart = window > 0 ? max(0, m0 - window + 1 - start) / BN : 0;
    load_tile<BM, DP, NT>(sQ, LDK, q + static_cast<size_t>(h) * D, qs, m0, end, 0, D);
    load_tile<BN, DP, NT>(sK, LDK, kg, ks, start + jstart * BN, end, 0, D);
    cp_async_commit();

    const float sl2 = scale * kLog2e;
    float o[RM][DS / 8][4] = {};
    float mx[RM][2], sum[RM][2];  // running max (raw scores) and this thread's partial row sums
#pragma unroll
    for (int r = 0; r < RM; r++) mx[r][0] = mx[r][1] = -INFINITY, sum[r][0] = sum[r][1] = 0.0f;

    const int nkt = (min(m0 + BM, end) - 1 - start) / BN + 1;  // key tiles up to the diagonal
    for (int j = jstart; j < nkt; j++) {
        const int kv0 = start + j * BN;
        cp_async_wait<0>();
        __syncthreads();  // K tile j is visible; every warp is done with V tile j-1
        load_tile<BN, DS, NT>(sV, LDV, vg, ks, kv0, end, ds0, D);
        cp_async_commit();

        float s[RM][BN / 8][4] = {};
        mma_nt<RM, BN, DP>(s, sQ + wr0 * LDK, LDK, sK, LDK, D);
        if (softcap > 0.0f) {  // Gemma 2: scale * s -> cap * tanh(scale * s / cap), kept in units of s
            const float a = scale / softcap, b = softcap / scale;
#pragma unroll
            for (int r = 0; r < RM; r++)
#pragma unroll
                for (int n = 0; n < BN / 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) s[r][n][e] = b * tanhf(a * s[r][n][e]);
        }
        // The tile reaches past the warp's first row (causal mask), or a window may hide some of its keys.
        if (kv0 + BN - 1 > m0 + wr0 || window > 0) {
#pragma unroll
            for (int r = 0; r < RM; r++)
#pragma unroll
                for (int n = 0; n < BN / 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int row = m0 + wr0 + r * 16 + lane / 4 + (e / 2) * 8;
                        const int key = kv0 + n * 8 + (lane % 4) * 2 + e % 2;
                        if (key > row || (window > 0 && key <= row - window)) s[r][n][e] = -INFINITY;
                    }
        }
        // Online softmax. A row whose keys are all masked so far keeps max -inf; it then uses 0 as the
        // reference so that exp2(-inf - ...) stays 0 instead of NaN.
#pragma unroll
        for (int r = 0; r < RM; r++)
#pragma unroll
            for (int i = 0; i < 2; i++) {
                float m_new = mx[r][i];
#pragma unroll
                for (int n = 0; n < BN / 8; n++) m_new = fmaxf(m_new, fmaxf(s[r][n][2 * i], s[r][n][2 * i + 1]));
                m_new = fmaxf(m_new, __shfl_xor_sync(0xffffffffu, m_new, 1));
                m_new = fmaxf(m_new, __shfl_xor_sync(0xffffffffu, m_new, 2));
                const float m_ref = m_new == -INFINITY ? 0.0f : m_new * sl2;
                const float alpha = exp2_approx(mx[r][i] * sl2 - m_ref);
                mx[r][i] = m_new;
                float rs = 0.0f;
#pragma unroll
                for (int n = 0; n < BN / 8; n++)
#pragma unroll
                    for (int e = 2 * i; e < 2 * i + 2; e++) {
                        const float p = exp2_approx(fmaf(s[r][n][e], sl2, -m_ref));
                        s[r][n][e] = p;
                        rs += p;
                    }
                sum[r][i] = sum[r][i] * alpha + rs;
#pragma unroll
                for (int n = 0; n < DS / 8; n++) o[r][n][2 * i] *= alpha, o[r][n][2 * i + 1] *= alpha;
            }

        cp_async_wait<0>();
        __syncthreads();  // V tile j is visible; every warp is done with K tile j
        if (j + 1 < nkt) {
            load_tile<BN, DP, NT>(sK, LDK, kg, ks, kv0 + BN, end, 0, D);
            cp_async_commit();
        }
        uint32_t p[RM][BN / 16][4];
        to_afrag<RM, BN>(p, s);
        mma_nn<RM, BN, DS>(o, p, sV, LDV, D - ds0);
    }

#pragma unroll
    for (int r = 0; r < RM; r++)
#pragma unroll
        for (int i = 0; i < 2; i++) {
            float l = sum[r][i];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            const int row = m0 + wr0 + r * 16 + lane / 4 + i * 8;
            if (row >= end) continue;
            const float inv = 1.0f / l;
            bf16* orow = out + static_cast<size_t>(row) * qs + static_cast<size_t>(h) * D + ds0;
#pragma unroll
            for (int n = 0; n < DS / 8; n++) {
                const int col = n * 8 + (lane % 4) * 2;
                if (ds0 + col < D)
                    *reinterpret_cast<__nv_bfloat162*>(orow + col) =
                        __floats2bfloat162_rn(o[r][n][2 * i] * inv, o[r][n][2 * i + 1] * inv);
            }
            if (ds0 == 0 && lane % 4 == 0) lse[static_cast<size_t>(h) * T + row] = mx[r][i] * scale + logf(l);
        }
}

// delta[h, t] = sum_d dout[t,h,d] * out[t,h,d] in fp32; one warp per (token, head) row.
__global__ void attention_delta_kernel(float* __restrict__ delta, const bf16* __restrict__ dout,
                                       const bf16* __restrict__ out, int T, int Hq, int D) {
    const int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;  // t * Hq + h
    const int lane = threadIdx.x % 32;
    if (row >= static_cast<int64_t>(T) * Hq) return;
    const bf16* a = dout + row * D;
    const bf16* b = out + row * D;
    float acc = 0.0f;
    for (int d = lane * 8; d < D; d += 32 * 8) {  // D % 16 == 0: whole 16-byte chunks
        const uint4 va = *reinterpret_cast<const uint4*>(a + d), vb = *reinterpret_cast<const uint4*>(b + d);
        const __nv_bfloat162* pa = reinterpret_cast<const __nv_bfloat162*>(&va);
        const __nv_bfloat162* pb = reinterpret_cast<const __nv_bfloat162*>(&vb);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float2 fa = __bfloat1622float2(pa[i]), fb = __bfloat1622float2(pb[i]);
            acc = fmaf(fa.x, fb.x, acc);
            acc = fmaf(fa.y, fb.y, acc);
        }
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (lane == 0) delta[static_cast<size_t>(row % Hq) * T + row / Hq] = acc;
}

// One block per (key tile, output slice, kv head, sample): dk, dv of its keys, summed over the G query
// heads of the kv head and the query tiles from the key tile to the sample end. Works on transposed
// scores (keys are the rows), so P^T and dS^T come out of the accumulators as A operands.
template <class C>
__global__ void __launch_bounds__(C::NT)
    attention_backward_dkdv_kernel(bf16* __restrict__ dk, bf16* __restrict__ dv, const bf16* __restrict__ dout,
                                   const bf16* __restrict__ q, const bf16* __restrict__ k,
                                   const bf16* __restrict__ v, const float* __restrict__ lse,
                                   const float* __restrict__ delta, const int32_t* __restrict__ cu_seqlens, int T,
                                   int Hq, int Hkv, int D, float scale, int window, float softcap) {
    constexpr int DP = C::DP, DS = C::DS, BN = C::BN, BM = C::BM, RM = C::RM, NT = C::NT, NSL = C::NSL;
    constexpr int LDK = C::LDK;
    extern __shared__ __align__(16) unsigned char smem[];
    bf16* sK = reinterpret_cast<bf16*>(smem);  // [BN, LDK]
    bf16* sV = sK + BN * LDK;                  // [BN, LDK]
    bf16* sQ0 = sV + BN * LDK;                 // stage st: sQ [BM, LDK] at sQ0 + st*2*BM*LDK, sdO after it
    float* sF0 = reinterpret_cast<float*>(sQ0 + 4 * BM * LDK);  // stage st: lse [BM] at sF0 + st*2*BM, delta after

    const int tile = static_cast<int>(blockIdx.x) / NSL;
    const int ds0 = static_cast<int>(blockIdx.x) % NSL * DS;
    const int g = blockIdx.y, sample = blockIdx.z;
    const int start = cu_seqlens[sample], end = cu_seqlens[sample + 1];
    const int n0 = start + tile * BN;
    if (n0 >= end || ds0 >= D) return;
    const int G = Hq / Hkv;
    const size_t qs = static_cast<size_t>(Hq) * D, ks = static_cast<size_t>(Hkv) * D;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wr0 = warp * RM * 16;
    // Query tiles from the key tile to the sample end (with a window: to the last query that sees the tile).
    const int q_end = window > 0 ? min(end, n0 + BN - 1 + window) : end;
    const int nqt = (q_end - n0 + BM - 1) / BM;
    const int niter = G * nqt;                 // (query head, query tile) pairs, head-major

    auto load_stage = [&](int it, int st) {
        const int h = g * G + it / nqt, m0 = n0 + it % nqt * BM;
        bf16* sQ = sQ0 + st * 2 * BM * LDK;
        float* sF = sF0 + st * 2 * BM;
        load_tile<BM, DP, NT>(sQ, LDK, q + static_cast<size_t>(h) * D, qs, m0, end, 0, D);
        load_tile<BM, DP, NT>(sQ + BM * LDK, LDK, dout + static_cast<size_t>(h) * D, qs, m0, end, 0, D);
        load_row<BM, NT>(sF, lse + static_cast<size_t>(h) * T, m0, end);
        load_row<BM, NT>(sF + BM, delta + static_cast<size_t>(h) * T, m0, end);
    };
    load_tile<BN, DP, NT>(sK, LDK, k + static_cast<size_t>(g) * D, ks, n0, end, 0, D);
    load_tile<BN, DP, NT>(sV, LDK, v + static_cast<size_t>(g) * D, ks, n0, end, 0, D);
    load_stage(0, 0);
    cp_async_commit();

    const float sl2 = scale * kLog2e;
    float dka[RM][DS / 8][4] = {}, dva[RM][DS / 8][4] = {};
    for (int it = 0; it < niter; it++) {
        const int st = it & 1;
        if (it + 1 < niter) {
            load_stage(it + 1, st ^ 1);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();  // stage st is visible
        const bf16* sQ = sQ0 + st * 2 * BM * LDK;
        const bf16* sdO = sQ + BM * LDK;
        const float* sL = sF0 + st * 2 * BM;
        const float* sD = sL + BM;
        const int m0 = n0 + it % nqt * BM;

        float s[RM][BM / 8][4] = {}, dp[RM][BM / 8][4] = {};
        // S^T = K Q^T, dP^T = V dO^T
        mma_nt_pair<RM, BM, DP>(s, dp, sK + wr0 * LDK, sV + wr0 * LDK, LDK, sQ, sdO, LDK, D);
#pragma unroll
        for (int r = 0; r < RM; r++)
#pragma unroll
            for (int n = 0; n < BM / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int key = n0 + wr0 + r * 16 + lane / 4 + (e / 2) * 8;
                    const int qi = n * 8 + (lane % 4) * 2 + e % 2;
                    const int t = m0 + qi;
                    float sc = s[r][n][e], dcap = 1.0f;
                    if (softcap > 0.0f) {  // the forward's capped score; d capped / d raw = 1 - tanh^2
                        const float th = tanhf(sc * (scale / softcap));
                        sc = th * (softcap / scale);
                        dcap = 1.0f - th * th;
                    }
                    const float p = t >= key && t < end && (window <= 0 || t - key < window)
                                        ? exp2_approx(fmaf(sc, sl2, -sL[qi] * kLog2e))
                                        : 0.0f;
                    s[r][n][e] = p;
                    dp[r][n][e] = p * (dp[r][n][e] - sD[qi]) * dcap;  // dS^T
                }
        uint32_t a[RM][BM / 16][4];
        to_afrag<RM, BM>(a, s);
        mma_nn<RM, BM, DS>(dva, a, sdO + ds0, LDK, D - ds0);  // dV += P^T dO
        to_afrag<RM, BM>(a, dp);
        mma_nn<RM, BM, DS>(dka, a, sQ + ds0, LDK, D - ds0);   // dK += dS^T Q
        __syncthreads();  // every warp is done with stage st before it is loaded again
    }

#pragma unroll
    for (int r = 0; r < RM; r++)
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int key = n0 + wr0 + r * 16 + lane / 4 + i * 8;
            if (key >= end) continue;
            const size_t off = static_cast<size_t>(key) * ks + static_cast<size_t>(g) * D + ds0;
#pragma unroll
            for (int n = 0; n < DS / 8; n++) {
                const int col = n * 8 + (lane % 4) * 2;
                if (ds0 + col >= D) continue;
                *reinterpret_cast<__nv_bfloat162*>(dk + off + col) =
                    __floats2bfloat162_rn(dka[r][n][2 * i] * scale, dka[r][n][2 * i + 1] * scale);
                *reinterpret_cast<__nv_bfloat162*>(dv + off + col) =
                    __floats2bfloat162_rn(dva[r][n][2 * i], dva[r][n][2 * i + 1]);
            }
        }
}

// One block per (query tile, output slice, query head, sample): dq of its queries over the key tiles of
// the sample up to the diagonal.
template <class C>
__global__ void __launch_bounds__(C::NT)
    attention_backward_dq_kernel(bf16* __restrict__ dq, const bf16* __restrict__ dout, const bf16* __restrict__ q,
                                 const bf16* __restrict__ k, const bf16* __restrict__ v,
                                 const float* __restrict__ lse, const float* __restrict__ delta,
                                 const int32_t* __restrict__ cu_seqlens, int T, int Hq, int Hkv, int D,
                                 float scale, int window, float softcap) {
    constexpr int DP = C::DP, DS = C::DS, BM = C::BM, BN = C::BN, RM = C::RM, NT = C::NT, NSL = C::NSL;
    constexpr int LDK = C::LDK;
    extern __shared__ __align__(16) unsigned char smem[];
    bf16* sQ = reinterpret_cast<bf16*>(smem);  // [BM, LDK]
    bf16* sdO = sQ + BM * LDK;                 // [BM, LDK]
    bf16* sK0 = sdO + BM * LDK;                // stage st: sK [BN, LDK] at sK0 + st*2*BN*LDK, sV after it

    const int ntiles = static_cast<int>(gridDim.x) / NSL;
    const int tile = ntiles - 1 - static_cast<int>(blockIdx.x) / NSL;
    const int ds0 = static_cast<int>(blockIdx.x) % NSL * DS;
    const int h = blockIdx.y, sample = blockIdx.z;
    const int start = cu_seqlens[sample], end = cu_seqlens[sample + 1];
    const int m0 = start + tile * BM;
    if (m0 >= end || ds0 >= D) return;
    const int g = h / (Hq / Hkv);
    const size_t qs = static_cast<size_t>(Hq) * D, ks = static_cast<size_t>(Hkv) * D;
    const bf16* kg = k + static_cast<size_t>(g) * D;
    const bf16* vg = v + static_cast<size_t>(g) * D;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wr0 = warp * RM * 16;

    auto load_stage = [&](int j, int st) {
        bf16* sK = sK0 + st * 2 * BN * LDK;
        load_tile<BN, DP, NT>(sK, LDK, kg, ks, start + j * BN, end, 0, D);
        load_tile<BN, DP, NT>(sK + BN * LDK, LDK, vg, ks, start + j * BN, end, 0, D);
    };
    load_tile<BM, DP, NT>(sQ, LDK, q + static_cast<size_t>(h) * D, qs, m0, end, 0, D);
    load_tile<BM, DP, NT>(sdO, LDK, dout + static_cast<size_t>(h) * D, qs, m0, end, 0, D);
    const int jstart = window > 0 ? max(0, m0 - window + 1 - start) / BN : 0;  // key tiles before the window
    load_stage(jstart, jstart & 1);
    cp_async_commit();

    // lse (in log2 units) and delta of the thread's rows.
    float lr[RM][2], dr[RM][2];
#pragma unroll
    for (int r = 0; r < RM; r++)
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int row = m0 + wr0 + r * 16 + lane / 4 + i * 8;
            const bool ok = row < end;
            lr[r][i] = ok ? lse[static_cast<size_t>(h) * T + row] * kLog2e : 0.0f;
            dr[r][i] = ok ? delta[static_cast<size_t>(h) * T + row] : 0.0f;
        }

    const float sl2 = scale * kLog2e;
    float dqa[RM][DS / 8][4] = {};
    const int nkt = (min(m0 + BM, end) - 1 - start) / BN + 1;
    for (int j = jstart; j < nkt; j++) {
        const int st = j & 1;
        if (j + 1 < nkt) {
            load_stage(j + 1, st ^ 1);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();  // stage st is visible
        const bf16* sK = sK0 + st * 2 * BN * LDK;
        const bf16* sV = sK + BN * LDK;
        const int kv0 = start + j * BN;

        float s[RM][BN / 8][4] = {}, dp[RM][BN / 8][4] = {};
        // S = Q K^T, dP = dO V^T
        mma_nt_pair<RM, BN, DP>(s, dp, sQ + wr0 * LDK, sdO + wr0 * LDK, LDK, sK, sV, LDK, D);
#pragma unroll
        for (int r = 0; r < RM; r++)
#pragma unroll
            for (int n = 0; n < BN / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int row = m0 + wr0 + r * 16 + lane / 4 + (e / 2) * 8;
                    const int key = kv0 + n * 8 + (lane % 4) * 2 + e % 2;
                    float sc = s[r][n][e], dcap = 1.0f;
                    if (softcap > 0.0f) {
                        const float th = tanhf(sc * (scale / softcap));
                        sc = th * (softcap / scale);
                        dcap = 1.0f - th * th;
                    }
                    const float p = key <= row && row < end && (window <= 0 || row - key < window)
                                        ? exp2_approx(fmaf(sc, sl2, -lr[r][e / 2]))
                                        : 0.0f;
                    dp[r][n][e] = p * (dp[r][n][e] - dr[r][e / 2]) * dcap;  // dS
                }
        uint32_t a[RM][BN / 16][4];
        to_afrag<RM, BN>(a, dp);
        mma_nn<RM, BN, DS>(dqa, a, sK + ds0, LDK, D - ds0);  // dQ += dS K
        __syncthreads();  // every warp is done with stage st before it is loaded again
    }

#pragma unroll
    for (int r = 0; r < RM; r++)
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int row = m0 + wr0 + r * 16 + lane / 4 + i * 8;
            if (row >= end) continue;
            bf16* drow = dq + static_cast<size_t>(row) * qs + static_cast<size_t>(h) * D + ds0;
#pragma unroll
            for (int n = 0; n < DS / 8; n++) {
                const int col = n * 8 + (lane % 4) * 2;
                if (ds0 + col < D)
                    *reinterpret_cast<__nv_bfloat162*>(drow + col) =
                        __floats2bfloat162_rn(dqa[r][n][2 * i] * scale, dqa[r][n][2 * i + 1] * scale);
            }
        }
}

// ---------------------------------------------------------------------------------------------------------
// kernel launchers

// Tile choices per D bucket (DP, DS, rows, cols, warps). Forward and dq: BM queries x BN keys per step;
// dk/dv: BN keys x BM queries per step.
using Fwd64 = FwdCfg<64, 64, 128, 64, 4>;
using Fwd128 = FwdCfg<128, 128, 128, 32, 4>;
using Fwd256 = FwdCfg<256, 128, 64, 32, 4>;
using Dkv64 = DkvCfg<64, 64, 64, 64, 4>;
using Dkv128 = DkvCfg<128, 128, 64, 32, 4>;
using Dkv256 = DkvCfg<256, 128, 32, 16, 2>;
using Dq64 = DqCfg<64, 64, 64, 64, 4>;
using Dq128 = DqCfg<128, 128, 64, 32, 4>;
using Dq256 = DqCfg<256, 128, 32, 16, 2>;

constexpr size_t kMaxSmem = 99 * 1024;  // per-block limit of sm_86 / sm_89 / sm_120
static_assert(Fwd64::smem <= kMaxSmem && Fwd128::smem <= kMaxSmem && Fwd256::smem <= kMaxSmem);
static_assert(Dkv64::smem <= kMaxSmem && Dkv128::smem <= kMaxSmem && Dkv256::smem <= kMaxSmem);
static_assert(Dq64::smem <= kMaxSmem && Dq128::smem <= kMaxSmem && Dq256::smem <= kMaxSmem);

// Grid over (tiles of max_seqlen x output slices, heads, samples).
dim3 tile_grid(int max_seqlen, int rows_per_tile, int slices, int heads, int S) {
    return dim3(static_cast<unsigned>((max_seqlen + rows_per_tile - 1) / rows_per_tile * slices),
                static_cast<unsigned>(heads), static_cast<unsigned>(S));
}

template <class C>
void forward_launch(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v, const int32_t* cu_seqlens,
                    int S, int T, int Hq, int Hkv, int D, float scale, int max_seqlen, int window, float softcap) {
    auto kernel = attention_forward_kernel<C>;
    allow_dynamic_smem(reinterpret_cast<const void*>(kernel), C::smem);
    kernel<<<tile_grid(max_seqlen, C::BM, C::NSL, Hq, S), C::NT, C::smem, context().stream>>>(
        out, lse, q, k, v, cu_seqlens, T, Hq, Hkv, D, scale, window, softcap);
    TANDEM_CUDA_LAUNCH_CHECK();
}

template <class Ckv, class Cq>
void backward_launch(bf16* dq, bf16* dk, bf16* dv, const bf16* dout, const bf16* q, const bf16* k, const bf16* v,
                     const float* lse, const float* delta, const int32_t* cu_seqlens, int S, int T, int Hq, int Hkv,
                     int D, float scale, int max_seqlen, int window, float softcap) {
    auto kv_kernel = attention_backward_dkdv_kernel<Ckv>;
    auto q_kernel = attention_backward_dq_kernel<Cq>;
    allow_dynamic_smem(reinterpret_cast<const void*>(kv_kernel), Ckv::smem);
    allow_dynamic_smem(reinterpret_cast<const void*>(q_kernel), Cq::smem);
    cudaStream_t stream = context().stream;
    kv_kernel<<<tile_grid(max_seqlen, Ckv::BN, Ckv::NSL, Hkv, S), Ckv::NT, Ckv::smem, stream>>>(
        dk, dv, dout, q, k, v, lse, delta, cu_seqlens, T, Hq, Hkv, D, scale, window, softcap);
    TANDEM_CUDA_LAUNCH_CHECK();
    q_kernel<<<tile_grid(max_seqlen, Cq::BM, Cq::NSL, Hq, S), Cq::NT, Cq::smem, stream>>>(
        dq, dout, q, k, v, lse, delta, cu_seqlens, T, Hq, Hkv, D, scale, window, softcap);
    TANDEM_CUDA_LAUNCH_CHECK();
}

void check_args(const int32_t* cu_seqlens, int S, int T, int Hq, int Hkv, int D, float scale, int max_seqlen) {
    TANDEM_KCHECK_PTR(cu_seqlens);
    TANDEM_KCHECK(S > 0 && T > 0 && Hq > 0 && Hkv > 0);
    TANDEM_KCHECK(Hq % Hkv == 0);
    TANDEM_KCHECK(attention_supported(D));
    TANDEM_KCHECK(scale > 0.0f);
    TANDEM_KCHECK(max_seqlen > 0 && max_seqlen <= T);
    TANDEM_KCHECK(S <= 65535 && Hq <= 65535);  // grid y / z limits
}

}  // namespace

bool attention_supported(int D) { return D > 0 && D % 16 == 0 && D <= 256; }

void attention_forward(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v, const int32_t* cu_seqlens,
                       int S, int T, int Hq, int Hkv, int D, float scale, int max_seqlen, int window, float softcap) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(lse);
    TANDEM_KCHECK_PTR(q);
    TANDEM_KCHECK_PTR(k);
    TANDEM_KCHECK_PTR(v);
    check_args(cu_seqlens, S, T, Hq, Hkv, D, scale, max_seqlen);
    TANDEM_KCHECK(window >= 0 && softcap >= 0.0f);
    TANDEM_KCHECK(aligned16(out) && aligned16(q) && aligned16(k) && aligned16(v));
    if (D <= 64)
        forward_launch<Fwd64>(out, lse, q, k, v, cu_seqlens, S, T, Hq, Hkv, D, scale, max_seqlen, window, softcap);
    else if (D <= 128)
        forward_launch<Fwd128>(out, lse, q, k, v, cu_seqlens, S, T, Hq, Hkv, D, scale, max_seqlen, window, softcap);
    else
        forward_launch<Fwd256>(out, lse, q, k, v, cu_seqlens, S, T, Hq, Hkv, D, scale, max_seqlen, window, softcap);
}

size_t attention_backward_workspace(int T, int Hq, int /*D*/) {
    return (sizeof(float) * static_cast<size_t>(T) * static_cast<size_t>(Hq) + 255) / 256 * 256;  // delta [Hq, T]
}

void attention_backward(bf16* dq, bf16* dk, bf16* dv, const bf16* dout, const bf16* q, const bf16* k, const bf16* v,
                        const bf16* out, const float* lse, const int32_t* cu_seqlens, int S, int T, int Hq, int Hkv,
                        int D, float scale, int max_seqlen, void* workspace, int window, float softcap) {
    TANDEM_KCHECK_PTR(dq);
    TANDEM_KCHECK_PTR(dk);
    TANDEM_KCHECK_PTR(dv);
    TANDEM_KCHECK_PTR(dout);
    TANDEM_KCHECK_PTR(q);
    TANDEM_KCHECK_PTR(k);
    TANDEM_KCHECK_PTR(v);
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(lse);
    TANDEM_KCHECK_PTR(workspace);
    check_args(cu_seqlens, S, T, Hq, Hkv, D, scale, max_seqlen);
    TANDEM_KCHECK(window >= 0 && softcap >= 0.0f);
    TANDEM_KCHECK(aligned16(dq) && aligned16(dk) && aligned16(dv) && aligned16(dout) && aligned16(q) &&
                  aligned16(k) && aligned16(v) && aligned16(out) && aligned16(workspace));
    float* delta = static_cast<float*>(workspace);  // [Hq, T]

    constexpr int kDeltaThreads = 256;
    attention_delta_kernel<<<grid_for(static_cast<int64_t>(T) * Hq * 32, kDeltaThreads), kDeltaThreads,
                             0, context().stream>>>(delta, dout, out, T, Hq, D);
    TANDEM_CUDA_LAUNCH_CHECK();
    if (D <= 64)
        backward_launch<Dkv64, Dq64>(dq, dk, dv, dout, q, k, v, lse, delta, cu_seqlens, S, T, Hq, Hkv, D, scale,
                                     max_seqlen, window, softcap);
    else if (D <= 128)
        backward_launch<Dkv128, Dq128>(dq, dk, dv, dout, q, k, v, lse, delta, cu_seqlens, S, T, Hq, Hkv, D, scale,
                                       max_seqlen, window, softcap);
    else
        backward_launch<Dkv256, Dq256>(dq, dk, dv, dout, q, k, v, lse, delta, cu_seqlens, S, T, Hq, Hkv, D, scale,
                                       max_seqlen, window, softcap);
}

namespace {

// One warp per (token, head) row: lane 0's log-sum-exp with the sink, then the row rescaled.
__global__ void attention_sinks_kernel(bf16* out, float* lse, const bf16* sinks, int T, int Hq, int D) {
    const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;  // t * Hq + h
    if (row >= int64_t(T) * Hq) return;
    const int lane = threadIdx.x % 32;
    const int t = int(row / Hq), h = int(row % Hq);
    float* l = lse + int64_t(h) * T + t;
    const float old = *l;
    const float sink = __bfloat162float(sinks[h]);
    const float m = fmaxf(old, sink);
    const float total = m + logf(expf(old - m) + expf(sink - m));
    const float keep = expf(old - total);
    __syncwarp();
    if (lane == 0) *l = total;
    bf16* o = out + row * D;
    for (int k = lane; k < D; k += 32) o[k] = __float2bfloat16_rn(__bfloat162float(o[k]) * keep);
}

}  // namespace

void attention_sinks(bf16* out, float* lse, const bf16* sinks, int T, int Hq, int D) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(lse);
    TANDEM_KCHECK_PTR(sinks);
    TANDEM_KCHECK(T > 0 && Hq > 0 && D > 0);
    constexpr int kWarps = 8;
    const int64_t rows = int64_t(T) * Hq;
    attention_sinks_kernel<<<unsigned((rows + kWarps - 1) / kWarps), kWarps * 32, 0, context().stream>>>(
        out, lse, sinks, T, Hq, D);
    TANDEM_CUDA_LAUNCH_CHECK();
}

}  // namespace tandem::cuda
