// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// 4-bit weights on the CUDA backend (see nf4.h and kernels/cpu/nf4.h).
// Decisions a reader must know:
//  - dequantize_4bit is the hot one (every base projection of a 4-bit model, forward and backward): a thread
//    turns 4 code bytes (one 32-bit load) into 8 bf16 (one 16-byte store) when the range starts on a multiple
//    of 8 elements and the output is 16-byte aligned; 8 consecutive elements never straddle a block (the
//    block sizes are multiples of 8), so a thread looks its block's absmax up once. Other ranges take a
//    per-element path.
//  - dequantize_4bit_fp8 (FP8 GEMMs on 4-bit weights) stages one 128x128 block's bf16 values in shared memory,
//    so that one pass over the 4-bit codes gives the block's amax and either layout of the FP8 codes.
//  - The quantization kernels reproduce bitsandbytes' arithmetic: block max, reciprocal with rcp.approx.ftz,
//    scaled value with mul.ftz, then the NF4 thresholds (x > t picks the upper code) or the 8-bit binary search
//    with fp32 midpoints. One warp per 4-bit block (2 elements per lane; blocksize 64), one 128-thread
//    block per 8-bit block of 256.
#include "kernels/cuda/nf4.h"

#include <algorithm>
#include <cfloat>

#include "core/check.h"
#include "kernels/cuda/fp8.cuh"

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

// dequantize_4bit_fp8: grid (fp8_padded(IN)/128, fp8_blocks(OUT)), 256 threads, one 128x128 block of the slot
// [OUT, IN] (elements first + o * IN + i of the 4-bit tensor) each. Its values (code * absmax rounded to bf16:
// dequantize_4bit's) go into a shared tile (zeros outside the slot), then the block's amax, then its codes in
// the weight's layout or transposed (core/fp8.h). vec: 8 elements from one 32-bit load of codes (first and IN
// multiples of 8, so 8 consecutive elements share a row and a 4-bit block).
constexpr int kFp8TileLd = kFp8Block + 2;  // bf16 per tile row: rows 65 words apart (transposed reads)

template <bool vec>
__global__ void dequantize_fp8_kernel(uint8_t* codes, float* scales, Quant4Ref w, int64_t first, int OUT, int IN,
                                      bool transposed) {
    __shared__ float code[kQuant4Codes];
    __shared__ bf16 tile[kFp8Block][kFp8TileLd];
    __shared__ float part[8];
    if (threadIdx.x < kQuant4Codes) code[threadIdx.x] = w.code[threadIdx.x];
    __syncthreads();
    const int cb = blockIdx.x, band = blockIdx.y;
    const int r0 = band * kFp8Block, c0 = cb * kFp8Block;
    const int rn = min(OUT - r0, kFp8Block), cn = min(IN - c0, kFp8Block);
    float amax = 0.0f;
    if (vec) {
        for (int g = threadIdx.x; g < kFp8Block * kFp8Block / 8; g += blockDim.x) {
            const int o = g / (kFp8Block / 8), i0 = g % (kFp8Block / 8) * 8;
            __nv_bfloat162 v2[4];
            if (o < rn && i0 < cn) {  // cn is a multiple of 8 here
                const int64_t e = first + int64_t(r0 + o) * IN + c0 + i0;
                const float a = block_absmax(w, e / w.blocksize);
                const uint32_t bytes = *reinterpret_cast<const uint32_t*>(w.codes + (e >> 1));
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    const uint32_t byte = (bytes >> (8 * k)) & 0xFF;
                    v2[k] = __halves2bfloat162(__float2bfloat16_rn(code[byte >> 4] * a),
                                               __float2bfloat16_rn(code[byte & 0x0F] * a));
                    amax = amax_of(amax_of(amax, __low2float(v2[k])), __high2float(v2[k]));
                }
            } else {
#pragma unroll
                for (int k = 0; k < 4; ++k) v2[k] = __float2bfloat162_rn(0.0f);
            }
#pragma unroll
            for (int k = 0; k < 4; ++k) *reinterpret_cast<__nv_bfloat162*>(&tile[o][i0 + 2 * k]) = v2[k];
        }
    } else {
        for (int t = threadIdx.x; t < kFp8Block * kFp8Block; t += blockDim.x) {
            const int o = t / kFp8Block, i = t % kFp8Block;
            bf16 b = __float2bfloat16_rn(0.0f);
            if (o < rn && i < cn) {
                const int64_t e = first + int64_t(r0 + o) * IN + c0 + i;
                const uint8_t byte = w.codes[e >> 1];
                b = __float2bfloat16_rn(code[(e & 1) ? (byte & 0x0F) : (byte >> 4)] * block_absmax(w, e / w.blocksize));
                amax = amax_of(amax, __bfloat162float(b));
            }
            tile[o][i] = b;
        }
    }
    const Fp8Scale s = fp8_scale_of(block256_amax(amax, part));  // its barrier also publishes the tile
    auto code4 = [&](float a, float b, float c, float d) {
        return uint32_t(e4m3x2(a * s.inv, b * s.inv)) | uint32_t(e4m3x2(c * s.inv, d * s.inv)) << 16;
    };
    if (!transposed) {
        const int64_t INp = fp8_padded(IN), cols = INp / kFp8Block, ld = fp8_scale_ld(IN);
        if (threadIdx.x == 0) scales[int64_t(band) * ld + cb] = s.scale;
        if (cb == cols - 1 && threadIdx.x < ld - cols) scales[int64_t(band) * ld + cols + threadIdx.x] = 1.0f;
        for (int t = threadIdx.x; t < kFp8Block * kFp8Block / 4; t += blockDim.x) {
            const int o = t / (kFp8Block / 4), i = t % (kFp8Block / 4) * 4;
            if (o >= rn) continue;
            const bf16* v = &tile[o][i];
            *reinterpret_cast<uint32_t*>(codes + int64_t(r0 + o) * INp + c0 + i) =
                code4(__bfloat162float(v[0]), __bfloat162float(v[1]), __bfloat162float(v[2]), __bfloat162float(v[3]));
        }
    } else {
        const int64_t OUTp = fp8_padded(OUT), bands = OUTp / kFp8Block, ld = fp8_scale_ld(OUT);
        if (threadIdx.x == 0) scales[int64_t(cb) * ld + band] = s.scale;
        if (band == bands - 1 && threadIdx.x < ld - bands) scales[int64_t(cb) * ld + bands + threadIdx.x] = 1.0f;
        for (int t = threadIdx.x; t < kFp8Block * kFp8Block / 4; t += blockDim.x) {
            const int i = t / (kFp8Block / 4), o = t % (kFp8Block / 4) * 4;
            if (i >= cn) continue;
            *reinterpret_cast<uint32_t*>(codes + int64_t(c0 + i) * OUTp + r0 + o) =
                code4(__bfloat162float(tile[o][i]), __bfloat162float(tile[o + 1][i]), __bfloat162float(tile[o + 2][i]),
                      __bfloat162float(tile[o + 3][i]));
        }
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

void dequantize_4bit_fp8(uint8_t* codes, float* scales, const Quant4Ref& w, int64_t first, int OUT, int IN,
                         bool transposed) {
    TANDEM_KCHECK_PTR(codes);
    TANDEM_KCHECK_PTR(scales);
    TANDEM_KCHECK_PTR(w.codes);
    TANDEM_KCHECK_PTR(w.code);
    TANDEM_KCHECK(w.absmax_q ? (w.nested_code && w.nested_absmax && w.offset) : w.absmax != nullptr);
    TANDEM_KCHECK(w.blocksize > 0 && w.blocksize % 8 == 0 && w.nested_blocksize > 0);
    TANDEM_KCHECK(OUT > 0 && IN > 0 && first >= 0 && first + int64_t(OUT) * IN <= w.n);
    const dim3 g(unsigned(fp8_blocks(IN)), unsigned(fp8_blocks(OUT)));
    const cudaStream_t s = context().stream;
    if (first % 8 == 0 && IN % 8 == 0 && reinterpret_cast<uintptr_t>(w.codes) % 4 == 0)
        dequantize_fp8_kernel<true><<<g, kThreads, 0, s>>>(codes, scales, w, first, OUT, IN, transposed);
    else
        dequantize_fp8_kernel<false><<<g, kThreads, 0, s>>>(codes, scales, w, first, OUT, IN, transposed);
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
