// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// AdamW, gradient norm and clipping on the CUDA backend (see adamw.h). K = tensor count, P = elements of
// one tensor.
// Decisions:
//  - Both kernels use a 2-D grid: blockIdx.y is the tensor, blockIdx.x a grid-stride slice of it. The host
//    does not know the tensors' sizes (they are in device memory), so grid.x comes from the mean size
//    total / K; bigger tensors take more strides. K must fit gridDim.y (65535).
//  - global_grad_norm: pass 1 writes one double partial per block (K * grid.x of them, the workspace),
//    pass 2 is one block summing them in a fixed order. Same result on every run; it differs from
//    cpu::global_grad_norm only by double rounding, well below the fp32 result's precision.
//  - adamw_update uses __fmul_rn / __fadd_rn / __fdiv_rn / __fsqrt_rn so nvcc cannot contract to FMA: the
//    update is bit-identical to cpu::adamw_update (which x86-64 compiles without FMA) given the same grads.
//  - Clipping scales the gradient in registers only: grad memory is left as the backward pass wrote it
//    (unlike cpu::clip_grad_norm, which scales it in place). The factor is max_norm / (norm + 1e-6) in
//    double, applied as float when below 1, as cpu::clip_grad_norm does.
#include "kernels/cuda/adamw.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tandem::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxGridX = 1024;      // blocks per tensor
constexpr int kElemsPerThread = 8;   // target work per thread when sizing grid.x
constexpr int kFinishThreads = 1024;

// Per-step factors, computed on the host in double and rounded once, as cpu::adamw_update does.
struct Scalars {
    float decay;          // 1 - lr * wd
    float w1;             // 1 - beta1
    float b2;             // beta2
    float w2;             // 1 - beta2
    float neg_step_size;  // -lr / (1 - beta1^step)
    float bc2_sqrt;       // sqrt(1 - beta2^step)
    float eps;
};

struct alignas(16) F4 {
    float v[4];
};
struct alignas(8) B4 {
    bf16 v[4];
};

__host__ __device__ inline bool aligned(const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

unsigned grid_x(int count, int64_t total) {
    const int64_t mean = (total + count - 1) / count;
    const int64_t per_block = int64_t(kThreads) * kElemsPerThread;
    return unsigned(std::clamp<int64_t>((mean + per_block - 1) / per_block, 1, kMaxGridX));
}

// ---------------------------------------------------------------------------------------------------------
// CUDA kernels

__device__ inline double warp_sum(double v) {
#pragma unroll
    for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
    return v;
}

// Sum over the block in a fixed order; the result is valid in thread 0.
__device__ inline double block_sum(double v) {
    __shared__ double part[32];
    v = warp_sum(v);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    double s = 0.0;
    if (threadIdx.x == 0)
        for (int w = 0; w < int(blockDim.x / 32); w++) s += part[w];
    return s;
}

// partial[y * gridDim.x + x] = sum of squares of block (x, y)'s share of tensor y's grad.
__global__ void grad_sumsq_kernel(double* partial, const AdamWTensor* tensors) {
    const float* g = tensors[blockIdx.y].grad;
    const int64_t n = tensors[blockIdx.y].n;
    const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    double acc = 0.0;
    int64_t tail = 0;
    if (aligned(g, 16)) {  // uniform over the block
        const int64_t packs = n / 4;
        for (int64_t p = first; p < packs; p += stride) {
            const F4 x = reinterpret_cast<const F4*>(g)[p];
#pragma unroll
            for (int k = 0; k < 4; k++) acc += double(x.v[k]) * double(x.v[k]);
        }
        tail = packs * 4;
    }
    for (int64_t i = tail + first; i < n; i += stride) acc += double(g[i]) * double(g[i]);
    acc = block_sum(acc);
    if (threadIdx.x == 0) partial[size_t(blockIdx.y) * gridDim.x + blockIdx.x] = acc;
}

__global__ void grad_norm_finish_kernel(float* norm_out, const double* partial, int64_t m) {
    __shared__ double s[kFinishThreads];
    const int tid = threadIdx.x;
    double acc = 0.0;
    for (int64_t i = tid; i < m; i += kFinishThreads) acc += partial[i];
    s[tid] = acc;
    __syncthreads();
    for (int w = kFinishThreads / 2; w > 0; w >>= 1) {
        if (tid < w) s[tid] += s[tid + w];
        __syncthreads();
    }
    if (tid == 0) norm_out[0] = float(sqrt(s[0]));
}

// torch's single-tensor AdamW for one element, op by op, without FMA contraction.
__device__ inline void adamw_element(float& p, float& m, float& v, float g, const Scalars& s) {
    p = __fmul_rn(p, s.decay);
    m = __fadd_rn(m, __fmul_rn(s.w1, __fsub_rn(g, m)));
    v = __fadd_rn(__fmul_rn(v, s.b2), __fmul_rn(__fmul_rn(s.w2, g), g));
    const float den = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), s.bc2_sqrt), s.eps);
    p = __fadd_rn(p, __fmul_rn(s.neg_step_size, __fdiv_rn(m, den)));
}

// Block (x, y) updates its grid-stride share of tensor y. norm may be nullptr (no clipping, no skip).
__global__ void adamw_kernel(const AdamWTensor* tensors, const float* norm, double max_norm, Scalars s) {
    __shared__ float clip_shared;
    __shared__ bool skip_shared;
    if (threadIdx.x == 0) {
        float clip = 1.0f;
        bool skip = false;
        if (norm) {
            const float nv = *norm;
            skip = !isfinite(nv);
            if (!skip && max_norm > 0.0) {
                const double coef = max_norm / (double(nv) + 1e-6);
                if (coef < 1.0) clip = float(coef);
            }
        }
        clip_shared = clip;
        skip_shared = skip;
    }
    __syncthreads();
    if (skip_shared) return;
    const float clip = clip_shared;
    const AdamWTensor t = tensors[blockIdx.y];
    const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    int64_t tail = 0;
    const bool vec = aligned(t.param, 16) && aligned(t.grad, 16) && aligned(t.exp_avg, 16) &&
                     aligned(t.exp_avg_sq, 16) && aligned(t.param_bf16, 8);
    if (vec) {  // uniform over the block
        const int64_t packs = t.n / 4;
        for (int64_t q = first; q < packs; q += stride) {
            F4 p = reinterpret_cast<const F4*>(t.param)[q];
            F4 m = reinterpret_cast<const F4*>(t.exp_avg)[q];
            F4 v = reinterpret_cast<const F4*>(t.exp_avg_sq)[q];
            const F4 g = reinterpret_cast<const F4*>(t.grad)[q];
#pragma unroll
            for (int k = 0; k < 4; k++) adamw_element(p.v[k], m.v[k], v.v[k], __fmul_rn(g.v[k], clip), s);
            reinterpret_cast<F4*>(t.param)[q] = p;
            reinterpret_cast<F4*>(t.exp_avg)[q] = m;
            reinterpret_cast<F4*>(t.exp_avg_sq)[q] = v;
            if (t.param_bf16) {
                B4 b;
#pragma unroll
                for (int k = 0; k < 4; k++) b.v[k] = __float2bfloat16_rn(p.v[k]);
                reinterpret_cast<B4*>(t.param_bf16)[q] = b;
            }
        }
        tail = packs * 4;
    }
    for (int64_t i = tail + first; i < t.n; i += stride) {
        float p = t.param[i], m = t.exp_avg[i], v = t.exp_avg_sq[i];
        adamw_element(p, m, v, __fmul_rn(t.grad[i], clip), s);
        t.param[i] = p;
        t.exp_avg[i] = m;
        t.exp_avg_sq[i] = v;
        if (t.param_bf16) t.param_bf16[i] = __float2bfloat16_rn(p);
    }
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// kernel launchers

size_t grad_norm_workspace(int count, int64_t total) {
    TANDEM_KCHECK(count >= 0 && total >= 0);
    if (count == 0) return 0;
    return size_t(count) * grid_x(count, total) * sizeof(double);
}

void global_grad_norm(float* norm_out, const AdamWTensor* tensors, int count, int64_t total, void* workspace) {
    TANDEM_KCHECK_PTR(norm_out);
    TANDEM_KCHECK(count >= 0 && count <= 65535 && total >= 0);
    const cudaStream_t s = context().stream;
    auto* partial = static_cast<double*>(workspace);
    int64_t m = 0;
    if (count > 0) {
        TANDEM_KCHECK_PTR(tensors);
        TANDEM_KCHECK_PTR(workspace);
        const unsigned gx = grid_x(count, total);
        grad_sumsq_kernel<<<dim3(gx, unsigned(count)), kThreads, 0, s>>>(partial, tensors);
        TANDEM_CUDA_LAUNCH_CHECK();
        m = int64_t(count) * gx;
    }
    grad_norm_finish_kernel<<<1, kFinishThreads, 0, s>>>(norm_out, partial, m);
    TANDEM_CUDA_LAUNCH_CHECK();
}

void adamw_update(const AdamWTensor* tensors, int count, int64_t total, const float* norm, double max_norm, double lr,
                  double beta1, double beta2, double eps, double weight_decay, int64_t step) {
    TANDEM_KCHECK(count >= 0 && count <= 65535 && total >= 0);
    TANDEM_KCHECK(step >= 1);
    TANDEM_KCHECK(beta1 >= 0.0 && beta1 < 1.0 && beta2 >= 0.0 && beta2 < 1.0);
    TANDEM_KCHECK(max_norm <= 0.0 || norm != nullptr);
    if (count == 0) return;
    TANDEM_KCHECK_PTR(tensors);
    const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(step));
    const double bc2 = 1.0 - std::pow(beta2, static_cast<double>(step));
    const Scalars sc{
        static_cast<float>(1.0 - lr * weight_decay),
        static_cast<float>(1.0 - beta1),
        static_cast<float>(beta2),
        static_cast<float>(1.0 - beta2),
        static_cast<float>(-(lr / bc1)),
        static_cast<float>(std::sqrt(bc2)),
        static_cast<float>(eps),
    };
    adamw_kernel<<<dim3(grid_x(count, total), unsigned(count)), kThreads, 0, context().stream>>>(tensors, norm, max_norm,
                                                                                             sc);
    TANDEM_CUDA_LAUNCH_CHECK();
}

}  // namespace tandem::cuda
