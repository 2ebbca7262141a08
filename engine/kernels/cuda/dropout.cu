// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// LoRA dropout on the CUDA backend (see dropout.h). n = element count.
// Decisions: the keep test is core/random.h's dropout_uniform (u >= p, in double, as on the CPU) and the
// scale float(1.0 / (1.0 - p)) is computed on the host as on the CPU, so both backends keep the same
// elements and scale them identically; backward's multiply-add is kept unfused (__fmul_rn/__fadd_rn) so it
// rounds as the CPU does. Grid-stride over packs of 8 elements (16-byte loads) when aligned;
// the hash, not memory, is the cost.
#include "kernels/cuda/dropout.h"

#include <algorithm>
#include <cstdint>

#include "core/random.h"
#include "kernels/cuda/vec.cuh"

namespace tandem::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kPack = 8;
constexpr int64_t kMaxBlocks = 1 << 16;

struct Mask {
    uint64_t seed;
    int layer, module;
    double p;
    float inv;  // 1 / (1 - p)
    __device__ bool keep(int64_t i) const { return dropout_uniform(seed, layer, module, uint64_t(i)) >= p; }
};

// ---------------------------------------------------------------------------------------------------------
// CUDA kernels

// out[i..i+W) = inp * keep * inv
template <int W>
__device__ inline void forward_at(bf16* out, const bf16* inp, const Mask& m, int64_t i) {
    const Pack<bf16, W> x = *reinterpret_cast<const Pack<bf16, W>*>(inp + i);
    Pack<bf16, W> y;
#pragma unroll
    for (int k = 0; k < W; k++)
        y.v[k] = m.keep(i + k) ? __float2bfloat16_rn(__bfloat162float(x.v[k]) * m.inv) : __float2bfloat16_rn(0.0f);
    *reinterpret_cast<Pack<bf16, W>*>(out + i) = y;
}

// dinp[i..i+W) += dout * keep * inv (dropped elements are left as they are)
template <int W>
__device__ inline void backward_at(bf16* dinp, const bf16* dout, const Mask& m, int64_t i) {
    const Pack<bf16, W> dy = *reinterpret_cast<const Pack<bf16, W>*>(dout + i);
    Pack<bf16, W> d = *reinterpret_cast<const Pack<bf16, W>*>(dinp + i);
#pragma unroll
    for (int k = 0; k < W; k++)
        if (m.keep(i + k))
            d.v[k] = __float2bfloat16_rn(__fadd_rn(__bfloat162float(d.v[k]), __fmul_rn(__bfloat162float(dy.v[k]), m.inv)));
    *reinterpret_cast<Pack<bf16, W>*>(dinp + i) = d;
}

// seed_device: when set, the seed is read there (m.seed ignored).
template <int W, bool BACKWARD>
__global__ void dropout_kernel(bf16* out, const bf16* inp, Mask m, const uint64_t* seed_device, int64_t n) {
    if (seed_device) m.seed = *seed_device;
    const int64_t packs = n / W;
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < packs; p += stride) {
        if constexpr (BACKWARD)
            backward_at<W>(out, inp, m, p * W);
        else
            forward_at<W>(out, inp, m, p * W);
    }
    if (W > 1 && blockIdx.x == 0)
        for (int64_t i = packs * W + threadIdx.x; i < n; i += blockDim.x) {
            if constexpr (BACKWARD)
                backward_at<1>(out, inp, m, i);
            else
                forward_at<1>(out, inp, m, i);
        }
}

// ---------------------------------------------------------------------------------------------------------
// kernel launchers

unsigned grid(int64_t units) { return unsigned(std::clamp<int64_t>((units + kThreads - 1) / kThreads, 1, kMaxBlocks)); }

template <bool BACKWARD>
void dropout_launch(bf16* out, const bf16* inp, uint64_t seed, const uint64_t* seed_device, int layer, int module,
                    int64_t n, double p) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(inp);
    TANDEM_KCHECK(n >= 0);
    TANDEM_KCHECK(p >= 0.0 && p <= 1.0);  // p = 1 drops everything, as on the CPU
    if (n == 0) return;
    const Mask m{seed, layer, module, p, float(1.0 / (1.0 - p))};
    const cudaStream_t s = context().stream;
    if (aligned16(out) && aligned16(inp))
        dropout_kernel<kPack, BACKWARD><<<grid(n / kPack), kThreads, 0, s>>>(out, inp, m, seed_device, n);
    else
        dropout_kernel<1, BACKWARD><<<grid(n), kThreads, 0, s>>>(out, inp, m, seed_device, n);
    TANDEM_CUDA_LAUNCH_CHECK();
}

}  // namespace

void dropout_forward(bf16* out, const bf16* inp, uint64_t seed, int layer, int module, int64_t n, double p) {
    dropout_launch<false>(out, inp, seed, nullptr, layer, module, n, p);
}

void dropout_backward(bf16* dinp, const bf16* dout, uint64_t seed, int layer, int module, int64_t n, double p) {
    dropout_launch<true>(dinp, dout, seed, nullptr, layer, module, n, p);
}

void dropout_forward(bf16* out, const bf16* inp, const uint64_t* seed_device, int layer, int module, int64_t n,
                     double p) {
    TANDEM_KCHECK_PTR(seed_device);
    dropout_launch<false>(out, inp, 0, seed_device, layer, module, n, p);
}

void dropout_backward(bf16* dinp, const bf16* dout, const uint64_t* seed_device, int layer, int module, int64_t n,
                      double p) {
    TANDEM_KCHECK_PTR(seed_device);
    dropout_launch<true>(dinp, dout, 0, seed_device, layer, module, n, p);
}

}  // namespace tandem::cuda
