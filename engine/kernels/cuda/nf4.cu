// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// 4-bit weights on the CUDA backend (see nf4.h and kernels/cpu/nf4.h).
// Decisions a reader must know:
//  - dequantize_4bit is the hot one (every base projection of a 4-bit model, forward and backward): a thread
//    turns 4 code bytes (one 32-bit load) into 8 bf16 (one 16-byte store) when the range starts on a multiple
//    of 8 elements and the output is 16-byte aligned; 8 consecutive elements never straddle a block (the
//    block sizes are multiples of 8), so a thread looks its block's absmax up once. Other ranges take a
//    per-element path.
//  - The quantization kernels reproduce bitsandbytes' arithmetic: block max, reciprocal with rcp.approx.ftz,
//    scaled value with mul.ftz, then the NF4 thresholds (x > t picks the upper code) or the 8-bit binary search
//    with fp32 midpoints. One warp per 4-bit block (2 elements per lane; blocksize 64), one 128-thread
//    block per 8-bit block of 256.
#include "kernels/cuda/nf4.h"

#include <algorithm>
#include <cfloat>

#include "core/check.h"

namespace tandem::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 16;

struct Nf4Thresholds {
    float t[kQuant4Codes - 1];
};

__device__ inline float rcp_approx(float x) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
__device__ inline float mul_ftz(float a, float b) {
    float r;
    asm("mul.rn.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

__device__ inline float block_absmax(const Quant4Ref& w, int64_t b) {
    if (!w.absmax_q) return w.absmax[b];
    // A product, then a sum, each rounded (bitsandbytes dequantizes, then adds the offset): no FMA.
    return __fadd_rn(__fmul_rn(__ldg(&w.nested_code[w.absmax_q[b]]), __ldg(&w.nested_absmax[b / w.nested_blocksize])),
                     w.offset[0]);
}

// 8 elements from 4 bytes (first % 8 == 0 relative to the tensor).
__global__ void dequantize8_kernel(bf16* out, Quant4Ref w, int64_t first, int64_t groups) {
    __shared__ float code[kQuant4Codes];
    if (threadIdx.x < kQuant4Codes) code[threadIdx.x] = w.code[threadIdx.x];
    __syncthreads();
    for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < groups; g += int64_t(gridDim.x) * blockDim.x) {
        const int64_t e = first + g * 8;
        const float a = block_absmax(w, e / w.blocksize);
        const uint32_t bytes = *reinterpret_cast<const uint32_t*>(w.codes + (e >> 1));
        alignas(16) bf16 v[8];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const uint32_t byte = (bytes >> (8 * k)) & 0xFF;
            v[2 * k] = __float2bfloat16_rn(code[byte >> 4] * a);
            v[2 * k + 1] = __float2bfloat16_rn(code[byte & 0x0F] * a);
        }
        *reinterpret_cast<uint4*>(out + g * 8) = *reinterpret_cast<const uint4*>(v);
    }
}

__global__ void dequantize1_kernel(bf16* out, Quant4Ref w, int64_t first, int64_t count) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t e = first + i;
        const uint8_t byte = w.codes[e >> 1];
        const uint8_t c = (e & 1) ? uint8_t(byte & 0x0F) : uint8_t(byte >> 4);
        out[i] = __float2bfloat16_rn(w.code[c] * block_absmax(w, e / w.blocksize));
    }
}

__device__ inline uint8_t nf4_code_of(const Nf4Thresholds& t, float x) { return nf4_code_from(t.t, x); }

// One warp per block of 64 elements: lane l holds elements 2l and 2l+1.
__global__ void quantize4_kernel(uint8_t* codes, float* absmax, const float* in, int64_t n, int64_t blocks,
                                 Nf4Thresholds t) {
    const int lane = threadIdx.x & 31;
    const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
    for (int64_t b = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32; b < blocks; b += warps) {
        const int64_t e = b * 64 + 2 * lane;
        const float x0 = e < n ? in[e] : 0.0f;
        const float x1 = e + 1 < n ? in[e + 1] : 0.0f;
        float m = fmaxf(-FLT_MAX, fmaxf(fabsf(x0), fabsf(x1)));
        if (e >= n) m = -FLT_MAX;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        if (lane == 0) absmax[b] = m;
        const float r = rcp_approx(m);
        if (e < n) codes[e >> 1] = uint8_t((nf4_code_of(t, mul_ftz(x0, r)) << 4) | nf4_code_of(t, mul_ftz(x1, r)));
    }
}


// One CUDA block of 128 threads per quantization block of 256 (2 elements per thread).
__global__ void quantize8_kernel(uint8_t* q, float* block_absmax, const float* in, float offset, const float* code_g,
                                 int64_t n) {
    __shared__ float code[kNestedCodes];
    __shared__ float warp_max[4];
    __shared__ float rcp;
    for (int i = threadIdx.x; i < kNestedCodes; i += blockDim.x) code[i] = code_g[i];
    const int64_t base = int64_t(blockIdx.x) * 256;
    const int64_t e = base + 2 * threadIdx.x;
    const float x0 = e < n ? in[e] - offset : 0.0f;
    const float x1 = e + 1 < n ? in[e + 1] - offset : 0.0f;
    float m = e < n ? fmaxf(fabsf(x0), e + 1 < n ? fabsf(x1) : -FLT_MAX) : -FLT_MAX;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x / 32] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        const float a = fmaxf(fmaxf(warp_max[0], warp_max[1]), fmaxf(warp_max[2], warp_max[3]));
        block_absmax[blockIdx.x] = a;
        rcp = rcp_approx(a);
    }
    __syncthreads();
    const float r = rcp;
    if (e < n) q[e] = code8_of(code, mul_ftz(x0, r));
    if (e + 1 < n) q[e + 1] = code8_of(code, mul_ftz(x1, r));
}

unsigned grid(int64_t units, int per_block = kThreads) {
    return unsigned(std::clamp<int64_t>((units + per_block - 1) / per_block, 1, kMaxBlocks));
}

}  // namespace

void dequantize_4bit(bf16* out, const Quant4Ref& w, int64_t first, int64_t count) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(w.codes);
    TANDEM_KCHECK_PTR(w.code);
    TANDEM_KCHECK(w.absmax_q ? (w.nested_code && w.nested_absmax && w.offset) : w.absmax != nullptr);
    TANDEM_KCHECK(w.blocksize > 0 && w.blocksize % 8 == 0 && w.nested_blocksize > 0);
    TANDEM_KCHECK(first >= 0 && count >= 0 && first + count <= w.n);
    if (count == 0) return;
    const cudaStream_t s = context().stream;
    if (first % 8 == 0 && count % 8 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0 &&
        reinterpret_cast<uintptr_t>(w.codes) % 4 == 0)
        dequantize8_kernel<<<grid(count / 8), kThreads, 0, s>>>(out, w, first, count / 8);
    else
        dequantize1_kernel<<<grid(count), kThreads, 0, s>>>(out, w, first, count);
    TANDEM_CUDA_LAUNCH_CHECK();
}

void quantize_4bit(uint8_t* codes, float* absmax, const float* in, int64_t n, int blocksize) {
    TANDEM_KCHECK_PTR(codes);
    TANDEM_KCHECK_PTR(absmax);
    TANDEM_KCHECK_PTR(in);
    TANDEM_KCHECK(n > 0 && blocksize == 64);
    Nf4Thresholds t;
    for (int i = 0; i < kQuant4Codes - 1; ++i) t.t[i] = nf4_thresholds()[size_t(i)];
    const int64_t blocks = quant4_blocks(n, blocksize);
    quantize4_kernel<<<grid(blocks, kThreads / 32), kThreads, 0, context().stream>>>(codes, absmax, in, n, blocks, t);
    TANDEM_CUDA_LAUNCH_CHECK();
}

void quantize_blockwise_8bit(uint8_t* q, float* block_absmax, const float* in, float offset, const float* code,
                             int64_t n, int blocksize) {
    TANDEM_KCHECK_PTR(q);
    TANDEM_KCHECK_PTR(block_absmax);
    TANDEM_KCHECK_PTR(in);
    TANDEM_KCHECK_PTR(code);
    TANDEM_KCHECK(n > 0 && blocksize == 256);
    const int64_t blocks = quant4_blocks(n, blocksize);
    TANDEM_KCHECK(blocks < (int64_t(1) << 31));
    quantize8_kernel<<<unsigned(blocks), 128, 0, context().stream>>>(q, block_absmax, in, offset, code, n);
    TANDEM_CUDA_LAUNCH_CHECK();
}

}  // namespace tandem::cuda
