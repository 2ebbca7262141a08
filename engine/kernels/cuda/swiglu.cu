// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The gated MLP activations on the CUDA backend (see swiglu.h): SwiGLU and GeGLU, one kernel pair templated on
// the activation. N = rows, F = features.
// activation_forward_fp8 / activation_backward_fp8 (FP8 models): the same math, each output also quantized for the
// FP8 GEMM it feeds, in the same pass (fused where F % 128 == 0: the quantization's read of the output saved).
// Decisions: grid-stride over packs of 8 elements (16-byte loads) when every pointer is aligned, single
// elements otherwise; block 0 does the n % 8 tail. A thread loads all its inputs before it stores, so the
// allowed aliasing (out = gate or up; dgate = gate, dup = up) is safe. The math is the CPU's, in fp32, with
// expf (not __expf): sigmoid = 1 / (1 + expf(-g)), which is 0 for g < -88 as on the CPU; tanhf for the GELU.
#include "kernels/cuda/swiglu.h"

#include "kernels/cuda/fp8.cuh"
#include "kernels/cuda/fp8.h"
#include "kernels/cuda/vec.cuh"

#include <algorithm>
#include <cstdint>
#include <initializer_list>

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

// W elements of the activation from element i, and of its two gradients (the math of every kernel here).
template <class A, int W>
__device__ inline Pack<bf16, W> activation_pack(const bf16* gate, const bf16* up, int64_t i, A a) {
    const Pack<bf16, W> g = load_pack<W>(gate + i), u = load_pack<W>(up + i);
    Pack<bf16, W> y;
#pragma unroll
    for (int k = 0; k < W; k++) y.v[k] = __float2bfloat16_rn(a.f(__bfloat162float(g.v[k])) * a.u(__bfloat162float(u.v[k])));
    return y;
}
template <class A, int W>
__device__ inline void gradient_packs(Pack<bf16, W>& dg, Pack<bf16, W>& du, const bf16* dout, const bf16* gate,
                                      const bf16* up, int64_t i, A a) {
    const Pack<bf16, W> g = load_pack<W>(gate + i), u = load_pack<W>(up + i), dy = load_pack<W>(dout + i);
#pragma unroll
    for (int k = 0; k < W; k++) {
        const float gf = __bfloat162float(g.v[k]), uf = __bfloat162float(u.v[k]), dyf = __bfloat162float(dy.v[k]);
        dg.v[k] = __float2bfloat16_rn(dyf * a.u(uf) * a.df(gf));
        du.v[k] = __float2bfloat16_rn(dyf * a.f(gf) * a.du(uf));
    }
}

template <class A, int W>
__device__ inline void forward_at(bf16* out, const bf16* gate, const bf16* up, int64_t i, A a) {
    store_pack<W>(out + i, activation_pack<A, W>(gate, up, i, a));
}

template <class A, int W>
__device__ inline void backward_at(bf16* dgate, bf16* dup, const bf16* dout, const bf16* gate, const bf16* up,
                                   int64_t i, A a) {
    Pack<bf16, W> dg, du;
    gradient_packs<A, W>(dg, du, dout, gate, up, i, a);
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

// FP8 models: the activation (forward) or its two gradients (backward), each also quantized for the FP8 GEMM it
// feeds, in quantize_fp8_rows' layout (core/fp8.h), from the bf16 values stored: so the same codes as
// quantize_fp8_rows of the output. grid (ceil(code_rows * F/128 / 16)), 256 threads: a half-warp per (row,
// 128-column block) as quantize_rows_kernel, 8 elements (16-byte loads) per lane; F % 128 == 0. Pad rows (up to a
// multiple of 16) get codes 0 and scale 1.
template <class A>
__global__ void forward_fp8_kernel(bf16* out, uint8_t* codes, float* scales, const bf16* gate, const bf16* up, int N,
                                   int cols, int64_t code_rows, A a) {
    const auto [r, cb, live, pad] = fp8_row_item(code_rows, cols, N);
    float v[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    if (!pad) {
        const int64_t i = r * int64_t(cols) * kFp8Block + cb * kFp8Block + threadIdx.x % 16 * 8;
        const Pack<bf16, kPack> y = activation_pack<A, kPack>(gate, up, i, a);
#pragma unroll
        for (int k = 0; k < kPack; k++) v[k] = __bfloat162float(y.v[k]);
        store_pack<kPack>(out + i, y);
    }
    store_fp8_row_block(codes, scales, v, r, cb, N, cols, pad ? 0 : kPack, live);
}

template <class A>
__global__ void backward_fp8_kernel(bf16* dgate, bf16* dup, uint8_t* gate_codes, float* gate_scales, uint8_t* up_codes,
                                    float* up_scales, const bf16* dout, const bf16* gate, const bf16* up, int N,
                                    int cols, int64_t code_rows, A a) {
    const auto [r, cb, live, pad] = fp8_row_item(code_rows, cols, N);
    float vg[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f},
          vu[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    if (!pad) {
        const int64_t i = r * int64_t(cols) * kFp8Block + cb * kFp8Block + threadIdx.x % 16 * 8;
        Pack<bf16, kPack> dg, du;
        gradient_packs<A, kPack>(dg, du, dout, gate, up, i, a);
#pragma unroll
        for (int k = 0; k < kPack; k++) {
            vg[k] = __bfloat162float(dg.v[k]);
            vu[k] = __bfloat162float(du.v[k]);
        }
        store_pack<kPack>(dgate + i, dg);
        store_pack<kPack>(dup + i, du);
    }
    store_fp8_row_block(gate_codes, gate_scales, vg, r, cb, N, cols, pad ? 0 : kPack, live);
    store_fp8_row_block(up_codes, up_scales, vu, r, cb, N, cols, pad ? 0 : kPack, live);
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

// The fused kernels where F is a multiple of 128 and every pointer 16-byte aligned (the decoder's buffers); else the
// activation, then quantize_fp8_rows of what it wrote (the same codes).
bool fused_fp8(int F, std::initializer_list<const void*> ptrs) {
    if (F % kFp8Block != 0) return false;
    for (const void* p : ptrs)
        if (!aligned16(p)) return false;
    return true;
}

template <class A>
void gated_forward_fp8(bf16* out, uint8_t* codes, float* scales, const bf16* gate, const bf16* up, int N, int F) {
    TANDEM_KCHECK_PTR(codes);
    TANDEM_KCHECK_PTR(scales);
    if (!fused_fp8(F, {out, gate, up})) {
        gated_forward<A>(out, gate, up, N, F);
        quantize_fp8_rows(codes, scales, out, N, F);
        return;
    }
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(gate);
    TANDEM_KCHECK_PTR(up);
    TANDEM_KCHECK(N > 0);
    const int cols = F / kFp8Block;
    const int64_t code_rows = fp8_code_rows(N), items = code_rows * cols;
    forward_fp8_kernel<A><<<unsigned((items + 15) / 16), kThreads, 0, context().stream>>>(out, codes, scales, gate, up,
                                                                                          N, cols, code_rows, A{});
    TANDEM_CUDA_LAUNCH_CHECK();
}

template <class A>
void gated_backward_fp8(bf16* dgate, bf16* dup, uint8_t* gate_codes, float* gate_scales, uint8_t* up_codes,
                        float* up_scales, const bf16* dout, const bf16* gate, const bf16* up, int N, int F) {
    TANDEM_KCHECK_PTR(gate_codes);
    TANDEM_KCHECK_PTR(gate_scales);
    TANDEM_KCHECK_PTR(up_codes);
    TANDEM_KCHECK_PTR(up_scales);
    if (!fused_fp8(F, {dgate, dup, dout, gate, up})) {
        gated_backward<A>(dgate, dup, dout, gate, up, N, F);
        quantize_fp8_rows(gate_codes, gate_scales, dgate, N, F);
        quantize_fp8_rows(up_codes, up_scales, dup, N, F);
        return;
    }
    TANDEM_KCHECK_PTR(dgate);
    TANDEM_KCHECK_PTR(dup);
    TANDEM_KCHECK_PTR(dout);
    TANDEM_KCHECK_PTR(gate);
    TANDEM_KCHECK_PTR(up);
    TANDEM_KCHECK(N > 0);
    const int cols = F / kFp8Block;
    const int64_t code_rows = fp8_code_rows(N), items = code_rows * cols;
    backward_fp8_kernel<A><<<unsigned((items + 15) / 16), kThreads, 0, context().stream>>>(
        dgate, dup, gate_codes, gate_scales, up_codes, up_scales, dout, gate, up, N, cols, code_rows, A{});
    TANDEM_CUDA_LAUNCH_CHECK();
}

}  // namespace

void activation_forward_fp8(bf16* out, uint8_t* codes, float* scales, const bf16* gate, const bf16* up, int N, int F,
                            bool gelu) {
    if (gelu)
        gated_forward_fp8<GeluTanh>(out, codes, scales, gate, up, N, F);
    else
        gated_forward_fp8<Silu>(out, codes, scales, gate, up, N, F);
}
void activation_backward_fp8(bf16* dgate, bf16* dup, uint8_t* gate_codes, float* gate_scales, uint8_t* up_codes,
                             float* up_scales, const bf16* dout, const bf16* gate, const bf16* up, int N, int F,
                             bool gelu) {
    if (gelu)
        gated_backward_fp8<GeluTanh>(dgate, dup, gate_codes, gate_scales, up_codes, up_scales, dout, gate, up, N, F);
    else
        gated_backward_fp8<Silu>(dgate, dup, gate_codes, gate_scales, up_codes, up_scales, dout, gate, up, N, F);
}

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
