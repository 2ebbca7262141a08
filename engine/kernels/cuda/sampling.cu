// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Repetition penalty and sampling on the CUDA backend (see sampling.h). T = rows, V = vocabulary.
// Design:
//  - repetition_penalty: one block per row. The seen ids are first marked in a bitmap of the vocabulary in
//    shared memory, then every marked logit is penalised once: the CPU's gather-then-scatter (a repeated id
//    penalised once) without a buffer the size of the history.
//  - sample_tokens: one block of 1024 threads per row, streaming the row (600 KB at V = 151936, L2-resident
//    between passes) about a dozen times; no sort. The scores x = logit / temperature are written over the
//    row and a removed id becomes -inf. top-k: the k-th largest score by a 4-pass radix select over the
//    scores' order-preserving 32-bit keys (-0 counted as +0, as float comparison does); ids below it are
//    removed (ties kept). top-p: the cut of the ascending order by a radix select over the probability
//    mass (histograms of mass per key digit, in double), then one ordered pass over the ids whose score
//    equals the cut (a block scan in id order: the CPU's stable sort removes lower ids first among ties);
//    the most likely id (highest id among the largest) is never removed. min-p: p < min_p * p_max.
//    The draw: a block scan of the probabilities in id order, the smallest kept id whose inclusive sum
//    exceeds u. Probabilities are exp(double(x) - double(max)) / sum, in double, as on the CPU.
#include "kernels/cuda/sampling.h"

#include <climits>
#include <cmath>
#include <cstdint>

#include "core/cuda/context.h"

namespace tandem::cuda {

namespace {

constexpr int kThreads = 1024;  // sample_tokens: one block per row
constexpr int kWarps = kThreads / 32;
constexpr int kPenaltyThreads = 256;
constexpr unsigned kFull = 0xffffffffu;

// ----------------------------------------------------------------------------------------------------------
// CUDA kernels

__global__ void repetition_penalty_kernel(float* __restrict__ logits, const int32_t* __restrict__ tokens,
                                          const int32_t* __restrict__ row_slot, const int32_t* __restrict__ row_len,
                                          const SamplingParams* __restrict__ params, int V, int N, int M) {
    extern __shared__ uint32_t seen[];  // [ceil(V / 32)] bits
    const int t = blockIdx.x;
    const float penalty = params[t].repetition_penalty;
    const int slot = row_slot[t], len = row_len[t];
    // Block-uniform exits, before any barrier.
    if (penalty == 1.0f || !(penalty > 0.0f) || slot < 0 || slot >= N || len <= 0 || len > M) return;
    const int words = (V + 31) / 32;
    for (int i = threadIdx.x; i < words; i += blockDim.x) seen[i] = 0u;
    __syncthreads();
    const int32_t* ids = tokens + size_t(slot) * M;
    for (int i = threadIdx.x; i < len; i += blockDim.x) {
        const int32_t id = ids[i];
        if (id >= 0 && id < V) atomicOr(&seen[id >> 5], 1u << (id & 31));
    }
    __syncthreads();
    float* x = logits + size_t(t) * V;
    for (int v = threadIdx.x; v < V; v += blockDim.x)
        if (seen[v >> 5] & (1u << (v & 31))) {
            const float val = x[v];
            x[v] = val > 0.0f ? val / penalty : val * penalty;
        }
}

// Order-preserving key of a score: a < b as floats iff key(a) < key(b); -0 is +0.
__device__ __forceinline__ uint32_t key_of(float f) {
    if (f == 0.0f) f = 0.0f;
    const uint32_t u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ bool kept(float x) { return x > -INFINITY; }

// Block reductions; every thread gets the result. sh: kWarps slots, free again on return.
__device__ float block_max(float v, float* sh) {
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, off));
    if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = v;
    __syncthreads();
    float r = sh[0];
    for (int w = 1; w < kWarps; w++) r = fmaxf(r, sh[w]);
    __syncthreads();
    return r;
}

__device__ double block_sum(double v, double* sh) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFull, v, off);
    if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = v;
    __syncthreads();
    double r = 0.0;
    for (int w = 0; w < kWarps; w++) r += sh[w];
    __syncthreads();
    return r;
}

// max (maximize = true) or min of an int over the block.
__device__ int block_extreme(int v, bool maximize, int* sh) {
    for (int off = 16; off > 0; off >>= 1) {
        const int o = __shfl_xor_sync(kFull, v, off);
        v = maximize ? max(v, o) : min(v, o);
    }
    if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = v;
    __syncthreads();
    int r = sh[0];
    for (int w = 1; w < kWarps; w++) r = maximize ? max(r, sh[w]) : min(r, sh[w]);
    __syncthreads();
    return r;
}

// Inclusive prefix sum of w over the block's threads in thread order; total = the block's sum.
__device__ double block_scan(double w, double& total, double* sh) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    double x = w;
    for (int off = 1; off < 32; off <<= 1) {
        const double y = __shfl_up_sync(kFull, x, off);
        if (lane >= off) x += y;
    }
    if (lane == 31) sh[warp] = x;
    __syncthreads();
    double before = 0.0, all = 0.0;
    for (int i = 0; i < kWarps; i++) {
        if (i < warp) before += sh[i];
        all += sh[i];
    }
    __syncthreads();
    total = all;
    return before + x;
}

struct SampleShared {
    float f[kWarps];
    double d[kWarps];
    int i[kWarps];
    double hist_m[256];
    int hist_c[256];
    uint32_t prefix;
    int remaining;
    double below;
};

// Largest kept score of row x and the sum of exp(x - max) over the kept ids (double).
__device__ void max_and_sum(const float* x, int V, SampleShared& sh, float& mx, double& sum) {
    float m = -INFINITY;
    for (int v = threadIdx.x; v < V; v += kThreads) m = fmaxf(m, x[v]);
    mx = block_max(m, sh.f);
    double s = 0.0;
    for (int v = threadIdx.x; v < V; v += kThreads)
        if (kept(x[v])) s += exp(double(x[v]) - double(mx));
    sum = block_sum(s, sh.d);
}

// The key of the k-th largest score (1 <= k <= V), ties counted, as nth_element on the descending order.
__device__ uint32_t kth_largest_key(const float* x, int V, int k, SampleShared& sh) {
    uint32_t prefix = 0, mask = 0;
    if (threadIdx.x == 0) sh.remaining = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < 256; b += kThreads) sh.hist_c[b] = 0;
        __syncthreads();
        for (int v = threadIdx.x; v < V; v += kThreads) {
            const uint32_t kk = key_of(x[v]);
            if ((kk & mask) == prefix) atomicAdd(&sh.hist_c[(kk >> shift) & 255u], 1);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            int rem = sh.remaining, pick = 0;
            for (int b = 255; b >= 0; b--) {
                if (sh.hist_c[b] >= rem) {
                    pick = b;
                    break;
                }
                rem -= sh.hist_c[b];
            }
            sh.remaining = rem;
            sh.prefix = prefix | (uint32_t(pick) << shift);
        }
        __syncthreads();
        prefix = sh.prefix;
        mask |= 255u << shift;
        __syncthreads();
    }
    return prefix;
}

// top-p: remove the longest prefix of the ascending order (ties: lower id first) whose cumulative
// probability is <= 1 - top_p, never the last (most likely) id.
__device__ void top_p_filter(float* x, int V, float top_p, SampleShared& sh) {
    float mx;
    double sum;
    max_and_sum(x, V, sh, mx, sum);
    const double thr = 1.0 - double(top_p);
    // The protected id: the highest id holding the largest score.
    int top = -1;
    for (int v = threadIdx.x; v < V; v += kThreads)
        if (x[v] == mx) top = v;
    top = block_extreme(top, true, sh.i);
    // Radix select of the cut key c: mass(key < c) <= thr < mass(key <= c).
    uint32_t prefix = 0, mask = 0;
    if (threadIdx.x == 0) sh.below = 0.0;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < 256; b += kThreads) {
            sh.hist_m[b] = 0.0;
            sh.hist_c[b] = 0;
        }
        __syncthreads();
        for (int v = threadIdx.x; v < V; v += kThreads) {
            const float xv = x[v];
            if (!kept(xv)) continue;
            const uint32_t kk = key_of(xv);
            if ((kk & mask) != prefix) continue;
            const uint32_t b = (kk >> shift) & 255u;
            atomicAdd(&sh.hist_m[b], exp(double(xv) - double(mx)) / sum);
            atomicAdd(&sh.hist_c[b], 1);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            double acc = sh.below;
            int pick = -1, last = 0;
            for (int b = 0; b < 256; b++) {
                if (sh.hist_c[b] == 0) continue;
                if (acc + sh.hist_m[b] > thr) {
                    pick = b;
                    break;
                }
                acc += sh.hist_m[b];
                last = b;
            }
            if (pick < 0) {  // every mass <= thr (rounding): the cut is the largest key
                pick = last;
                acc -= sh.hist_m[last];
            }
            sh.below = acc;
            sh.prefix = prefix | (uint32_t(pick) << shift);
        }
        __syncthreads();
        prefix = sh.prefix;
        mask |= 255u << shift;
        __syncthreads();
    }
    const uint32_t cut = prefix;
    const double below = sh.below;
    // Remove keys below the cut, and the tied ids at the cut in id order while the running mass <= thr.
    double carry = 0.0;
    for (int base = 0; base < V; base += kThreads) {
        const int v = base + int(threadIdx.x);
        const float xv = v < V ? x[v] : -INFINITY;
        const bool k = kept(xv);
        const uint32_t kk = key_of(xv);
        const bool tie = k && kk == cut;
        double total;
        const double incl = block_scan(tie ? exp(double(xv) - double(mx)) / sum : 0.0, total, sh.d);
        if (k && v != top && (kk < cut || (tie && below + carry + incl <= thr))) x[v] = -INFINITY;
        carry += total;
    }
    __syncthreads();
}

__global__ void __launch_bounds__(kThreads) sample_kernel(int32_t* __restrict__ out, float* __restrict__ logits,
                                                          const SamplingParams* __restrict__ params,
                                                          const int64_t* __restrict__ draw, int V) {
    __shared__ SampleShared sh;
    const int t = blockIdx.x;
    float* x = logits + size_t(t) * V;
    const SamplingParams sp = params[t];
    if (!(sp.temperature > 0.0f)) {  // greedy: argmax, lowest id on ties
        float best = -INFINITY;
        int id = INT_MAX;
        for (int v = threadIdx.x; v < V; v += kThreads)
            if (x[v] > best || id == INT_MAX) {  // the first id a thread sees, then strictly larger ones
                best = x[v];
                id = v;
            }
        const float m = block_max(best, sh.f);
        const int first = block_extreme(best == m ? id : INT_MAX, false, sh.i);
        if (threadIdx.x == 0) out[t] = first == INT_MAX ? 0 : first;
        return;
    }
    for (int v = threadIdx.x; v < V; v += kThreads) x[v] = x[v] / sp.temperature;
    __syncthreads();
    if (sp.top_k > 0 && sp.top_k < V) {
        const uint32_t kth = kth_largest_key(x, V, sp.top_k, sh);
        for (int v = threadIdx.x; v < V; v += kThreads)
            if (key_of(x[v]) < kth) x[v] = -INFINITY;
        __syncthreads();
    }
    if (sp.top_p < 1.0f) top_p_filter(x, V, sp.top_p, sh);
    const float min_p = fminf(sp.min_p, 1.0f);
    if (min_p > 0.0f) {
        float mx;
        double sum;
        max_and_sum(x, V, sh, mx, sum);
        const double top = 1.0 / sum;  // the largest probability, as the CPU computes it
        for (int v = threadIdx.x; v < V; v += kThreads)
            if (kept(x[v]) && exp(double(x[v]) - double(mx)) / sum < double(min_p) * top) x[v] = -INFINITY;
        __syncthreads();
    }
    float mx;
    double sum;
    max_and_sum(x, V, sh, mx, sum);
    const double u = sampling_draw_uniform(sp.seed, draw[t]);
    double carry = 0.0;
    int chosen = INT_MAX, last = -1;
    for (int base = 0; base < V; base += kThreads) {
        const int v = base + int(threadIdx.x);
        const float xv = v < V ? x[v] : -INFINITY;
        const bool k = kept(xv);
        const double p = k ? exp(double(xv) - double(mx)) / sum : 0.0;
        double total;
        const double incl = block_scan(p, total, sh.d);
        if (v < V) x[v] = float(p);
        if (k) {
            last = v;
            if (chosen == INT_MAX && u < carry + incl) chosen = v;
        }
        carry += total;
    }
    chosen = block_extreme(chosen, false, sh.i);
    last = block_extreme(last, true, sh.i);
    if (threadIdx.x == 0) out[t] = chosen != INT_MAX ? chosen : (last >= 0 ? last : 0);
}

}  // namespace

// ----------------------------------------------------------------------------------------------------------
// kernel launchers

void repetition_penalty(float* logits, const int32_t* tokens, const int32_t* row_slot, const int32_t* row_len,
                        const SamplingParams* params, int T, int V, int N, int M) {
    TANDEM_KCHECK_PTR(logits);
    TANDEM_KCHECK_PTR(tokens);
    TANDEM_KCHECK_PTR(row_slot);
    TANDEM_KCHECK_PTR(row_len);
    TANDEM_KCHECK_PTR(params);
    TANDEM_KCHECK(T > 0 && V > 0 && N > 0 && M > 0);
    const size_t smem = size_t((V + 31) / 32) * sizeof(uint32_t);
    static thread_local size_t raised = 48 * 1024;  // dynamic shared memory this thread has enabled
    if (smem > raised) {
        int optin = 0;
        TANDEM_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, context().device));
        TANDEM_KCHECK(smem <= size_t(optin));
        TANDEM_CUDA_CHECK(cudaFuncSetAttribute(repetition_penalty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               int(smem)));
        raised = smem;
    }
    repetition_penalty_kernel<<<unsigned(T), kPenaltyThreads, smem, context().stream>>>(logits, tokens, row_slot,
                                                                                        row_len, params, V, N, M);
    TANDEM_CUDA_LAUNCH_CHECK();
}

void sample_tokens(int32_t* out, float* logits, const SamplingParams* params, const int64_t* draw, int T, int V) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(logits);
    TANDEM_KCHECK_PTR(params);
    TANDEM_KCHECK_PTR(draw);
    TANDEM_KCHECK(T > 0 && V > 0);
    sample_kernel<<<unsigned(T), kThreads, 0, context().stream>>>(out, logits, params, draw, V);
    TANDEM_CUDA_LAUNCH_CHECK();
}

}  // namespace tandem::cuda
