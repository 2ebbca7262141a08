// SwiGLU on the CUDA backend (see swiglu.h). N = rows, F = features.
// Decisions: grid-stride over packs of 8 elements (16-byte loads) when every pointer is aligned, single
// elements otherwise; block 0 does the n % 8 tail. A thread loads all its inputs before it stores, so the
// allowed aliasing (out = gate or up; dgate = gate, dup = up) is safe. The math is the CPU's, in fp32, with
// expf (not __expf): sigmoid = 1 / (1 + expf(-g)), which is 0 for g < -88 as on the CPU.
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

template <int W>
__device__ inline void swiglu_forward_at(bf16* out, const bf16* gate, const bf16* up, int64_t i) {
    const Pack<bf16, W> g = load_pack<W>(gate + i), u = load_pack<W>(up + i);
    Pack<bf16, W> y;
#pragma unroll
    for (int k = 0; k < W; k++) {
        const float gf = __bfloat162float(g.v[k]);
        const float sig = 1.0f / (1.0f + expf(-gf));
        y.v[k] = __float2bfloat16_rn(gf * sig * __bfloat162float(u.v[k]));
    }
    store_pack<W>(out + i, y);
}

template <int W>
__device__ inline void swiglu_backward_at(bf16* dgate, bf16* dup, const bf16* dout, const bf16* gate, const bf16* up,
                                          int64_t i) {
    const Pack<bf16, W> g = load_pack<W>(gate + i), u = load_pack<W>(up + i), dy = load_pack<W>(dout + i);
    Pack<bf16, W> dg, du;
#pragma unroll
    for (int k = 0; k < W; k++) {
        const float gf = __bfloat162float(g.v[k]), uf = __bfloat162float(u.v[k]), dyf = __bfloat162float(dy.v[k]);
        const float sig = 1.0f / (1.0f + expf(-gf));
        const float silu = gf * sig;
        // d silu / dg = sig * (1 + g * (1 - sig))
        dg.v[k] = __float2bfloat16_rn(dyf * uf * sig * (1.0f + gf * (1.0f - sig)));
        du.v[k] = __float2bfloat16_rn(dyf * silu);
    }
    store_pack<W>(dgate + i, dg);
    store_pack<W>(dup + i, du);
}

template <int W>
__global__ void swiglu_forward_kernel(bf16* out, const bf16* gate, const bf16* up, int64_t n) {
    const int64_t packs = n / W;
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < packs; p += stride)
        swiglu_forward_at<W>(out, gate, up, p * W);
    if (W > 1 && blockIdx.x == 0)
        for (int64_t i = packs * W + threadIdx.x; i < n; i += blockDim.x) swiglu_forward_at<1>(out, gate, up, i);
}

template <int W>
__global__ void swiglu_backward_kernel(bf16* dgate, bf16* dup, const bf16* dout, const bf16* gate, const bf16* up,
                                       int64_t n) {
    const int64_t packs = n / W;
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < packs; p += stride)
        swiglu_backward_at<W>(dgate, dup, dout, gate, up, p * W);
    if (W > 1 && blockIdx.x == 0)
        for (int64_t i = packs * W + threadIdx.x; i < n; i += blockDim.x)
            swiglu_backward_at<1>(dgate, dup, dout, gate, up, i);
}

// ---------------------------------------------------------------------------------------------------------
// kernel launchers

unsigned grid(int64_t units) { return unsigned(std::clamp<int64_t>((units + kThreads - 1) / kThreads, 1, kMaxBlocks)); }

}  // namespace

void swiglu_forward(bf16* out, const bf16* gate, const bf16* up, int N, int F) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(gate);
    TANDEM_KCHECK_PTR(up);
    TANDEM_KCHECK(N > 0 && F > 0);
    const int64_t n = int64_t(N) * F;
    const cudaStream_t s = context().stream;
    if (aligned16(out) && aligned16(gate) && aligned16(up))
        swiglu_forward_kernel<kPack><<<grid(n / kPack), kThreads, 0, s>>>(out, gate, up, n);
    else
        swiglu_forward_kernel<1><<<grid(n), kThreads, 0, s>>>(out, gate, up, n);
    TANDEM_CUDA_LAUNCH_CHECK();
}

void swiglu_backward(bf16* dgate, bf16* dup, const bf16* dout, const bf16* gate, const bf16* up, int N, int F) {
    TANDEM_KCHECK_PTR(dgate);
    TANDEM_KCHECK_PTR(dup);
    TANDEM_KCHECK_PTR(dout);
    TANDEM_KCHECK_PTR(gate);
    TANDEM_KCHECK_PTR(up);
    TANDEM_KCHECK(N > 0 && F > 0);
    const int64_t n = int64_t(N) * F;
    const cudaStream_t s = context().stream;
    if (aligned16(dgate) && aligned16(dup) && aligned16(dout) && aligned16(gate) && aligned16(up))
        swiglu_backward_kernel<kPack><<<grid(n / kPack), kThreads, 0, s>>>(dgate, dup, dout, gate, up, n);
    else
        swiglu_backward_kernel<1><<<grid(n), kThreads, 0, s>>>(dgate, dup, dout, gate, up, n);
    TANDEM_CUDA_LAUNCH_CHECK();
}

}  // namespace tandem::cuda
