// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// KV cache write and attention against the cache on the CUDA backend (see kv_cache.h).
// T = query rows, N = slots, L = layers, M = positions per slot, Hq / Hkv = heads, G = Hq / Hkv, D = head_dim,
// KV = Hkv * D, S = key splits, GM = query heads one block serves (1, 2, 4 or 8: the power of two >= min(G, 8)),
// W = the window.
// Design of decode_attention ("flash decoding"):
//  - Block (row t, kv head g, query-head group, split s) of kThreads = 4 warps. Its keys are the split's chunk
//    [s * chunk, (s + 1) * chunk) intersected with the row's visible range [max(0, p - W + 1), p]. A key is
//    handled by a group of `lpk` lanes (D / 8 rounded up to a power of two: 16 for D = 128), each lane holding
//    8 channels as one 16-byte load of K and one of V; a warp takes 32 / lpk keys per step, the 4 warps
//    interleave. Each key's row of K and V is read ONCE for the GM query heads of its kv head (the cache
//    traffic of GQA is that of its kv heads).
//  - Online softmax in fp32 per (key group, head): running max m, sum l and the unnormalised output; groups
//    are merged with shuffles, warps through shared memory. One split writes out directly (normalised); with
//    S > 1 each block writes (o, m, l) to the workspace and decode_combine_kernel merges the splits of a
//    (row, head): o = sum_s o_s e^(m_s - m) / sum_s l_s e^(m_s - m).
//  - S depends on (T, Hq, Hkv, D, M) only (the host never reads the positions): enough blocks to cover the
//    GPU (kTargetBlocks) but no chunk below kMinChunk keys. Blocks past a row's position exit after writing
//    an empty partial (m = -inf, l = 0), which the merge skips.
//  - Not measured or tuned yet (no GPU where this was written): the loop over keys is unrolled by 2 to keep
//    two loads of K and V in flight per lane.
#include "kernels/cuda/kv_cache.h"
#include "kernels/cuda/vec.cuh"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace tandem::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kMaxD = 256;          // head_dim limit: 32 lanes x 8 channels
constexpr int kMaxGroup = 8;        // query heads one block serves
constexpr int kMinChunk = 128;      // keys per split, at least
constexpr int kMaxSplits = 128;
constexpr int kTargetBlocks = 1024; // ~8 blocks per SM on an H100 (132 SMs)
constexpr int kWriteThreads = 128;

// ----------------------------------------------------------------------------------------------------------
// CUDA kernels

// One block per row t: the row's k and v into (slot, layer, pos) of the caches. W = 8 (16-byte packs) or 1.
template <int W>
__global__ void kv_cache_write_kernel(bf16* __restrict__ k_cache, bf16* __restrict__ v_cache,
                                      const bf16* __restrict__ k, const bf16* __restrict__ v,
                                      const int32_t* __restrict__ row_slot, const int32_t* __restrict__ row_pos,
                                      int layer, int N, int L, int M, int KV) {
    const int t = blockIdx.x;
    const int slot = row_slot[t], pos = row_pos[t];
    if (slot < 0 || slot >= N || pos < 0 || pos >= M) return;  // see kv_cache.h: skipped
    const size_t dst = ((size_t(slot) * L + layer) * M + pos) * size_t(KV);
    const size_t src = size_t(t) * KV;
    for (int i = threadIdx.x * W; i < KV; i += blockDim.x * W) {
        store_pack<W>(k_cache + dst + i, load_pack<W>(k + src + i));
        store_pack<W>(v_cache + dst + i, load_pack<W>(v + src + i));
    }
}

struct DecodeArgs {
    bf16* out;       // [T, Hq, D]
    float* part_o;   // [T * Hq, S, D] (S > 1)
    float* part_m;   // [T * Hq, S]
    float* part_l;   // [T * Hq, S]
    const bf16* q;   // [T, Hq, D]
    const bf16* k_cache;  // [N, L, M, KV]
    const bf16* v_cache;  // [N, L, M, KV]
    const int32_t* row_slot;  // [T]
    const int32_t* row_pos;   // [T]
    int layer, N, L, M, Hq, Hkv, D;
    float scale;
    int window;
    float softcap;
    const bf16* sinks;  // [Hq] attention sinks (gpt-oss), or nullptr
    int groups_per_kv;  // ceil(G / GM)
    int splits, chunk;
    int lpk;            // lanes per key
};

__device__ __forceinline__ bool bad_row(const DecodeArgs& a, int slot, int pos) {
    return slot < 0 || slot >= a.N || pos < 0 || pos >= a.M;
}

// W channels of a bf16 row at p into x (as fp32).
template <int W>
__device__ __forceinline__ void load_f32(float* x, const bf16* p) {
    const Pack<bf16, W> pk = load_pack<W>(p);
#pragma unroll
    for (int w = 0; w < W; w++) x[w] = __bfloat162float(pk.v[w]);
}

// Merge the running softmax state (m, l, acc) with another (mo, lo, acco) of the same head.
__device__ __forceinline__ void merge_weights(float m, float mo, float& mn, float& ca, float& cb) {
    mn = fmaxf(m, mo);
    ca = m == -INFINITY ? 0.0f : expf(m - mn);
    cb = mo == -INFINITY ? 0.0f : expf(mo - mn);
}

// W: channels per lane and load (8, or 1 on the scalar path); NV = 8 / W loads per lane cover the lane's
// channels (c * lpk + li) * W .. + W for c < NV. GM: query heads per block.
template <int W, int GM>
__global__ void __launch_bounds__(kThreads) decode_attention_kernel(const DecodeArgs a) {
    constexpr int NV = 8 / W;
    constexpr int E = NV * W;  // channels per lane
    __shared__ float s_acc[kWarps][GM][kMaxD];
    __shared__ float s_m[kWarps][GM], s_l[kWarps][GM];

    const int G = a.Hq / a.Hkv, D = a.D;
    const int HG = a.Hkv * a.groups_per_kv;
    const int t = int(blockIdx.x / unsigned(HG)), hg = int(blockIdx.x % unsigned(HG));
    const int g = hg / a.groups_per_kv;
    const int h_first = g * G + (hg % a.groups_per_kv) * GM;
    const int nh = min(GM, (g + 1) * G - h_first);
    const int split = blockIdx.y;
    const int slot = a.row_slot[t], pos = a.row_pos[t];
    if (bad_row(a, slot, pos)) {
        if (a.splits == 1)  // with splits, decode_combine_kernel writes the NaNs
            for (int i = threadIdx.x; i < nh * D; i += kThreads)
                a.out[(size_t(t) * a.Hq + h_first) * D + i] = __float2bfloat16_rn(NAN);
        return;
    }
    const int first = a.window > 0 ? max(0, pos - a.window + 1) : 0;
    const int lo = max(first, split * a.chunk), hi = min(pos + 1, (split + 1) * a.chunk);
    if (lo >= hi) {  // only with splits > 1: an empty partial
        if (threadIdx.x < nh) {
            const size_t r = (size_t(t) * a.Hq + h_first + threadIdx.x) * a.splits + split;
            a.part_m[r] = -INFINITY;
            a.part_l[r] = 0.0f;
        }
        return;
    }

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int lpk = a.lpk, kpw = 32 / lpk;
    const int li = lane % lpk, kg = lane / lpk;
    const int step = kWarps * kpw;  // keys per iteration of the block
    const size_t KV = size_t(a.Hkv) * D;

    float qv[GM][E];
#pragma unroll
    for (int h = 0; h < GM; h++)
#pragma unroll
        for (int c = 0; c < NV; c++) {
            const int e = (c * lpk + li) * W;
            if (h < nh && e < D)
                load_f32<W>(&qv[h][c * W], a.q + (size_t(t) * a.Hq + h_first + h) * D + e);
            else
#pragma unroll
                for (int w = 0; w < W; w++) qv[h][c * W + w] = 0.0f;
        }

    float m[GM], l[GM], acc[GM][E];
#pragma unroll
    for (int h = 0; h < GM; h++) {
        m[h] = -INFINITY;
        l[h] = 0.0f;
#pragma unroll
        for (int e = 0; e < E; e++) acc[h][e] = 0.0f;
    }

    const size_t base = (size_t(slot) * a.L + a.layer) * size_t(a.M) * KV + size_t(g) * D;
    const bf16* __restrict__ kc = a.k_cache + base;  // key j: kc + j * KV, [D]
    const bf16* __restrict__ vc = a.v_cache + base;
    // Every lane of a warp runs the same number of iterations (the shuffles need the whole warp); a key
    // group past hi computes on zeros and does not update its state.
#pragma unroll 2
    for (int j0 = lo + warp * kpw; j0 < hi; j0 += step) {
        const int j = j0 + kg;
        const bool valid = j < hi;
        float kx[E], vx[E];
#pragma unroll
        for (int c = 0; c < NV; c++) {
            const int e = (c * lpk + li) * W;
            if (valid && e < D) {
                load_f32<W>(&kx[c * W], kc + size_t(j) * KV + e);
                load_f32<W>(&vx[c * W], vc + size_t(j) * KV + e);
            } else {
#pragma unroll
                for (int w = 0; w < W; w++) kx[c * W + w] = vx[c * W + w] = 0.0f;
            }
        }
        float s[GM];
#pragma unroll
        for (int h = 0; h < GM; h++) {
            float d = 0.0f;
#pragma unroll
            for (int e = 0; e < E; e++) d = fmaf(qv[h][e], kx[e], d);
            s[h] = d;
        }
        for (int off = lpk / 2; off > 0; off >>= 1)
#pragma unroll
            for (int h = 0; h < GM; h++) s[h] += __shfl_xor_sync(0xffffffffu, s[h], off);
        if (valid) {
#pragma unroll
            for (int h = 0; h < GM; h++) {
                float sc = a.scale * s[h];
                if (a.softcap > 0.0f) sc = a.softcap * tanhf(sc / a.softcap);
                const float mn = fmaxf(m[h], sc);
                const float corr = expf(m[h] - mn);  // m = -inf at the start: 0
                const float p = expf(sc - mn);
                l[h] = l[h] * corr + p;
#pragma unroll
                for (int e = 0; e < E; e++) acc[h][e] = fmaf(p, vx[e], acc[h][e] * corr);
                m[h] = mn;
            }
        }
    }

    // Merge the key groups of the warp (lanes li of every group hold the same channels).
    for (int off = lpk; off < 32; off <<= 1) {
#pragma unroll
        for (int h = 0; h < GM; h++) {
            const float mo = __shfl_xor_sync(0xffffffffu, m[h], off);
            const float lo_ = __shfl_xor_sync(0xffffffffu, l[h], off);
            float mn, ca, cb;
            merge_weights(m[h], mo, mn, ca, cb);
            l[h] = l[h] * ca + lo_ * cb;
#pragma unroll
            for (int e = 0; e < E; e++) {
                const float ao = __shfl_xor_sync(0xffffffffu, acc[h][e], off);
                acc[h][e] = acc[h][e] * ca + ao * cb;
            }
            m[h] = mn;
        }
    }
    if (kg == 0) {
#pragma unroll
        for (int h = 0; h < GM; h++)
#pragma unroll
            for (int c = 0; c < NV; c++) {
                const int e = (c * lpk + li) * W;
                if (e < D)
#pragma unroll
                    for (int w = 0; w < W; w++) s_acc[warp][h][e + w] = acc[h][c * W + w];
            }
        if (lane == 0)
#pragma unroll
            for (int h = 0; h < GM; h++) {
                s_m[warp][h] = m[h];
                s_l[warp][h] = l[h];
            }
    }
    __syncthreads();

    // Merge the warps: one thread per (head, channel).
    for (int i = threadIdx.x; i < nh * D; i += kThreads) {
        const int h = i / D, d = i % D;
        float mx = -INFINITY;
#pragma unroll
        for (int w = 0; w < kWarps; w++) mx = fmaxf(mx, s_m[w][h]);
        float lsum = 0.0f, o = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; w++) {
            const float wt = s_m[w][h] == -INFINITY ? 0.0f : expf(s_m[w][h] - mx);
            lsum += s_l[w][h] * wt;
            o += s_acc[w][h][d] * wt;
        }
        const size_t row = size_t(t) * a.Hq + h_first + h;  // (t, head)
        if (a.splits == 1) {
            const float sink = a.sinks ? expf(__bfloat162float(a.sinks[h_first + h]) - mx) : 0.0f;
            a.out[row * D + d] = __float2bfloat16_rn(o / (lsum + sink));
        } else {
            const size_t r = row * a.splits + split;
            a.part_o[r * D + d] = o;
            if (d == 0) {
                a.part_m[r] = mx;
                a.part_l[r] = lsum;
            }
        }
    }
}

// One block per (row, query head): merge the S partials. Empty ones (l = 0) are skipped without reading
// their o, which nobody wrote.
__global__ void decode_combine_kernel(const DecodeArgs a) {
    const int row = blockIdx.x;  // t * Hq + h
    const int t = row / a.Hq, D = a.D;
    bf16* out = a.out + size_t(row) * D;
    if (bad_row(a, a.row_slot[t], a.row_pos[t])) {
        for (int d = threadIdx.x; d < D; d += blockDim.x) out[d] = __float2bfloat16_rn(NAN);
        return;
    }
    const size_t r0 = size_t(row) * a.splits;
    float mx = -INFINITY;
    for (int s = 0; s < a.splits; s++)
        if (a.part_l[r0 + s] > 0.0f) mx = fmaxf(mx, a.part_m[r0 + s]);
    float lsum = 0.0f;
    for (int s = 0; s < a.splits; s++)
        if (a.part_l[r0 + s] > 0.0f) lsum += a.part_l[r0 + s] * expf(a.part_m[r0 + s] - mx);
    if (a.sinks) lsum += expf(__bfloat162float(a.sinks[row % a.Hq]) - mx);  // the sink column (gpt-oss)
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float o = 0.0f;
        for (int s = 0; s < a.splits; s++)
            if (a.part_l[r0 + s] > 0.0f) o += a.part_o[(r0 + s) * D + d] * expf(a.part_m[r0 + s] - mx);
        out[d] = __float2bfloat16_rn(o / lsum);
    }
}

// ----------------------------------------------------------------------------------------------------------
// kernel launchers

// The smallest power of two >= G, at most kMaxGroup: one block reads its kv head's keys for all G query
// heads when G <= 8 (G = 7 takes 8, not 4 + 3, which would read the keys twice).
int group_width(int G) {
    int gm = 1;
    while (gm < G && gm < kMaxGroup) gm *= 2;
    return gm;
}

int split_count(int T, int Hq, int Hkv, int M) {
    const int G = Hq / Hkv, GM = group_width(G);
    const int64_t blocks = int64_t(T) * Hkv * ((G + GM - 1) / GM);
    if (blocks >= kTargetBlocks) return 1;
    int64_t s = (kTargetBlocks + blocks - 1) / blocks;
    s = std::min<int64_t>(s, (int64_t(M) + kMinChunk - 1) / kMinChunk);
    s = std::min<int64_t>(s, kMaxSplits);
    return int(std::max<int64_t>(s, 1));
}

template <int W, int GM>
void launch_decode(const DecodeArgs& a, dim3 grid, cudaStream_t stream) {
    decode_attention_kernel<W, GM><<<grid, kThreads, 0, stream>>>(a);
}

template <int W>
void launch_decode_w(const DecodeArgs& a, int GM, dim3 grid, cudaStream_t stream) {
    switch (GM) {
        case 1: launch_decode<W, 1>(a, grid, stream); break;
        case 2: launch_decode<W, 2>(a, grid, stream); break;
        case 4: launch_decode<W, 4>(a, grid, stream); break;
        default: launch_decode<W, 8>(a, grid, stream); break;
    }
}

}  // namespace

void kv_cache_write(bf16* k_cache, bf16* v_cache, const bf16* k, const bf16* v, const int32_t* row_slot,
                    const int32_t* row_pos, int T, int layer, int N, int L, int M, int KV) {
    TANDEM_KCHECK_PTR(k_cache);
    TANDEM_KCHECK_PTR(v_cache);
    TANDEM_KCHECK_PTR(k);
    TANDEM_KCHECK_PTR(v);
    TANDEM_KCHECK_PTR(row_slot);
    TANDEM_KCHECK_PTR(row_pos);
    TANDEM_KCHECK(T > 0 && N > 0 && L > 0 && M > 0 && KV > 0);
    TANDEM_KCHECK(layer >= 0 && layer < L);
    const bool vec = KV % 8 == 0 && aligned16(k_cache) && aligned16(v_cache) && aligned16(k) && aligned16(v);
    const cudaStream_t s = context().stream;
    if (vec)
        kv_cache_write_kernel<8><<<unsigned(T), kWriteThreads, 0, s>>>(k_cache, v_cache, k, v, row_slot, row_pos,
                                                                       layer, N, L, M, KV);
    else
        kv_cache_write_kernel<1><<<unsigned(T), kWriteThreads, 0, s>>>(k_cache, v_cache, k, v, row_slot, row_pos,
                                                                       layer, N, L, M, KV);
    TANDEM_CUDA_LAUNCH_CHECK();
}

size_t decode_attention_workspace(int T, int Hq, int Hkv, int D, int M) {
    TANDEM_KCHECK(T > 0 && Hq > 0 && Hkv > 0 && D > 0 && M > 0 && Hq % Hkv == 0);
    const int S = split_count(T, Hq, Hkv, M);
    if (S == 1) return 0;
    const size_t rows = size_t(T) * Hq * S;
    return rows * (size_t(D) + 2) * sizeof(float);
}

void decode_attention(bf16* out, const bf16* q, const bf16* k_cache, const bf16* v_cache, const int32_t* row_slot,
                      const int32_t* row_pos, int T, int layer, int N, int L, int M, int Hq, int Hkv, int D,
                      float scale, int window, float softcap, void* workspace, const bf16* sinks) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(q);
    TANDEM_KCHECK_PTR(k_cache);
    TANDEM_KCHECK_PTR(v_cache);
    TANDEM_KCHECK_PTR(row_slot);
    TANDEM_KCHECK_PTR(row_pos);
    TANDEM_KCHECK(T > 0 && N > 0 && L > 0 && M > 0);
    TANDEM_KCHECK(layer >= 0 && layer < L);
    TANDEM_KCHECK(Hq > 0 && Hkv > 0 && Hq % Hkv == 0);
    TANDEM_KCHECK(D > 0 && D <= kMaxD);
    TANDEM_KCHECK(window >= 0);
    TANDEM_KCHECK(std::isfinite(scale) && std::isfinite(softcap));
    const int G = Hq / Hkv, GM = group_width(G);
    const int S = workspace ? split_count(T, Hq, Hkv, M) : 1;
    if (workspace) TANDEM_KCHECK(aligned16(workspace));

    DecodeArgs a{};
    a.out = out;
    a.q = q;
    a.k_cache = k_cache;
    a.v_cache = v_cache;
    a.row_slot = row_slot;
    a.row_pos = row_pos;
    a.layer = layer;
    a.N = N;
    a.L = L;
    a.M = M;
    a.Hq = Hq;
    a.Hkv = Hkv;
    a.D = D;
    a.scale = scale;
    a.window = window;
    a.softcap = softcap;
    a.sinks = sinks;
    a.groups_per_kv = (G + GM - 1) / GM;
    a.splits = S;
    a.chunk = int((int64_t(M) + S - 1) / S);
    if (S > 1) {
        const size_t rows = size_t(T) * Hq * S;
        a.part_o = static_cast<float*>(workspace);
        a.part_m = a.part_o + rows * size_t(D);
        a.part_l = a.part_m + rows;
    }
    const bool vec = D % 8 == 0 && aligned16(q) && aligned16(k_cache) && aligned16(v_cache);
    int lpk = 32;
    if (vec) {
        lpk = 1;
        while (lpk * 8 < D) lpk *= 2;
    }
    a.lpk = lpk;
    const int64_t blocks = int64_t(T) * Hkv * a.groups_per_kv;
    TANDEM_KCHECK(blocks < (int64_t(1) << 31));
    const dim3 grid{unsigned(blocks), unsigned(S), 1u};
    const cudaStream_t s = context().stream;
    if (vec)
        launch_decode_w<8>(a, GM, grid, s);
    else
        launch_decode_w<1>(a, GM, grid, s);
    TANDEM_CUDA_LAUNCH_CHECK();
    if (S > 1) {
        decode_combine_kernel<<<unsigned(T * Hq), 128, 0, s>>>(a);
        TANDEM_CUDA_LAUNCH_CHECK();
    }
}

}  // namespace tandem::cuda
