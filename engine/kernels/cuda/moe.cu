// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Mixture-of-experts ops on the CUDA backend (see moe.h and kernels/cpu/moe.h). T = tokens, E = experts,
// K = experts per token, N = T*K assignments (rows of the grouped buffers), C = hidden size, IN / OUT = features.
// Decisions a reader must know:
//  - Router: one warp per token, each lane holding up to 16 logits in registers (E <= 512). Softmax as on the CPU
//    (max, expf, sum, divide); top-K by K rounds of a warp argmax whose ties go to the lower expert.
//  - Sort: chunks of 256 * rounds assignments (rounds >= 4, so a chunk holds >= 2E and the chunk histograms fit in
//    order[] whenever there is more than one chunk; with one chunk they live in offsets[]). Within a chunk the
//    scatter takes 256 assignments per round, ranks equal experts inside a warp with __match_any_sync and across
//    the 8 warps through per-warp counts in shared memory: the position of assignment a is its expert's first row
//    + the assignments of that expert before a, so the order is stable and the same on every run.
//  - Grouped GEMM: C = A op B with A rows = the expert's rows (forward: inp x W^T; backward: dout x W) or, for the
//    weight gradient, C[OUT, IN] = dout_e^T x inp_e with the reduction over the expert's rows (A and B then sit
//    k-major in shared memory and go through ldmatrix.trans). Tiles of 128 x 128 x 32, 4 warps of 64 x 64 each
//    (16 mma.sync per k16 step per 8 ldmatrix), 4 cp.async stages (80 KB of shared memory at most, under the
//    99 KB per-block limit of sm_86/89/120), shared rows padded by 16 bytes (ldmatrix free of bank conflicts).
//    blockIdx.x is the column tile (fastest), so the blocks of one row tile run together and read its A rows once.
//    A warp's 16-row / 16-column slabs outside the tile's valid rows / columns are skipped, which keeps an
//    expert's short last tile and the LoRA shapes (R columns) cheap; out-of-range loads are zero-filled.
#include "kernels/cuda/moe.h"
#include "kernels/cuda/expert_gemm.h"
#include "kernels/cuda/expert_widen.h"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/vec.cuh"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tandem::cuda {

namespace {

constexpr int kMaxExperts = 512;
constexpr unsigned kFull = 0xffffffffu;
constexpr int64_t kMaxBlocks = 1 << 16;

// ---------------------------------------------------------------------------------------------------------
// Warp-level building blocks

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
    for (int d = 16; d > 0; d /= 2) x += __shfl_xor_sync(kFull, x, d);
    return x;
}
__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
    for (int d = 16; d > 0; d /= 2) x = fmaxf(x, __shfl_xor_sync(kFull, x, d));
    return x;
}

// smem_addr, cp_async*, ldsm_x4*, mma_16816: kernels/cuda/mma.cuh.

// ---------------------------------------------------------------------------------------------------------
// Router

constexpr int kRouterWarps = 8;               // tokens per block
constexpr int kRouterPer = kMaxExperts / 32;  // logits per lane

__global__ void __launch_bounds__(kRouterWarps * 32)
    router_forward_kernel(int32_t* __restrict__ idx, float* __restrict__ w, float* __restrict__ probs,
                          const bf16* __restrict__ logits, int T, int E, int K, bool renorm, bool given) {
    const int t = static_cast<int>(blockIdx.x) * kRouterWarps + static_cast<int>(threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (t >= T) return;  // the whole warp
    const bf16* row = logits + static_cast<int64_t>(t) * E;
    float v[kRouterPer];
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < kRouterPer; i++) {
        const int e = i * 32 + lane;
        v[i] = e < E ? __bfloat162float(row[e]) : -INFINITY;
        mx = fmaxf(mx, v[i]);
    }
    mx = warp_max(mx);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kRouterPer; i++) {
        v[i] = i * 32 + lane < E ? expf(v[i] - mx) : 0.0f;
        sum += v[i];
    }
    sum = warp_sum(sum);
    float* prow = probs + static_cast<int64_t>(t) * E;
#pragma unroll
    for (int i = 0; i < kRouterPer; i++) {
        const int e = i * 32 + lane;
        if (e < E) {
            v[i] = v[i] / sum;
            prow[e] = v[i];
        } else {
            v[i] = -1.0f;  // below every probability: never chosen
        }
    }
    // K rounds of argmax; a chosen expert's value becomes -1. Ties: the lower expert (a lane scans its experts
    // in increasing order and keeps the first maximum; the butterfly prefers the lower index on equal values).
    float chosen_sum = 0.0f;
    int32_t* irow = idx + static_cast<int64_t>(t) * K;
    float* wrow = w + static_cast<int64_t>(t) * K;
    for (int j = 0; j < K; j++) {
        float bv = -1.0f;
        int bi = E;
        if (given) {  // the choice is injected: only its probability (held by lane bi % 32)
            bi = irow[j];
            float mine = -1.0f;
#pragma unroll
            for (int i = 0; i < kRouterPer; i++)
                if (i * 32 + lane == bi) mine = v[i];
            bv = __shfl_sync(kFull, mine, bi % 32);
            if (lane == 0) wrow[j] = bv;
            chosen_sum += bv;
            continue;
        }
#pragma unroll
        for (int i = 0; i < kRouterPer; i++)
            if (v[i] > bv) bv = v[i], bi = i * 32 + lane;
#pragma unroll
        for (int d = 16; d > 0; d /= 2) {
            const float ov = __shfl_xor_sync(kFull, bv, d);
            const int oi = __shfl_xor_sync(kFull, bi, d);
            if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
        }
#pragma unroll
        for (int i = 0; i < kRouterPer; i++)
            if (i * 32 + lane == bi) v[i] = -1.0f;
        if (lane == 0) {
            irow[j] = bi;
            wrow[j] = bv;
        }
        chosen_sum += bv;
    }
    if (renorm && lane == 0)
        for (int j = 0; j < K; j++) wrow[j] = wrow[j] / chosen_sum;
}

// dp_m (chosen m) = renorm ? (dw_m - sum_j dw_j w_j) / S : dw_m with S = the chosen probabilities' sum;
// dlogits_e = p_e (dp_e - sum_i dp_i p_i).
__global__ void __launch_bounds__(kRouterWarps * 32)
    router_backward_kernel(bf16* __restrict__ dlogits, const float* __restrict__ dw, const float* __restrict__ probs,
                           const int32_t* __restrict__ idx, const float* __restrict__ w, int T, int E, int K,
                           bool renorm, const float* __restrict__ dense, const int32_t* __restrict__ real_rows) {
    const int t = static_cast<int>(blockIdx.x) * kRouterWarps + static_cast<int>(threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (t >= T) return;
    const float* prow = probs + static_cast<int64_t>(t) * E;
    const int32_t* irow = idx + static_cast<int64_t>(t) * K;
    const float* dwrow = dw + static_cast<int64_t>(t) * K;
    const float* wrow = w + static_cast<int64_t>(t) * K;
    float S = 0.0f, dot = 0.0f;
    for (int j = lane; j < K; j += 32) {
        S += prow[irow[j]];
        dot += dwrow[j] * wrow[j];
    }
    S = warp_sum(S);
    dot = warp_sum(dot);
    auto dp_of = [&](int j) { return renorm ? (dwrow[j] - dot) / S : dwrow[j]; };
    const bool with_dense = dense && t < *real_rows;  // the load-balancing loss: every probability of a real row
    float c = 0.0f;
    for (int j = lane; j < K; j += 32) c += dp_of(j) * prow[irow[j]];
    if (with_dense)
        for (int e = lane; e < E; e += 32) c += dense[e] * prow[e];
    c = warp_sum(c);
    bf16* drow = dlogits + static_cast<int64_t>(t) * E;
    for (int e = lane; e < E; e += 32) {
        float dp = with_dense ? dense[e] : 0.0f;
        for (int j = 0; j < K; j++)
            if (irow[j] == e) dp += dp_of(j);
        drow[e] = __float2bfloat16_rn(prow[e] * (dp - c));
    }
}

// Load-balancing loss: block e sums probs[t, e] and the choices of e over the real rows, in a fixed order.
constexpr int kAuxThreads = 256;
__global__ void __launch_bounds__(kAuxThreads)
    aux_stats_kernel(float* __restrict__ stats, const float* __restrict__ probs, const int32_t* __restrict__ idx,
                     const int32_t* __restrict__ real_rows, int T, int E, int K, bool first) {
    __shared__ float ssum[kAuxThreads], scnt[kAuxThreads];
    const int e = blockIdx.x;
    const int real = min(*real_rows, T);
    float sum = 0.0f, cnt = 0.0f;
    for (int t = threadIdx.x; t < real; t += kAuxThreads) {
        sum += probs[static_cast<int64_t>(t) * E + e];
        for (int j = 0; j < K; j++) cnt += idx[static_cast<int64_t>(t) * K + j] == e ? 1.0f : 0.0f;
    }
    ssum[threadIdx.x] = sum;
    scnt[threadIdx.x] = cnt;
    __syncthreads();
    for (int h = kAuxThreads / 2; h > 0; h /= 2) {
        if (static_cast<int>(threadIdx.x) < h) {
            ssum[threadIdx.x] += ssum[threadIdx.x + h];
            scnt[threadIdx.x] += scnt[threadIdx.x + h];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        stats[e] = ssum[0] + (first ? 0.0f : stats[e]);
        stats[E + e] = scnt[0] + (first ? 0.0f : stats[E + e]);
    }
}

__global__ void __launch_bounds__(kMaxExperts)
    aux_loss_kernel(float* __restrict__ dense, double* __restrict__ loss_sum, const float* __restrict__ stats,
                    const int32_t* __restrict__ real_rows, const float* __restrict__ label_count,
                    const float* __restrict__ grad_scale, int E, int layers, float coef, bool step) {
    __shared__ double part[kMaxExperts];
    const int e = threadIdx.x;
    const double rows = double(layers) * double(*real_rows);
    double fp = 0.0;
    if (e < E) {
        const double f = rows > 0 ? stats[E + e] / rows : 0.0, P = rows > 0 ? stats[e] / rows : 0.0;
        fp = f * P;
        dense[e] = rows > 0 ? float(double(coef) * E * f / rows * double(*label_count) * double(*grad_scale)) : 0.0f;
    }
    part[e] = fp;
    __syncthreads();
    for (int h = kMaxExperts / 2; h > 0; h /= 2) {
        if (e < h) part[e] += part[e + h];
        __syncthreads();
    }
    if (e == 0) {
        loss_sum[0] += double(coef) * E * part[0] * double(*label_count);
        if (step) loss_sum[1] += loss_sum[0];
    }
}

// ---------------------------------------------------------------------------------------------------------
// Sort + count

constexpr int kSortThreads = 256;
constexpr int kSortWarps = kSortThreads / 32;
constexpr int kSortTargetChunks = 128;
constexpr int kScanThreads = kMaxExperts;

// hist[chunk][e] = the assignments of expert e in the chunk.
__global__ void __launch_bounds__(kSortThreads)
    sort_histogram_kernel(int32_t* hist, const int32_t* __restrict__ idx, int N, int E, int chunk) {
    __shared__ int cnt[kMaxExperts];
    for (int e = threadIdx.x; e < E; e += kSortThreads) cnt[e] = 0;
    __syncthreads();
    const int64_t a0 = static_cast<int64_t>(blockIdx.x) * chunk;
    const int64_t a_end = a0 + chunk < N ? a0 + chunk : N;
    for (int64_t a = a0 + threadIdx.x; a < a_end; a += kSortThreads) {
        const int e = idx[a];
        if (static_cast<unsigned>(e) < static_cast<unsigned>(E)) atomicAdd(&cnt[e], 1);  // a count: order-free
    }
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += kSortThreads) hist[static_cast<int64_t>(blockIdx.x) * E + e] = cnt[e];
}

// One block, thread e = expert e: hist[c][e] becomes expert e's first row for chunk c (offsets[e] + the
// assignments of e in earlier chunks); offsets[e] = the assignments of lower experts, offsets[E] = their total.
// hist may be offsets itself (one chunk): thread e then writes the same value twice.
__global__ void __launch_bounds__(kScanThreads) sort_scan_kernel(int32_t* hist, int32_t* offsets, int nchunks, int E) {
    __shared__ int warp_total[kScanThreads / 32];
    const int e = threadIdx.x, lane = e % 32, warp = e / 32;
    int total = 0;
    if (e < E) {
        for (int c0 = 0; c0 < nchunks; c0 += 8) {  // 8 loads in flight, then the running sum
            int v[8];
#pragma unroll
            for (int i = 0; i < 8; i++) v[i] = c0 + i < nchunks ? hist[static_cast<int64_t>(c0 + i) * E + e] : 0;
#pragma unroll
            for (int i = 0; i < 8; i++)
                if (c0 + i < nchunks) {
                    hist[static_cast<int64_t>(c0 + i) * E + e] = total;
                    total += v[i];
                }
        }
    }
    int incl = total;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
        const int y = __shfl_up_sync(kFull, incl, d);
        if (lane >= d) incl += y;
    }
    if (lane == 31) warp_total[warp] = incl;
    __syncthreads();
    int before = 0;
    for (int i = 0; i < warp; i++) before += warp_total[i];
    const int excl = before + incl - total;
    if (e < E) {
        for (int c = 0; c < nchunks; c++) hist[static_cast<int64_t>(c) * E + e] += excl;
        offsets[e] = excl;
        if (e == E - 1) offsets[E] = excl + total;
    }
}

// inv[a] for the assignments of one chunk, in rounds of kSortThreads (see the file comment).
__global__ void __launch_bounds__(kSortThreads)
    sort_scatter_kernel(int32_t* __restrict__ inv, const int32_t* first, const int32_t* __restrict__ idx, int N, int E,
                        int chunk) {
    __shared__ int next[kMaxExperts];                // expert e's next row
    __shared__ int wcount[kSortWarps][kMaxExperts];  // this round: expert e's assignments in warp w
    for (int e = threadIdx.x; e < E; e += kSortThreads) {
        next[e] = first[static_cast<int64_t>(blockIdx.x) * E + e];
#pragma unroll
        for (int w = 0; w < kSortWarps; w++) wcount[w][e] = 0;
    }
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t a0 = static_cast<int64_t>(blockIdx.x) * chunk;
    const int64_t a_end = a0 + chunk < N ? a0 + chunk : N;
    for (int64_t base = a0; base < a_end; base += kSortThreads) {
        const int64_t a = base + threadIdx.x;
        const int e = a < a_end ? idx[a] : -1;
        const bool ok = static_cast<unsigned>(e) < static_cast<unsigned>(E);
        const unsigned peers = __match_any_sync(kFull, e);
        const int rank = __popc(peers & ((1u << lane) - 1u));  // equal experts in lower lanes
        const bool leader = ok && rank == 0;
        if (leader) wcount[warp][e] = __popc(peers);
        __syncthreads();
        if (ok) {
            int pos = next[e] + rank;
            for (int w = 0; w < warp; w++) pos += wcount[w][e];
            inv[a] = pos;
        }
        __syncthreads();  // every thread has read next[] and wcount[]
        if (leader) {
            atomicAdd(&next[e], __popc(peers));  // a sum: order-free
            wcount[warp][e] = 0;
        }
        __syncwarp();  // the reset is visible to the warp's next leaders; next[] at the next round's barrier
    }
}

// order[inv[a]] = a.
__global__ void sort_order_kernel(int32_t* __restrict__ order, const int32_t* __restrict__ inv,
                                  const int32_t* __restrict__ idx, int N, int E) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t a = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; a < N; a += stride)
        if (static_cast<unsigned>(idx[a]) < static_cast<unsigned>(E)) order[inv[a]] = static_cast<int32_t>(a);
}

// ---------------------------------------------------------------------------------------------------------
// Permute / unpermute: one warp per output row, W elements per access (8: 16 bytes; 1: any C / alignment).

constexpr int kRowWarps = 8;

__device__ __forceinline__ int64_t warp_row() {
    return static_cast<int64_t>(blockIdx.x) * kRowWarps + threadIdx.x / 32;
}
__device__ __forceinline__ int64_t row_stride() {
    return static_cast<int64_t>(gridDim.x) * kRowWarps;
}

// One warp per token: its row is read once and stored to its K rows (the K stores in flight together; a
// gather by order[] reads each token K times and keeps one load per warp in flight: 4-5x slower).
template <int W>
__global__ void __launch_bounds__(kRowWarps * 32)
    permute_kernel(bf16* __restrict__ xs, const bf16* __restrict__ x, const int32_t* __restrict__ inv, int T, int K,
                   int C) {
    const int lane = threadIdx.x % 32;
    for (int64_t t = warp_row(); t < T; t += row_stride()) {
        const int32_t* irow = inv + t * K;
        for (int c = lane * W; c < C; c += 32 * W) {
            const Pack<bf16, W> v = load_pack<W>(x + t * C + c);
            for (int j = 0; j < K; j++) store_pack<W>(xs + static_cast<int64_t>(irow[j]) * C + c, v);
        }
    }
}

template <int W>
__global__ void __launch_bounds__(kRowWarps * 32)
    permute_backward_kernel(bf16* __restrict__ dx, const bf16* __restrict__ dxs, const int32_t* __restrict__ inv, int T,
                            int K, int C) {
    const int lane = threadIdx.x % 32;
    for (int64_t t = warp_row(); t < T; t += row_stride()) {
        const int32_t* irow = inv + t * K;
        for (int c = lane * W; c < C; c += 32 * W) {
            float acc[W] = {};
            for (int j = 0; j < K; j++) {
                const Pack<bf16, W> v = load_pack<W>(dxs + static_cast<int64_t>(irow[j]) * C + c);
#pragma unroll
                for (int q = 0; q < W; q++) acc[q] += __bfloat162float(v.v[q]);
            }
            Pack<bf16, W> d = load_pack<W>(dx + t * C + c);
#pragma unroll
            for (int q = 0; q < W; q++) d.v[q] = __float2bfloat16_rn(__bfloat162float(d.v[q]) + acc[q]);
            store_pack<W>(dx + t * C + c, d);
        }
    }
}

template <int W>
__global__ void __launch_bounds__(kRowWarps * 32)
    unpermute_kernel(bf16* __restrict__ out, const bf16* __restrict__ ys, const float* __restrict__ w,
                     const int32_t* __restrict__ inv, int T, int K, int C) {
    const int lane = threadIdx.x % 32;
    for (int64_t t = warp_row(); t < T; t += row_stride()) {
        const int32_t* irow = inv + t * K;
        const float* wrow = w + t * K;
        for (int c = lane * W; c < C; c += 32 * W) {
            float acc[W] = {};
            for (int j = 0; j < K; j++) {
                const float wj = wrow[j];
                const Pack<bf16, W> v = load_pack<W>(ys + static_cast<int64_t>(irow[j]) * C + c);
#pragma unroll
                for (int q = 0; q < W; q++) acc[q] += wj * __bfloat162float(v.v[q]);
            }
            Pack<bf16, W> o;
#pragma unroll
            for (int q = 0; q < W; q++) o.v[q] = __float2bfloat16_rn(acc[q]);
            store_pack<W>(out + t * C + c, o);
        }
    }
}

template <int W>
__global__ void __launch_bounds__(kRowWarps * 32)
    unpermute_backward_kernel(bf16* __restrict__ dys, float* __restrict__ dw, const bf16* __restrict__ dout,
                              const bf16* __restrict__ ys, const float* __restrict__ w, const int32_t* __restrict__ inv,
                              int T, int K, int C) {
    const int lane = threadIdx.x % 32;
    for (int64_t t = warp_row(); t < T; t += row_stride()) {
        for (int j = 0; j < K; j++) {
            const int64_t r = inv[t * K + j];
            const float wj = w[t * K + j];
            float dot = 0.0f;
            for (int c = lane * W; c < C; c += 32 * W) {
                const Pack<bf16, W> d = load_pack<W>(dout + t * C + c), y = load_pack<W>(ys + r * C + c);
                Pack<bf16, W> o;
#pragma unroll
                for (int q = 0; q < W; q++) {
                    const float df = __bfloat162float(d.v[q]);
                    o.v[q] = __float2bfloat16_rn(wj * df);
                    dot += df * __bfloat162float(y.v[q]);
                }
                store_pack<W>(dys + r * C + c, o);
            }
            dot = warp_sum(dot);
            if (lane == 0) dw[t * K + j] = dot;
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Grouped GEMM

enum class Op { Forward, Backward, WeightGrad };

constexpr int kBM = 128, kBN = 256, kBK = 32, kStages = 3;
constexpr int kGemmWarps = 8, kGemmThreads = kGemmWarps * 32;
constexpr int kWM = 64, kWN = 64;  // warp tile: 2 x 4 warps
constexpr int kRM = kWM / 16, kNP = kWN / 16, kN8 = kWN / 8;
constexpr int kPad = 8;              // 16 bytes per shared row
constexpr int kLdRow = kBK + kPad;   // [rows][k] tile
constexpr int kLdKA = kBM + kPad;    // [k][rows] A tile
constexpr int kLdKB = kBN + kPad;    // [k][cols] B tile
constexpr int kLdC = kBN + 4;        // the epilogue's fp32 staging rows (half a tile: kBM / 2 rows)
static_assert(kBM == 2 * kWM && kBN == 4 * kWN && kGemmWarps == 8);

template <Op G>
struct GemmCfg {
    static constexpr bool kATrans = G == Op::WeightGrad;  // A tile stored [k][m]
    static constexpr bool kBTrans = G != Op::Forward;     // B tile stored [k][n]
    static constexpr int kAStage = kATrans ? kBK * kLdKA : kBM * kLdRow;
    static constexpr int kBStage = kBTrans ? kBK * kLdKB : kBN * kLdRow;
    static constexpr size_t pipe = sizeof(bf16) * size_t(kStages) * (kAStage + kBStage);
    static constexpr size_t staging = G == Op::WeightGrad ? 0 : sizeof(float) * size_t(kBM / 2) * kLdC;
    static constexpr size_t smem = pipe > staging ? pipe : staging;
};
static_assert(GemmCfg<Op::Forward>::smem <= 99 * 1024 && GemmCfg<Op::Backward>::smem <= 99 * 1024 &&
              GemmCfg<Op::WeightGrad>::smem <= 99 * 1024);

struct GemmArgs {
    void* out;      // bf16 out / dinp [N, cols]; fp32 dW (dw + e * out_stride) for the weight gradient
    const bf16* a;  // inp (forward) or dout
    const bf16* b;  // W (forward, backward; + e * b_stride) or inp (weight gradient)
    int64_t b_stride, out_stride;
    const bf16* bias;  // forward only; may be nullptr
    int64_t bias_stride;
    const int32_t* offsets;  // [E+1], device
    const int32_t* starts;   // [E], device, or nullptr: expert e's rows start at starts[e] instead of offsets[e]
                             // (forward / backward after the batched head, kernels/cuda/expert_gemm.h)
    int E, IN, OUT;
    float alpha;
    bool accumulate;  // forward only (backward and the weight gradient always add)
};

// Rows [r0, r0+ROWS) x columns [c0, c0+COLS) of a row-major bf16 matrix (row stride ld) into shared memory (row
// stride lds); rows >= r_end and columns >= c_end are zero-filled. VEC: 16-byte cp.async (c_end, ld and the
// pointer multiples of 8 elements); otherwise plain element loads (any shape), stored 16 bytes at a time.
template <int ROWS, int COLS, bool VEC>
__device__ __forceinline__ void load_tile(bf16* s, int lds, const bf16* g, int64_t ld, int r0, int r_end, int c0,
                                          int c_end) {
    constexpr int kChunksPerRow = COLS / 8, kChunks = ROWS * kChunksPerRow;
    static_assert(kChunks % kGemmThreads == 0);
#pragma unroll
    for (int i = 0; i < kChunks / kGemmThreads; i++) {
        const int c = i * kGemmThreads + static_cast<int>(threadIdx.x);
        const int r = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
        const int gr = r0 + r, gc = c0 + col;
        bf16* dst = s + r * lds + col;
        if constexpr (VEC) {
            const bool ok = gr < r_end && gc < c_end;
            cp_async16(dst, ok ? g + static_cast<int64_t>(gr) * ld + gc : g, ok);
        } else {
            Pack<bf16, 8> v;
#pragma unroll
            for (int q = 0; q < 8; q++)
                v.v[q] = gr < r_end && gc + q < c_end ? g[static_cast<int64_t>(gr) * ld + gc + q]
                                                      : __float2bfloat16_rn(0.0f);
            store_pack<8>(dst, v);
        }
    }
}

// acc[kRM*16 x kN8*8] += A tile x B tile over one stage (kBK). FULL: every slab of the warp is inside the tile;
// otherwise only the first rm 16-row slabs and np 16-column slabs.
template <bool AT, bool BT, bool FULL>
__device__ __forceinline__ void mma_stage(float (&acc)[kRM][kN8][4], const bf16* sA, const bf16* sB, int wm0, int wn0,
                                          int rm, int np_n) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int kc = 0; kc < kBK / 16; kc++) {
        uint32_t a[kRM][4];
#pragma unroll
        for (int r = 0; r < kRM; r++) {
            if (FULL || r < rm) {
                if constexpr (AT)
                    ldsm_x4_trans(
                        a[r], sA + (kc * 16 + lane % 8 + (lane / 16) * 8) * kLdKA + wm0 + r * 16 + ((lane / 8) % 2) * 8);
                else
                    ldsm_x4(a[r], sA + (wm0 + r * 16 + lane % 16) * kLdRow + kc * 16 + (lane / 16) * 8);
            }
        }
#pragma unroll
        for (int np = 0; np < kNP; np++) {
            if (FULL || np < np_n) {
                uint32_t b[4];
                if constexpr (BT)
                    ldsm_x4_trans(
                        b, sB + (kc * 16 + lane % 8 + ((lane / 8) % 2) * 8) * kLdKB + wn0 + np * 16 + (lane / 16) * 8);
                else
                    ldsm_x4(
                        b, sB + (wn0 + np * 16 + lane % 8 + (lane / 16) * 8) * kLdRow + kc * 16 + ((lane / 8) % 2) * 8);
#pragma unroll
                for (int r = 0; r < kRM; r++) {
                    if (FULL || r < rm) {
                        mma_16816(acc[r][2 * np], a[r], b[0], b[1]);
                        mma_16816(acc[r][2 * np + 1], a[r], b[2], b[3]);
                    }
                }
            }
        }
    }
}

// Warp 0: the expert and row tile of row tile number `target`, counting each expert's ceil(rows / kBM) tiles in
// expert order: info = {e, first row, end row}, or e = -1 past the last tile. The loops unroll fully (no early
// exit), so the per-lane tile counts stay in registers and all their loads are in flight at once.
__device__ __forceinline__ void find_row_tile(int* info, const int32_t* __restrict__ offsets,
                                              const int32_t* __restrict__ starts, int E, int target) {
    const int lane = threadIdx.x % 32;
    int tiles[kMaxExperts / 32];
#pragma unroll
    for (int i = 0; i < kMaxExperts / 32; i++) {
        const int e = i * 32 + lane;
        tiles[i] = e < E ? max(0, offsets[e + 1] - (starts ? starts[e] : offsets[e]) + kBM - 1) / kBM : 0;
    }
    int before = 0;  // tiles of the experts below i * 32
    bool found = false;
#pragma unroll
    for (int i = 0; i < kMaxExperts / 32; i++) {
        if (i * 32 < E && !found) {  // warp-uniform
            int incl = tiles[i];
#pragma unroll
            for (int d = 1; d < 32; d *= 2) {
                const int y = __shfl_up_sync(kFull, incl, d);
                if (lane >= d) incl += y;
            }
            const unsigned hit = __ballot_sync(kFull, before + incl > target);
            if (hit) {
                found = true;
                if (lane == __ffs(hit) - 1) {
                    const int e = i * 32 + lane;
                    const int tile = target - (before + incl - tiles[i]);
                    info[0] = e;
                    info[1] = (starts ? starts[e] : offsets[e]) + tile * kBM;
                    info[2] = offsets[e + 1];
                }
            }
            before += __shfl_sync(kFull, incl, 31);
        }
    }
    if (!found && lane == 0) info[0] = -1;
}

// One block per (column tile, row tile[, expert]); see the file comment.
template <Op G, bool VEC>
__global__ void __launch_bounds__(kGemmThreads, 1) grouped_gemm_kernel(GemmArgs p) {
    using Cfg = GemmCfg<G>;
    constexpr bool AT = Cfg::kATrans, BT = Cfg::kBTrans;
    extern __shared__ __align__(16) unsigned char smem[];
    bf16* sA = reinterpret_cast<bf16*>(smem);
    bf16* sB = sA + kStages * Cfg::kAStage;

    const int n0 = static_cast<int>(blockIdx.x) * kBN;
    int e, m0, m_end, k_begin, k_end, ncols;
    const bf16* A = p.a;
    const bf16* B = p.b;
    int64_t lda, ldb;
    if constexpr (G == Op::WeightGrad) {
        e = blockIdx.z;
        k_begin = p.offsets[e];
        k_end = p.offsets[e + 1];
        if (k_begin >= k_end) return;  // no rows: dW_e stays
        m0 = static_cast<int>(blockIdx.y) * kBM;
        m_end = p.OUT;
        ncols = p.IN;
        lda = p.OUT;
        ldb = p.IN;
    } else {
        __shared__ int info[3];
        if (threadIdx.x < 32) find_row_tile(info, p.offsets, p.starts, p.E, static_cast<int>(blockIdx.y));
        __syncthreads();
        e = info[0];
        if (e < 0) return;
        m0 = info[1];
        m_end = info[2];
        k_begin = 0;
        k_end = G == Op::Forward ? p.IN : p.OUT;
        ncols = G == Op::Forward ? p.OUT : p.IN;
        lda = G == Op::Forward ? p.IN : p.OUT;
        ldb = p.IN;
        B += static_cast<int64_t>(e) * p.b_stride;
    }

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm0 = (warp / 4) * kWM, wn0 = (warp % 4) * kWN;
    const int rm = min(kRM, max(0, (m_end - m0 - wm0 + 15) / 16));
    const int np_n = min(kNP, max(0, (ncols - n0 - wn0 + 15) / 16));
    const bool full = rm == kRM && np_n == kNP, active = rm > 0 && np_n > 0;

    auto load_stage = [&](int stage, int kt) {
        const int k0 = k_begin + kt * kBK;
        bf16* a_s = sA + stage * Cfg::kAStage;
        bf16* b_s = sB + stage * Cfg::kBStage;
        if constexpr (AT)
            load_tile<kBK, kBM, VEC>(a_s, kLdKA, A, lda, k0, k_end, m0, m_end);
        else
            load_tile<kBM, kBK, VEC>(a_s, kLdRow, A, lda, m0, m_end, k0, k_end);
        if constexpr (BT)
            load_tile<kBK, kBN, VEC>(b_s, kLdKB, B, ldb, k0, k_end, n0, ncols);
        else
            load_tile<kBN, kBK, VEC>(b_s, kLdRow, B, ldb, n0, ncols, k0, k_end);
    };

    float acc[kRM][kN8][4] = {};
    const int ktiles = (k_end - k_begin + kBK - 1) / kBK;
#pragma unroll
    for (int s = 0; s < kStages - 1; s++) {
        if (s < ktiles) load_stage(s, s);
        cp_async_commit();
    }
    for (int kt = 0; kt < ktiles; kt++) {
        cp_async_wait<kStages - 2>();
        __syncthreads();  // stage kt is visible; every warp is done with the stage the next load overwrites
        const int next = kt + kStages - 1;
        if (next < ktiles) load_stage(next % kStages, next);
        cp_async_commit();
        const bf16* a_s = sA + (kt % kStages) * Cfg::kAStage;
        const bf16* b_s = sB + (kt % kStages) * Cfg::kBStage;
        if (full)
            mma_stage<AT, BT, true>(acc, a_s, b_s, wm0, wn0, rm, np_n);
        else if (active)
            mma_stage<AT, BT, false>(acc, a_s, b_s, wm0, wn0, rm, np_n);
    }
    cp_async_wait<0>();

    // Epilogue: acc[r][n][i] sits at row wm0 + r*16 + lane/4 + 8*(i/2), column wn0 + n*8 + 2*(lane%4) + i%2.
    const float alpha = p.alpha;
    if constexpr (G == Op::WeightGrad) {
        if (!active) return;
#pragma unroll
        for (int r = 0; r < kRM; r++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int row = m0 + wm0 + r * 16 + lane / 4 + h * 8;
                if (row >= m_end) continue;
#pragma unroll
                for (int n = 0; n < kN8; n++) {
                    const int col = n0 + wn0 + n * 8 + (lane % 4) * 2;
                    if (col >= ncols) continue;
                    float* o = static_cast<float*>(p.out) + static_cast<int64_t>(e) * p.out_stride +
                               static_cast<int64_t>(row) * ncols + col;
                    o[0] += alpha * acc[r][n][2 * h];
                    if (col + 1 < ncols) o[1] += alpha * acc[r][n][2 * h + 1];
                }
            }
    } else {
        // bf16 out / dinp, through shared memory half a tile (kBM / 2 rows) at a time, so every global access
        // is 16 contiguous bytes per thread and the old values (backward, accumulate) are all loaded before
        // any of them is needed: fp32 acc * alpha + bias (+ the old value), rounded once.
        __syncthreads();  // every warp is done with the pipeline's shared memory
        float* stile = reinterpret_cast<float*>(smem);
        const bool add = G == Op::Backward || p.accumulate;
        const bf16* bias = G == Op::Forward && p.bias ? p.bias + static_cast<int64_t>(e) * p.bias_stride : nullptr;
#pragma unroll
        for (int half = 0; half < 2; half++) {
            if (wm0 / (kBM / 2) == half) {
#pragma unroll
                for (int r = 0; r < kRM; r++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int lrow = wm0 % (kBM / 2) + r * 16 + lane / 4 + h * 8;
#pragma unroll
                        for (int n = 0; n < kN8; n++) {
                            const int col = wn0 + n * 8 + (lane % 4) * 2;
                            *reinterpret_cast<float2*>(stile + lrow * kLdC + col) =
                                make_float2(alpha * acc[r][n][2 * h], alpha * acc[r][n][2 * h + 1]);
                        }
                    }
            }
            __syncthreads();
            constexpr int kChunksPerRow = kBN / 8, kChunks = (kBM / 2) * kChunksPerRow;
            static_assert(kChunks % kGemmThreads == 0);
            constexpr int kPer = kChunks / kGemmThreads;
            Pack<bf16, 8> old[kPer];
            if (VEC && add) {  // all the old values in flight at once
#pragma unroll
                for (int i = 0; i < kPer; i++) {
                    const int c = i * kGemmThreads + static_cast<int>(threadIdx.x);
                    const int row = m0 + half * (kBM / 2) + c / kChunksPerRow, col = n0 + (c % kChunksPerRow) * 8;
                    if (row < m_end && col < ncols)
                        old[i] = load_pack<8>(static_cast<const bf16*>(p.out) + static_cast<int64_t>(row) * ncols + col);
                }
            }
#pragma unroll
            for (int i = 0; i < kPer; i++) {
                const int c = i * kGemmThreads + static_cast<int>(threadIdx.x);
                const int lrow = c / kChunksPerRow, lcol = (c % kChunksPerRow) * 8;
                const int row = m0 + half * (kBM / 2) + lrow, col = n0 + lcol;
                if (row >= m_end || col >= ncols) continue;
                const float* src = stile + lrow * kLdC + lcol;
                bf16* o = static_cast<bf16*>(p.out) + static_cast<int64_t>(row) * ncols + col;
                if constexpr (VEC) {  // ncols % 8 == 0: the 8 columns exist
                    Pack<bf16, 8> y;
#pragma unroll
                    for (int q = 0; q < 8; q++) {
                        float v = src[q] + (bias ? __bfloat162float(bias[col + q]) : 0.0f);
                        if (add) v += __bfloat162float(old[i].v[q]);
                        y.v[q] = __float2bfloat16_rn(v);
                    }
                    store_pack<8>(o, y);
                } else {
                    for (int q = 0; q < 8 && col + q < ncols; q++) {
                        float v = src[q] + (bias ? __bfloat162float(bias[col + q]) : 0.0f);
                        if (add) v += __bfloat162float(o[q]);
                        o[q] = __float2bfloat16_rn(v);
                    }
                }
            }
            __syncthreads();  // the staging rows are rewritten by the next half
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// kernel launchers

unsigned row_grid(int64_t rows) {
    return static_cast<unsigned>(std::clamp<int64_t>((rows + kRowWarps - 1) / kRowWarps, 1, kMaxBlocks));
}

template <Op G, bool VEC>
void gemm_launch(const GemmArgs& a, dim3 grid) {
    auto kernel = grouped_gemm_kernel<G, VEC>;
    allow_dynamic_smem(reinterpret_cast<const void*>(kernel), GemmCfg<G>::smem);
    kernel<<<grid, kGemmThreads, GemmCfg<G>::smem, context().stream>>>(a);
    TANDEM_CUDA_LAUNCH_CHECK();
}

template <Op G>
void gemm_dispatch(const GemmArgs& a, dim3 grid, bool vec) {
    if (vec)
        gemm_launch<G, true>(a, grid);
    else
        gemm_launch<G, false>(a, grid);
}

void check_grouped(const int32_t* offsets, int N, int IN, int OUT, int E) {
    TANDEM_KCHECK_PTR(offsets);
    TANDEM_KCHECK(N > 0 && IN > 0 && OUT > 0);
    TANDEM_KCHECK(E > 0 && E <= kMaxExperts);
}

// Row tiles of the forward / backward grid: an upper bound of sum over e of ceil(rows_e / kBM).
unsigned row_tiles(int N, int E) {
    const int64_t tiles = (int64_t(N) + kBM - 1) / kBM + E;
    TANDEM_KCHECK(tiles <= 65535);  // grid y
    return static_cast<unsigned>(tiles);
}

unsigned col_tiles(int n) {
    return static_cast<unsigned>((n + kBN - 1) / kBN);
}

}  // namespace

void moe_router_forward(int32_t* idx, float* w, float* probs, const bf16* logits, int T, int E, int K, bool renorm,
                        bool given) {
    TANDEM_KCHECK_PTR(idx);
    TANDEM_KCHECK_PTR(w);
    TANDEM_KCHECK_PTR(probs);
    TANDEM_KCHECK_PTR(logits);
    TANDEM_KCHECK(T > 0 && E > 0 && E <= kMaxExperts && K > 0 && K <= E);
    router_forward_kernel<<<grid_for(T, kRouterWarps), kRouterWarps * 32, 0, context().stream>>>(idx, w, probs, logits,
                                                                                                 T, E, K, renorm, given);
    TANDEM_CUDA_LAUNCH_CHECK();
}

void moe_router_backward(bf16* dlogits, const float* dw, const float* probs, const int32_t* idx, const float* w, int T,
                         int E, int K, bool renorm, const float* dense, const int32_t* real_rows) {
    TANDEM_KCHECK_PTR(dlogits);
    TANDEM_KCHECK_PTR(dw);
    TANDEM_KCHECK_PTR(probs);
    TANDEM_KCHECK_PTR(idx);
    TANDEM_KCHECK_PTR(w);
    TANDEM_KCHECK(T > 0 && E > 0 && E <= kMaxExperts && K > 0 && K <= E);
    TANDEM_KCHECK(!dense || real_rows);
    router_backward_kernel<<<grid_for(T, kRouterWarps), kRouterWarps * 32, 0, context().stream>>>(
        dlogits, dw, probs, idx, w, T, E, K, renorm, dense, real_rows);
    TANDEM_CUDA_LAUNCH_CHECK();
}

void moe_aux_stats(float* stats, const float* probs, const int32_t* idx, const int32_t* real_rows, int T, int E, int K,
                   bool first) {
    TANDEM_KCHECK_PTR(stats);
    TANDEM_KCHECK_PTR(probs);
    TANDEM_KCHECK_PTR(idx);
    TANDEM_KCHECK_PTR(real_rows);
    TANDEM_KCHECK(T > 0 && E > 0 && E <= kMaxExperts && K > 0 && K <= E);
    aux_stats_kernel<<<E, kAuxThreads, 0, context().stream>>>(stats, probs, idx, real_rows, T, E, K, first);
    TANDEM_CUDA_LAUNCH_CHECK();
}

void moe_aux_loss(float* dense, double* loss_sum, const float* stats, const int32_t* real_rows, const float* label_count,
                  const float* grad_scale, int E, int layers, float coef, bool step) {
    TANDEM_KCHECK_PTR(dense);
    TANDEM_KCHECK_PTR(loss_sum);
    TANDEM_KCHECK_PTR(stats);
    TANDEM_KCHECK_PTR(real_rows);
    TANDEM_KCHECK_PTR(label_count);
    TANDEM_KCHECK_PTR(grad_scale);
    TANDEM_KCHECK(E > 0 && E <= kMaxExperts && layers > 0);
    aux_loss_kernel<<<1, kMaxExperts, 0, context().stream>>>(dense, loss_sum, stats, real_rows, label_count, grad_scale,
                                                             E, layers, coef, step);
    TANDEM_CUDA_LAUNCH_CHECK();
}

void moe_sort_count(int32_t* order, int32_t* inv, int32_t* offsets, const int32_t* idx, int N, int E) {
    TANDEM_KCHECK_PTR(order);
    TANDEM_KCHECK_PTR(inv);
    TANDEM_KCHECK_PTR(offsets);
    TANDEM_KCHECK_PTR(idx);
    TANDEM_KCHECK(N > 0 && E > 0 && E <= kMaxExperts);
    // chunk >= 4 * 256 >= 2E: with more than one chunk, nchunks * E < 2N / chunk * E <= N fits in order[].
    const int64_t rounds = std::max<int64_t>(
        4, (int64_t(N) + int64_t(kSortThreads) * kSortTargetChunks - 1) / (int64_t(kSortThreads) * kSortTargetChunks));
    const int chunk = static_cast<int>(rounds * kSortThreads);
    const int nchunks = static_cast<int>((int64_t(N) + chunk - 1) / chunk);
    int32_t* hist = nchunks > 1 ? order : offsets;
    const cudaStream_t s = context().stream;
    sort_histogram_kernel<<<nchunks, kSortThreads, 0, s>>>(hist, idx, N, E, chunk);
    TANDEM_CUDA_LAUNCH_CHECK();
    sort_scan_kernel<<<1, kScanThreads, 0, s>>>(hist, offsets, nchunks, E);
    TANDEM_CUDA_LAUNCH_CHECK();
    sort_scatter_kernel<<<nchunks, kSortThreads, 0, s>>>(inv, hist, idx, N, E, chunk);
    TANDEM_CUDA_LAUNCH_CHECK();
    constexpr int kThreads = 256;
    sort_order_kernel<<<static_cast<unsigned>(
                            std::clamp<int64_t>((int64_t(N) + kThreads - 1) / kThreads, 1, kMaxBlocks)),
                        kThreads, 0, s>>>(order, inv, idx, N, E);
    TANDEM_CUDA_LAUNCH_CHECK();
}

void moe_permute(bf16* xs, const bf16* x, const int32_t* inv, int T, int K, int C) {
    TANDEM_KCHECK_PTR(xs);
    TANDEM_KCHECK_PTR(x);
    TANDEM_KCHECK_PTR(inv);
    TANDEM_KCHECK(T > 0 && K > 0 && C > 0);
    const cudaStream_t s = context().stream;
    if (C % 8 == 0 && aligned16(xs) && aligned16(x))
        permute_kernel<8><<<row_grid(T), kRowWarps * 32, 0, s>>>(xs, x, inv, T, K, C);
    else
        permute_kernel<1><<<row_grid(T), kRowWarps * 32, 0, s>>>(xs, x, inv, T, K, C);
    TANDEM_CUDA_LAUNCH_CHECK();
}

void moe_permute_backward(bf16* dx, const bf16* dxs, const int32_t* inv, int T, int K, int C) {
    TANDEM_KCHECK_PTR(dx);
    TANDEM_KCHECK_PTR(dxs);
    TANDEM_KCHECK_PTR(inv);
    TANDEM_KCHECK(T > 0 && K > 0 && C > 0);
    const cudaStream_t s = context().stream;
    if (C % 8 == 0 && aligned16(dx) && aligned16(dxs))
        permute_backward_kernel<8><<<row_grid(T), kRowWarps * 32, 0, s>>>(dx, dxs, inv, T, K, C);
    else
        permute_backward_kernel<1><<<row_grid(T), kRowWarps * 32, 0, s>>>(dx, dxs, inv, T, K, C);
    TANDEM_CUDA_LAUNCH_CHECK();
}

void moe_unpermute(bf16* out, const bf16* ys, const float* w, const int32_t* inv, int T, int K, int C) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(ys);
    TANDEM_KCHECK_PTR(w);
    TANDEM_KCHECK_PTR(inv);
    TANDEM_KCHECK(T > 0 && K > 0 && C > 0);
    const cudaStream_t s = context().stream;
    if (C % 8 == 0 && aligned16(out) && aligned16(ys))
        unpermute_kernel<8><<<row_grid(T), kRowWarps * 32, 0, s>>>(out, ys, w, inv, T, K, C);
    else
        unpermute_kernel<1><<<row_grid(T), kRowWarps * 32, 0, s>>>(out, ys, w, inv, T, K, C);
    TANDEM_CUDA_LAUNCH_CHECK();
}

void moe_unpermute_backward(bf16* dys, float* dw, const bf16* dout, const bf16* ys, const float* w, const int32_t* inv,
                            int T, int K, int C) {
    TANDEM_KCHECK_PTR(dys);
    TANDEM_KCHECK_PTR(dw);
    TANDEM_KCHECK_PTR(dout);
    TANDEM_KCHECK_PTR(ys);
    TANDEM_KCHECK_PTR(w);
    TANDEM_KCHECK_PTR(inv);
    TANDEM_KCHECK(T > 0 && K > 0 && C > 0);
    const cudaStream_t s = context().stream;
    if (C % 8 == 0 && aligned16(dys) && aligned16(dout) && aligned16(ys))
        unpermute_backward_kernel<8><<<row_grid(T), kRowWarps * 32, 0, s>>>(dys, dw, dout, ys, w, inv, T, K, C);
    else
        unpermute_backward_kernel<1><<<row_grid(T), kRowWarps * 32, 0, s>>>(dys, dw, dout, ys, w, inv, T, K, C);
    TANDEM_CUDA_LAUNCH_CHECK();
}

void grouped_matmul_forward(bf16* out, const bf16* inp, const bf16* w, int64_t w_stride, const bf16* bias,
                            int64_t bias_stride, const int32_t* offsets, int N, int IN, int OUT, int E, float alpha,
                            bool accumulate) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(inp);
    TANDEM_KCHECK_PTR(w);
    check_grouped(offsets, N, IN, OUT, E);
    TANDEM_KCHECK(w_stride >= 0 && bias_stride >= 0);
    GemmArgs a{};
    a.out = out;
    a.a = inp;
    a.b = w;
    a.b_stride = w_stride;
    a.bias = bias;
    a.bias_stride = bias_stride;
    a.offsets = offsets;
    a.E = E;
    a.IN = IN;
    a.OUT = OUT;
    a.alpha = alpha;
    a.accumulate = accumulate;
    // A few input columns widened into the output (LoRA B): the widening kernel does every row.
    if (IN <= kWidenMaxK && expert_widen(ExpertWiden::Forward, out, inp, w, w_stride, bias, bias_stride, offsets, N,
                                         IN, OUT, E, alpha, accumulate))
        return;
    const bool vec =
        IN % 8 == 0 && OUT % 8 == 0 && w_stride % 8 == 0 && aligned16(out) && aligned16(inp) && aligned16(w);
    // The experts' rows in whole chunks as batched cuBLASLt GEMMs; the kernel does the rest.
    a.starts = expert_batched_head(ExpertGemm::Forward, out, inp, w, w_stride, offsets, N, IN, OUT, E, alpha, accumulate,
                                   bias, bias_stride);
    gemm_dispatch<Op::Forward>(a, dim3(col_tiles(OUT), row_tiles(N, E)), vec);
}

void grouped_matmul_backward(bf16* dinp, const bf16* dout, const bf16* w, int64_t w_stride, const int32_t* offsets,
                             int N, int IN, int OUT, int E, float alpha) {
    TANDEM_KCHECK_PTR(dinp);
    TANDEM_KCHECK_PTR(dout);
    TANDEM_KCHECK_PTR(w);
    check_grouped(offsets, N, IN, OUT, E);
    TANDEM_KCHECK(w_stride >= 0);
    GemmArgs a{};
    a.out = dinp;
    a.a = dout;
    a.b = w;
    a.b_stride = w_stride;
    a.offsets = offsets;
    a.E = E;
    a.IN = IN;
    a.OUT = OUT;
    a.alpha = alpha;
    // A few output-gradient columns widened into the input gradient (LoRA A): the widening kernel.
    if (OUT <= kWidenMaxK && expert_widen(ExpertWiden::Backward, dinp, dout, w, w_stride, nullptr, 0, offsets, N, OUT,
                                          IN, E, alpha, true))
        return;
    const bool vec =
        IN % 8 == 0 && OUT % 8 == 0 && w_stride % 8 == 0 && aligned16(dinp) && aligned16(dout) && aligned16(w);
    a.starts = expert_batched_head(ExpertGemm::Backward, dinp, dout, w, w_stride, offsets, N, IN, OUT, E, alpha, true);
    gemm_dispatch<Op::Backward>(a, dim3(col_tiles(IN), row_tiles(N, E)), vec);
}

void grouped_matmul_weight_grad(float* dw, int64_t dw_stride, const bf16* dout, const bf16* inp, const int32_t* offsets,
                                int N, int IN, int OUT, int E, float alpha) {
    TANDEM_KCHECK_PTR(dw);
    TANDEM_KCHECK_PTR(dout);
    TANDEM_KCHECK_PTR(inp);
    check_grouped(offsets, N, IN, OUT, E);
    TANDEM_KCHECK(dw_stride >= 0);
    TANDEM_KCHECK((int64_t(OUT) + kBM - 1) / kBM <= 65535);  // grid y
    GemmArgs a{};
    a.out = dw;
    a.out_stride = dw_stride;
    a.a = dout;
    a.b = inp;
    a.offsets = offsets;
    a.E = E;
    a.IN = IN;
    a.OUT = OUT;
    a.alpha = alpha;
    const bool vec = IN % 8 == 0 && OUT % 8 == 0 && aligned16(dout) && aligned16(inp);
    gemm_dispatch<Op::WeightGrad>(
        a, dim3(col_tiles(IN), static_cast<unsigned>((OUT + kBM - 1) / kBM), static_cast<unsigned>(E)), vec);
}

}  // namespace tandem::cuda
