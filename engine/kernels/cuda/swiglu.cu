// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The gated MLP activations on the CUDA backend (see swiglu.h): SwiGLU and GeGLU, one kernel pair templated on
// the activation. N = rows, F = features.
// Decisions: grid-stride over packs of 8 elements (16-byte loads) when every pointer is aligned, single
// elements otherwise; block 0 does the n % 8 tail. A thread loads all its inputs before it stores, so the
// allowed aliasing (out = gate or up; dgate = gate, dup = up) is safe. The math is the CPU's, in fp32, with
// expf (not __expf): sigmoid = 1 / (1 + expf(-g)), which is 0 for g < -88 as on the CPU; tanhf for the GELU.
#include "kernels/cuda/swiglu.h"
#include "kernels/cuda/vec.cuh"

#include <algorithm>
#include <cstdint>

namespace tandem::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kPack = 8;
constexpr int64_t kMaxBlocks = 1 << 16;

// ---------------------------------------------------------------------------------------------------------
// CUDA kernels

// silu(g) = g * sigmoid(g); silu'(g) = sigmoid(g) * (1 + g * (1 - sigmoid(g))).
// An activation: out = f(gate) * u(up) (u(x) = x but for the clamped SwiGLU).
struct Silu {
    __device__ float f(float g) const { return g * (1.0f / (1.0f + expf(-g))); }
    __device__ float df(float g) const {
        const float sig = 1.0f / (1.0f + expf(-g));
        return sig * (1.0f + g * (1.0f - sig));
    }
    __device__ float u(float x) const { return x; }
    __device__ float du(float) const { return 1.0f; }
};
// gelu_tanh(g) = 0.5 g (1 + tanh(u)), u = sqrt(2/pi) (g + 0.044715 g^3) (torch's approximate="tanh");
// d/dg = 0.5 (1 + t) + 0.5 g (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 g^2), t = tanh(u).
struct GeluTanh {
    static constexpr float kA = 0.044715f, kS = 0.7978845608028654f;
    __device__ float f(float g) const { return 0.5f * g * (1.0f + tanhf(kS * (g + kA * g * g * g))); }
    __device__ float df(float g) const {
        const float t = tanhf(kS * (g + kA * g * g * g));
        return 0.5f * (1.0f + t) + 0.5f * g * (1.0f - t * t) * kS * (1.0f + 3.0f * kA * g * g);
    }
    __device__ float u(float x) const { return x; }
    __device__ float du(float) const { return 1.0f; }
};
// gpt-oss: g = min(gate, limit), f = g * sigmoid(alpha g); u = clamp(up, -limit, limit) + 1; no gradient
// where a clamp cuts (the CPU's ClampedSilu).
struct ClampedSilu {
    float alpha, limit;
    __device__ float f(float gate) const {
        const float g = fminf(gate, limit);
        return g * (1.0f / (1.0f + expf(-(g * alpha))));
    }
    __device__ float df(float gate) const {
        if (!(gate <= limit)) return 0.0f;
        const float sig = 1.0f / (1.0f + expf(-(gate * alpha)));
        return sig * (1.0f + alpha * gate * (1.0f - sig));
    }
    __device__ float u(float x) const { return fminf(fmaxf(x, -limit), limit) + 1.0f; }
    __device__ float du(float x) const { return x >= -limit && x <= limit ? 1.0f : 0.0f; }
};

template <class A, int W>
__device__ inline void forward_at(bf16* out, const bf16* gate, const bf16* up, int64_t i, A a) {
    const Pack<bf16, W> g = load_pack<W>(gate + i), u = load_pack<W>(up + i);
    Pack<bf16, W> y;
#pragma unroll
    for (int k = 0; k < W; k++) y.v[k] = __float2bfloat16_rn(a.f(__bfloat162float(g.v[k])) * a.u(__bfloat162float(u.v[k])));
    store_pack<W>(out + i, y);
}

template <class A, int W>
__device__ inline void backward_at(bf16* dgate, bf16* dup, const bf16* dout, const bf16* gate, const bf16* up,
                                   int64_t i, A a) {
    const Pack<bf16, W> g = load_pack<W>(gate + i), u = load_pack<W>(up + i), dy = load_pack<W>(dout + i);
    Pack<bf16, W> dg, du;
#pragma unroll
    for (int k = 0; k < W; k++) {
        const float gf = __bfloat162float(g.v[k]), uf = __bfloat162float(u.v[k]), dyf = __bfloat162float(dy.v[k]);
        dg.v[k] = __float2bfloat16_rn(dyf * a.u(uf) * a.df(gf));
        du.v[k] = __float2bfloat16_rn(dyf * a.f(gf) * a.du(uf));
    }
    store_pack<W>(dgate + i, dg);
    store_pack<W>(dup + i, du);
}

template <class A, int W>
__global__ void forward_kernel(bf16* out, const bf16* gate, const bf16* up, int64_t n, A a) {
    const int64_t packs = n / W;
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < packs; p += stride)
        forward_at<A, W>(out, gate, up, p * W, a);
    if (W > 1 && blockIdx.x == 0)
        for (int64_t i = packs * W + threadIdx.x; i < n; i += blockDim.x) forward_at<A, 1>(out, gate, up, i, a);
}

template <class A, int W>
__global__ void backward_kernel(bf16* dgate, bf16* dup, const bf16* dout, const bf16* gate, const bf16* up,
                                int64_t n, A a) {
    const int64_t packs = n / W;
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < packs; p += stride)
        backward_at<A, W>(dgate, dup, dout, gate, up, p * W, a);
    if (W > 1 && blockIdx.x == 0)
        for (int64_t i = packs * W + threadIdx.x; i < n; i += blockDim.x)
            backward_at<A, 1>(dgate, dup, dout, gate, up, i, a);
}

// ---------------------------------------------------------------------------------------------------------
// kernel launchers

unsigned grid(int64_t units) { return unsigned(std::clamp<int64_t>((units + kThreads - 1) / kThreads, 1, kMaxBlocks)); }

template <class A>
void gated_forward(bf16* out, const bf16* gate, const bf16* up, int N, int F, A a = {}) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(gate);
    TANDEM_KCHECK_PTR(up);
    TANDEM_KCHECK(N > 0 && F > 0);
    const int64_t n = int64_t(N) * F;
    const cudaStream_t s = context().stream;
    if (aligned16(out) && aligned16(gate) && aligned16(up))
        forward_kernel<A, kPack><<<grid(n / kPack), kThreads, 0, s>>>(out, gate, up, n, a);
    else
        forward_kernel<A, 1><<<grid(n), kThreads, 0, s>>>(out, gate, up, n, a);
    TANDEM_CUDA_LAUNCH_CHECK();
}

template <class A>
void gated_backward(bf16* dgate, bf16* dup, const bf16* dout, const bf16* gate, const bf16* up, int N, int F,
                    A a = {}) {
    TANDEM_KCHECK_PTR(dgate);
    TANDEM_KCHECK_PTR(dup);
    TANDEM_KCHECK_PTR(dout);
    TANDEM_KCHECK_PTR(gate);
    TANDEM_KCHECK_PTR(up);
    TANDEM_KCHECK(N > 0 && F > 0);
    const int64_t n = int64_t(N) * F;
    const cudaStream_t s = context().stream;
    if (aligned16(dgate) && aligned16(dup) && aligned16(dout) && aligned16(gate) && aligned16(up))
        backward_kernel<A, kPack><<<grid(n / kPack), kThreads, 0, s>>>(dgate, dup, dout, gate, up, n, a);
    else
        backward_kernel<A, 1><<<grid(n), kThreads, 0, s>>>(dgate, dup, dout, gate, up, n, a);
    TANDEM_CUDA_LAUNCH_CHECK();
}

}  // namespace

void swiglu_forward(bf16* out, const bf16* gate, const bf16* up, int N, int F) {
    gated_forward<Silu>(out, gate, up, N, F);
}
void swiglu_backward(bf16* dgate, bf16* dup, const bf16* dout, const bf16* gate, const bf16* up, int N, int F) {
    gated_backward<Silu>(dgate, dup, dout, gate, up, N, F);
}
void geglu_forward(bf16* out, const bf16* gate, const bf16* up, int N, int F) {
    gated_forward<GeluTanh>(out, gate, up, N, F);
}
void geglu_backward(bf16* dgate, bf16* dup, const bf16* dout, const bf16* gate, const bf16* up, int N, int F) {
    gated_backward<GeluTanh>(dgate, dup, dout, gate, up, N, F);
}

void clamped_swiglu_forward(bf16* out, const bf16* gate, const bf16* up, int N, int F, float alpha, float limit) {
    TANDEM_KCHECK(limit > 0.0f);
    gated_forward(out, gate, up, N, F, ClampedSilu{alpha, limit});
}
void clamped_swiglu_backward(bf16* dgate, bf16* dup, const bf16* dout, const bf16* gate, const bf16* up, int N, int F,
                             float alpha, float limit) {
    TANDEM_KCHECK(limit > 0.0f);
    gated_backward(dgate, dup, dout, gate, up, N, F, ClampedSilu{alpha, limit});
}

}  // namespace tandem::cuda
