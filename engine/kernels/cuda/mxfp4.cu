// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// MXFP4 dequantization on the CUDA backend (see mxfp4.h). One thread per 16 code bytes (a 16-byte load; 32
// values, one scale) writing 32 bf16 (four 16-byte stores): the kernel is bandwidth-bound like a copy.
#include "kernels/cuda/mxfp4.h"
#include "kernels/cuda/vec.cuh"

#include <algorithm>

#include "core/check.h"
#include "core/mxfp4.h"
#include "core/random.h"

namespace tandem::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void dequantize_kernel(bf16* __restrict__ out, const uint8_t* __restrict__ codes,
                                  const uint8_t* __restrict__ scales, int64_t blocks, int rows, int cols,
                                  bool interleaved) {
    const int per_row = cols / kMxfp4Block;
    for (int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks;
         b += int64_t(gridDim.x) * blockDim.x) {
        const int64_t gr = b / per_row;  // (group, row) as stored
        const int j = int(b % per_row);
        const int64_t g = gr / rows;
        const int r = int(gr % rows);
        const int dst = interleaved ? (r % 2 == 0 ? r / 2 : rows / 2 + r / 2) : r;
        const uint4 raw = *reinterpret_cast<const uint4*>(codes + b * (kMxfp4Block / 2));
        const float s = e8m0_scale(scales[b]);
        const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
        __align__(16) bf16 v[kMxfp4Block];
#pragma unroll
        for (int k = 0; k < 16; ++k) {
            const uint8_t byte = uint8_t(words[k / 4] >> (8 * (k % 4)));
            v[2 * k] = __float2bfloat16_rn(e2m1_value(uint8_t(byte & 15)) * s);
            v[2 * k + 1] = __float2bfloat16_rn(e2m1_value(uint8_t(byte >> 4)) * s);
        }
        uint4* o = reinterpret_cast<uint4*>(out + (g * rows + dst) * int64_t(cols) + int64_t(j) * kMxfp4Block);
        const uint4* src = reinterpret_cast<const uint4*>(v);
#pragma unroll
        for (int k = 0; k < 4; ++k) o[k] = src[k];
    }
}

__global__ void fill_kernel(uint8_t* codes, uint8_t* scales, int64_t code_bytes, uint64_t seed, uint8_t scale) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < code_bytes;
         i += int64_t(gridDim.x) * blockDim.x) {
        codes[i] = uint8_t(splitmix64_mix(seed ^ uint64_t(i)));
        if (i % (kMxfp4Block / 2) == 0) scales[i / (kMxfp4Block / 2)] = scale;
    }
}

unsigned grid(int64_t units) { return unsigned(std::clamp<int64_t>((units + kThreads - 1) / kThreads, 1, 1 << 16)); }

}  // namespace

void dequantize_mxfp4(bf16* out, const uint8_t* codes, const uint8_t* scales, int64_t groups, int rows, int cols,
                      bool interleaved) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(codes);
    TANDEM_KCHECK_PTR(scales);
    TANDEM_KCHECK(groups > 0 && rows > 0 && cols > 0 && cols % kMxfp4Block == 0);
    TANDEM_KCHECK(!interleaved || rows % 2 == 0);
    TANDEM_KCHECK(aligned16(out) && aligned16(codes));
    const int64_t blocks = groups * rows * (cols / kMxfp4Block);
    dequantize_kernel<<<grid(blocks), kThreads, 0, context().stream>>>(out, codes, scales, blocks, rows, cols,
                                                                      interleaved);
    TANDEM_CUDA_LAUNCH_CHECK();
}

void fill_random_mxfp4(uint8_t* codes, uint8_t* scales, int64_t code_bytes, uint64_t seed, uint8_t scale) {
    TANDEM_KCHECK_PTR(codes);
    TANDEM_KCHECK_PTR(scales);
    TANDEM_KCHECK(code_bytes > 0 && code_bytes % (kMxfp4Block / 2) == 0);
    fill_kernel<<<grid(code_bytes), kThreads, 0, context().stream>>>(codes, scales, code_bytes, seed, scale);
    TANDEM_CUDA_LAUNCH_CHECK();
}

}  // namespace tandem::cuda
