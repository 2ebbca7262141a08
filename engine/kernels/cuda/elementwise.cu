// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Elementwise helpers of the CUDA backend (see elementwise.h). n = element count.
// Decisions:
//  - One grid-stride kernel shape for every map: each thread handles packs of 8 elements (16 bytes of bf16)
//    when every pointer is 16-byte aligned, and single elements otherwise; the n % 8 tail of the packed
//    path is done by block 0. A thread reads all its inputs before it writes, so in-place use is safe.
//  - sum() is one block of 1024 threads: a fixed strided loop per thread, then a fixed-order tree in
//    shared memory, all in double. Deterministic with no atomics and no workspace; meant for n ~ tokens.
//  - fill_uniform: u = top 24 bits of splitmix64(splitmix64(seed) ^ i) / 2^24, value = (2u - 1) * bound.
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/vec.cuh"

#include <algorithm>
#include <cstdint>

#include <cuda_fp16.h>

#include "core/random.h"

namespace tandem::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kPack = 8;                 // elements per thread on the aligned path
constexpr int64_t kMaxBlocks = 1 << 16;  // grid-stride beyond this

// W elements moved as one (16-byte at most) access.
__device__ inline float to_float(float x) { return x; }
__device__ inline float to_float(bf16 x) { return __bfloat162float(x); }
__device__ inline float to_float(__half x) { return __half2float(x); }

template <class T>
__device__ inline T from_float(float x);
template <>
__device__ inline float from_float<float>(float x) { return x; }
template <>
__device__ inline bf16 from_float<bf16>(float x) { return __float2bfloat16_rn(x); }

// ---------------------------------------------------------------------------------------------------------
// CUDA kernels

// out[i] = f(a[i])
template <class TO, class TA, class F>
struct Unary {
    TO* out;
    const TA* a;
    F f;
    template <int W>
    __device__ void run(int64_t i) const {
        const Pack<TA, W> x = load_pack<W>(a + i);
        Pack<TO, W> r;
#pragma unroll
        for (int k = 0; k < W; k++) r.v[k] = from_float<TO>(f(to_float(x.v[k])));
        store_pack<W>(out + i, r);
    }
};

// out[i] = f(a[i], b[i])
template <class TO, class TA, class TB, class F>
struct Binary {
    TO* out;
    const TA* a;
    const TB* b;
    F f;
    template <int W>
    __device__ void run(int64_t i) const {
        const Pack<TA, W> x = load_pack<W>(a + i);
        const Pack<TB, W> y = load_pack<W>(b + i);
        Pack<TO, W> r;
#pragma unroll
        for (int k = 0; k < W; k++) r.v[k] = from_float<TO>(f(to_float(x.v[k]), to_float(y.v[k])));
        store_pack<W>(out + i, r);
    }
};

// out[i] = value
template <class T>
struct Fill {
    T* out;
    float value;
    template <int W>
    __device__ void run(int64_t i) const {
        Pack<T, W> r;
#pragma unroll
        for (int k = 0; k < W; k++) r.v[k] = from_float<T>(value);
        store_pack<W>(out + i, r);
    }
};

// out[i] = (2u - 1) * bound, u = hash(seed, i) in [0, 1)
struct FillUniform {
    bf16* out;
    uint64_t seed;  // already hashed once
    float bound;
    template <int W>
    __device__ void run(int64_t i) const {
        Pack<bf16, W> r;
#pragma unroll
        for (int k = 0; k < W; k++) {
            const uint64_t h = splitmix64(seed ^ uint64_t(i + k));
            const float u = float(uint32_t(h >> 40)) * 0x1.0p-24f;
            r.v[k] = __float2bfloat16_rn((2.0f * u - 1.0f) * bound);
        }
        store_pack<W>(out + i, r);
    }
};

struct AddF {
    __device__ float operator()(float x, float y) const { return x + y; }
};
struct AxpyF {
    float alpha;
    __device__ float operator()(float x, float y) const { return x + alpha * y; }
};
struct ScaleF {
    float alpha;
    __device__ float operator()(float x) const { return x * alpha; }
};
struct IdentityF {
    __device__ float operator()(float x) const { return x; }
};

template <int W, class Op>
__global__ void map_kernel(Op op, int64_t n) {
    const int64_t packs = n / W;
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < packs; p += stride) op.template run<W>(p * W);
    if (W > 1 && blockIdx.x == 0)
        for (int64_t i = packs * W + threadIdx.x; i < n; i += blockDim.x) op.template run<1>(i);
}

constexpr int kSumThreads = 1024;

__global__ void sum_kernel(double* out, const float* inp, int64_t n, bool accumulate) {
    __shared__ double part[kSumThreads];
    const int tid = threadIdx.x;
    double acc = 0.0;
    for (int64_t i = tid; i < n; i += kSumThreads) acc += double(inp[i]);
    part[tid] = acc;
    __syncthreads();
    for (int w = kSumThreads / 2; w > 0; w >>= 1) {
        if (tid < w) part[tid] += part[tid + w];
        __syncthreads();
    }
    if (tid == 0) out[0] = accumulate ? out[0] + part[0] : part[0];
}

// ---------------------------------------------------------------------------------------------------------
// kernel launchers

unsigned map_grid(int64_t units) { return unsigned(std::clamp<int64_t>((units + kThreads - 1) / kThreads, 1, kMaxBlocks)); }

template <class Op>
void launch_map(const Op& op, int64_t n, bool aligned) {
    if (n == 0) return;
    if (aligned)
        map_kernel<kPack><<<map_grid(n / kPack), kThreads, 0, context().stream>>>(op, n);
    else
        map_kernel<1><<<map_grid(n), kThreads, 0, context().stream>>>(op, n);
    TANDEM_CUDA_LAUNCH_CHECK();
}

}  // namespace

void add(bf16* out, const bf16* a, const bf16* b, int64_t n) {
    TANDEM_KCHECK(out && a && b && n >= 0);
    launch_map(Binary<bf16, bf16, bf16, AddF>{out, a, b, {}}, n, aligned16(out) && aligned16(a) && aligned16(b));
}

void accumulate(bf16* out, const bf16* inp, int64_t n) {
    TANDEM_KCHECK(out && inp && n >= 0);
    launch_map(Binary<bf16, bf16, bf16, AddF>{out, out, inp, {}}, n, aligned16(out) && aligned16(inp));
}

void accumulate(float* out, const float* inp, int64_t n) {
    TANDEM_KCHECK(out && inp && n >= 0);
    launch_map(Binary<float, float, float, AddF>{out, out, inp, {}}, n, aligned16(out) && aligned16(inp));
}

void axpy(bf16* out, float alpha, const bf16* inp, int64_t n) {
    TANDEM_KCHECK(out && inp && n >= 0);
    launch_map(Binary<bf16, bf16, bf16, AxpyF>{out, out, inp, {alpha}}, n, aligned16(out) && aligned16(inp));
}

void scale(bf16* x, float alpha, int64_t n) {
    TANDEM_KCHECK(x && n >= 0);
    launch_map(Unary<bf16, bf16, ScaleF>{x, x, {alpha}}, n, aligned16(x));
}

void scale(float* x, float alpha, int64_t n) {
    TANDEM_KCHECK(x && n >= 0);
    launch_map(Unary<float, float, ScaleF>{x, x, {alpha}}, n, aligned16(x));
}

void copy(bf16* out, const bf16* inp, int64_t n) {
    TANDEM_KCHECK(out && inp && n >= 0);
    if (n == 0 || out == inp) return;
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(out, inp, size_t(n) * sizeof(bf16), cudaMemcpyDeviceToDevice, context().stream));
}

void zero(bf16* x, int64_t n) {
    TANDEM_KCHECK(x && n >= 0);
    TANDEM_CUDA_CHECK(cudaMemsetAsync(x, 0, size_t(n) * sizeof(bf16), context().stream));
}

void zero(float* x, int64_t n) {
    TANDEM_KCHECK(x && n >= 0);
    TANDEM_CUDA_CHECK(cudaMemsetAsync(x, 0, size_t(n) * sizeof(float), context().stream));
}

void fill(bf16* x, float value, int64_t n) {
    TANDEM_KCHECK(x && n >= 0);
    launch_map(Fill<bf16>{x, value}, n, aligned16(x));
}

void fill(float* x, float value, int64_t n) {
    TANDEM_KCHECK(x && n >= 0);
    launch_map(Fill<float>{x, value}, n, aligned16(x));
}

void to_bf16(bf16* out, const float* inp, int64_t n) {
    TANDEM_KCHECK(out && inp && n >= 0);
    launch_map(Unary<bf16, float, IdentityF>{out, inp, {}}, n, aligned16(out) && aligned16(inp));
}

void to_f32(float* out, const bf16* inp, int64_t n) {
    TANDEM_KCHECK(out && inp && n >= 0);
    launch_map(Unary<float, bf16, IdentityF>{out, inp, {}}, n, aligned16(out) && aligned16(inp));
}

void f16_to_bf16(bf16* out, const void* inp_f16, int64_t n) {
    TANDEM_KCHECK(out && inp_f16 && n >= 0);
    const auto* inp = static_cast<const __half*>(inp_f16);
    launch_map(Unary<bf16, __half, IdentityF>{out, inp, {}}, n, aligned16(out) && aligned16(inp));
}

void sum(double* out, const float* inp, int64_t n, bool accumulate) {
    TANDEM_KCHECK(out && inp && n >= 0);
    sum_kernel<<<1, kSumThreads, 0, context().stream>>>(out, inp, n, accumulate);
    TANDEM_CUDA_LAUNCH_CHECK();
}

void fill_uniform(bf16* x, int64_t n, uint64_t seed, float bound) {
    TANDEM_KCHECK(x && n >= 0);
    launch_map(FillUniform{x, splitmix64(seed), bound}, n, aligned16(x));
}

}  // namespace tandem::cuda
