// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Fused, chunked lm_head + cross-entropy on the CUDA backend (see cross_entropy.h).
// N = tokens, C = channels, V = vocab, K = rows per chunk (chunk_rows, chosen by the caller).
// Per chunk: logits[K,V] (fp32, the workspace) = hidden_chunk @ weight^T (gemm); softmax_ce_kernel, one
// block per row: max and sum of exponentials in one online pass, loss = logsumexp - logit[target] into
// losses[row], then the row overwritten IN PLACE with its bf16 gradient grad_scale * (softmax - onehot);
// then dhidden_chunk[K,C] = dlogits_bf16 @ weight (gemm, beta = 0).
// Decisions a reader must know:
//  - In place: the bf16 gradient of row r starts where its fp32 logits start, so the bf16 view has a row
//    stride of 2V elements (the fp32 row's bytes) and the dhidden GEMM gets lda = 2V. bf16 element j lies
//    inside fp32 element j/2 <= j, so writing j never clobbers a logit not yet read by the pass that reads
//    left to right; one __syncthreads between each iteration's reads and writes covers the threads of the
//    block (proof at softmax_ce_kernel). No second [K,V] buffer: the workspace is just the fp32 logits.
//  - Rows whose target is -100 get loss 0 and a zero gradient. Targets are validated on the host by the
//    caller; a target outside [0,V) anyway gives a NaN loss (visible) instead of an out-of-bounds read.
//  - fp32 math throughout (softmax with max subtraction); per-row losses, so the caller's sum is
//    deterministic. No gradient for the lm_head weight (frozen under LoRA).
//  - Cost (H100 80GB HBM3, N 16384, C 1536, V 151936, K 2048, scratch harness on the device machine):
//    29.2 ms = logits GEMMs 12.4 + dhidden GEMMs 10.1 + softmax_ce_kernel ~6.7 (two reads of the fp32
//    logits and one bf16 write, close to HBM bandwidth: a row (600 KB) does not stay in L2 between the
//    passes). Evaluation (no gradient) 15.6 ms.
#include "kernels/cuda/cross_entropy.h"

#include <algorithm>
#include <climits>
#include <cmath>

#include "kernels/cpu/cross_entropy.h"  // kIgnoreIndex
#include "kernels/cuda/matmul.h"

namespace tandem::cuda {

using cpu::kIgnoreIndex;

constexpr int kCeThreads = 1024;       // threads per row (one block per row)
constexpr size_t kWorkspaceAlign = 256;  // the logits start 256-byte aligned inside the workspace

// ----------------------------------------------------------------------------------------------------------
// CUDA kernels

// Running max m and sum of exp(x - m) of the values seen so far.
struct MaxSum {
    float m;
    float s;
};

static __device__ __forceinline__ void online_add(MaxSum& a, float x) {
    if (x > a.m) {
        a.s = a.s * expf(a.m - x) + 1.0f;  // a.m = -inf at the start: expf(-inf) = 0
        a.m = x;
    } else {
        a.s += expf(x - a.m);  // NaN logits make the sum (and the loss) NaN, as they should
    }
}

// Commutative (bitwise), so every lane of the butterfly below ends with the same value.
static __device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
    if (a.m == -INFINITY) return b;
    if (b.m == -INFINITY) return a;
    const float m = fmaxf(a.m, b.m);
    return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

static __device__ __forceinline__ MaxSum warp_reduce(MaxSum v) {
    for (int off = 16; off > 0; off >>= 1) {
        const MaxSum o{__shfl_xor_sync(0xffffffffu, v.m, off), __shfl_xor_sync(0xffffffffu, v.s, off)};
        v = combine(v, o);
    }
    return v;
}

// The block's total, returned to every thread. Contains a __syncthreads (all earlier reads of the row by
// every thread happen before it).
static __device__ MaxSum block_reduce(MaxSum v) {
    __shared__ MaxSum warp_total[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_reduce(v);
    if (lane == 0) warp_total[warp] = v;
    __syncthreads();
    const int nwarps = blockDim.x / 32;
    v = lane < nwarps ? warp_total[lane] : MaxSum{-INFINITY, 0.0f};
    return warp_reduce(v);
}

// One block per row of logits[rows, V] (fp32). Writes losses[row]; with want_grad, overwrites the row with
// its bf16 gradient (bf16 view, same start, row stride 2V bf16). VEC: V % 4 == 0 and 16-byte aligned rows;
// then "element" below means a group of 4 (float4 read, 4 bf16 = 8 bytes written).
// Why one barrier per iteration suffices: iteration i reads fp32 elements [iB, (i+1)B) (B = blockDim) and
// writes bf16 elements [iB, (i+1)B), i.e. the bytes of fp32 elements [iB/2, (i+1)B/2). A thread writing
// in iteration i has passed the barrier that follows every thread's reads of iteration i, and everything
// it writes lies below (i+1)B, so no read of iteration i+1 or later can be clobbered.
// Gemma 2's final_logit_softcapping: cap * tanh(x / cap) (cap 0: x); the gradient is times 1 - (capped / cap)^2.
__device__ inline float capped(float x, float cap) { return cap > 0.0f ? cap * tanhf(x / cap) : x; }
__device__ inline float capped_grad(float d, float capped_x, float cap) {
    return cap > 0.0f ? d * (1.0f - (capped_x / cap) * (capped_x / cap)) : d;
}

template <bool VEC>
static __global__ void __launch_bounds__(kCeThreads)
    softmax_ce_kernel(float* logits, float* losses, const int32_t* targets, int V, float grad_scale,
                      const float* grad_scale_device, bool want_grad, float softcap) {
    if (grad_scale_device) grad_scale = *grad_scale_device;
    const int row = blockIdx.x;
    float* z = logits + static_cast<size_t>(row) * V;  // [V] fp32 logits
    bf16* g = reinterpret_cast<bf16*>(z);              // [V] bf16 gradient, written over the logits
    const int tid = threadIdx.x;
    const int32_t target = targets[row];

    if (target == kIgnoreIndex) {
        if (tid == 0) losses[row] = 0.0f;
        if (want_grad)  // nothing of the row is read: plain writes
            for (int j = tid; j < V; j += blockDim.x) g[j] = __float2bfloat16(0.0f);
        return;
    }
    const bool valid = target >= 0 && target < V;
    float z_target = 0.0f;
    if (tid == 0 && valid) z_target = capped(z[target], softcap);  // before block_reduce's barrier: before any write

    // Pass 1: max and sum of exponentials, online.
    MaxSum acc{-INFINITY, 0.0f};
    const int n4 = V / 4;
    const float4* z4 = reinterpret_cast<const float4*>(z);
    if constexpr (VEC) {
        for (int j = tid; j < n4; j += blockDim.x) {
            const float4 v = z4[j];
            online_add(acc, capped(v.x, softcap));
            online_add(acc, capped(v.y, softcap));
            online_add(acc, capped(v.z, softcap));
            online_add(acc, capped(v.w, softcap));
        }
    } else {
        for (int j = tid; j < V; j += blockDim.x) online_add(acc, capped(z[j], softcap));
    }
    const MaxSum total = block_reduce(acc);
    const float lse = total.m + logf(total.s);
    if (tid == 0) losses[row] = valid ? lse - z_target : NAN;
    if (!want_grad) return;

    // Pass 2: grad_scale * (softmax - onehot), in place (see the comment above the kernel).
    const int onehot = valid ? target : -1;
    if constexpr (VEC) {
        uint2* g4 = reinterpret_cast<uint2*>(z);  // 4 bf16 per element
        for (int base = 0; base < n4; base += blockDim.x) {  // uniform trip count: the barrier is safe
            const int j = base + tid;
            float4 v{};
            if (j < n4) v = z4[j];
            __syncthreads();
            if (j < n4) {
                v = {capped(v.x, softcap), capped(v.y, softcap), capped(v.z, softcap), capped(v.w, softcap)};
                const int i0 = 4 * j;
                const float d0 = capped_grad(expf(v.x - lse) * grad_scale - (i0 == onehot ? grad_scale : 0.0f), v.x, softcap);
                const float d1 =
                    capped_grad(expf(v.y - lse) * grad_scale - (i0 + 1 == onehot ? grad_scale : 0.0f), v.y, softcap);
                const float d2 =
                    capped_grad(expf(v.z - lse) * grad_scale - (i0 + 2 == onehot ? grad_scale : 0.0f), v.z, softcap);
                const float d3 =
                    capped_grad(expf(v.w - lse) * grad_scale - (i0 + 3 == onehot ? grad_scale : 0.0f), v.w, softcap);
                const __nv_bfloat162 lo = __floats2bfloat162_rn(d0, d1), hi = __floats2bfloat162_rn(d2, d3);
                uint2 packed;
                packed.x = *reinterpret_cast<const unsigned*>(&lo);
                packed.y = *reinterpret_cast<const unsigned*>(&hi);
                g4[j] = packed;
            }
        }
    } else {
        for (int base = 0; base < V; base += blockDim.x) {
            const int j = base + tid;
            float v = 0.0f;
            if (j < V) v = capped(z[j], softcap);
            __syncthreads();
            if (j < V)
                g[j] = __float2bfloat16(
                    capped_grad(expf(v - lse) * grad_scale - (j == onehot ? grad_scale : 0.0f), v, softcap));
        }
    }
}

// x = cap * tanh(x / cap) over n fp32 values (lm_head_logits with soft-capping).
static __global__ void softcap_kernel(float* x, int64_t n, float cap) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        x[i] = capped(x[i], cap);
}

// ----------------------------------------------------------------------------------------------------------
// launchers

size_t lm_head_cross_entropy_workspace(int chunk_rows, int V) {
    TANDEM_KCHECK(chunk_rows > 0 && V > 0);
    return static_cast<size_t>(chunk_rows) * static_cast<size_t>(V) * sizeof(float) + kWorkspaceAlign;
}

namespace {

// grad_scale_device: when set, the kernels read the scale there (grad_scale ignored).
void lm_head_cross_entropy_launch(bf16* dhidden, float* losses, const bf16* hidden, const bf16* weight,
                                  const int32_t* targets, int N, int C, int V, float grad_scale,
                                  const float* grad_scale_device, int chunk_rows, void* workspace, float softcap) {
    TANDEM_KCHECK_PTR(losses);
    TANDEM_KCHECK_PTR(hidden);
    TANDEM_KCHECK_PTR(weight);
    TANDEM_KCHECK_PTR(targets);
    TANDEM_KCHECK_PTR(workspace);
    TANDEM_KCHECK(N > 0 && C > 0 && V > 0 && chunk_rows > 0);
    TANDEM_KCHECK(V <= INT_MAX / 2);  // the bf16 view's leading dimension 2V is an int
    const uintptr_t ws = reinterpret_cast<uintptr_t>(workspace);
    float* logits = reinterpret_cast<float*>((ws + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign);  // [K,V]
    const bf16* dlogits = reinterpret_cast<const bf16*>(logits);  // [K,V] with row stride 2V, written in place
    const bool vec = V % 4 == 0;  // then every row starts 16-byte aligned
    cudaStream_t stream = context().stream;
    const int K = std::min(chunk_rows, N);
    for (int n0 = 0; n0 < N; n0 += K) {
        const int rows = std::min(K, N - n0);
        // logits[rows,V] = hidden[n0:n0+rows, C] @ weight[V,C]^T
        gemm(false, true, rows, V, C, 1.0f, hidden + static_cast<size_t>(n0) * C, C, weight, C, 0.0f, logits, V, true);
        if (vec)
            softmax_ce_kernel<true><<<rows, kCeThreads, 0, stream>>>(logits, losses + n0, targets + n0, V, grad_scale,
                                                                     grad_scale_device, dhidden != nullptr, softcap);
        else
            softmax_ce_kernel<false><<<rows, kCeThreads, 0, stream>>>(logits, losses + n0, targets + n0, V, grad_scale,
                                                                      grad_scale_device, dhidden != nullptr, softcap);
        TANDEM_CUDA_LAUNCH_CHECK();
        if (dhidden) {
            // dhidden[n0:n0+rows, C] = dlogits[rows,V] (ld 2V) @ weight[V,C]
            gemm(false, false, rows, C, V, 1.0f, dlogits, 2 * V, weight, C, 0.0f, dhidden + static_cast<size_t>(n0) * C,
                 C, false);
        }
    }
}

}  // namespace

void lm_head_cross_entropy(bf16* dhidden, float* losses, const bf16* hidden, const bf16* weight, const int32_t* targets,
                           int N, int C, int V, float grad_scale, int chunk_rows, void* workspace, float softcap) {
    lm_head_cross_entropy_launch(dhidden, losses, hidden, weight, targets, N, C, V, grad_scale, nullptr, chunk_rows,
                                 workspace, softcap);
}

void lm_head_cross_entropy(bf16* dhidden, float* losses, const bf16* hidden, const bf16* weight, const int32_t* targets,
                           int N, int C, int V, const float* grad_scale_device, int chunk_rows, void* workspace,
                           float softcap) {
    TANDEM_KCHECK_PTR(grad_scale_device);
    lm_head_cross_entropy_launch(dhidden, losses, hidden, weight, targets, N, C, V, 0.0f, grad_scale_device,
                                 chunk_rows, workspace, softcap);
}

void lm_head_logits(float* out, const bf16* hidden, const bf16* weight, int N, int C, int V, float softcap) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(hidden);
    TANDEM_KCHECK_PTR(weight);
    TANDEM_KCHECK(N > 0 && C > 0 && V > 0);
    // out[N,V] = hidden[N,C] @ weight[V,C]^T
    gemm(false, true, N, V, C, 1.0f, hidden, C, weight, C, 0.0f, out, V, true);
    if (softcap > 0.0f) {
        const int64_t n = int64_t(N) * V;
        softcap_kernel<<<unsigned(std::min<int64_t>((n + 255) / 256, 65535)), 256, 0, context().stream>>>(out, n,
                                                                                                         softcap);
        TANDEM_CUDA_LAUNCH_CHECK();
    }
}

}  // namespace tandem::cuda
