// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Device helpers of the FP8 kernels (.cu files only: fp8.cu's quantizations, nf4.cu's dequantization of 4-bit
// weights straight to FP8): a block's amax with NaN kept visible, and the E4M3 rounding (core/fp8.h).
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

#include "core/fp8.h"

namespace tandem::cuda {

inline constexpr unsigned kFp8FullMask = 0xFFFFFFFFu;

// max(amax, |x|); NaN once any element is NaN or infinite (the block's scale becomes NaN: core/fp8.h).
__device__ inline float amax_of(float amax, float x) {
    const float a = fabsf(x);
    if (!(a <= 3.4e38f)) return __int_as_float(0x7FC00000);
    return isnan(amax) ? amax : fmaxf(amax, a);
}

// The larger of two partial amaxes, NaN if either is.
__device__ inline float amax_max(float a, float b) {
    return isnan(a) || isnan(b) ? __int_as_float(0x7FC00000) : fmaxf(a, b);
}

__device__ inline float warp_amax(float v) {
    for (int o = 16; o > 0; o >>= 1) v = amax_max(v, __shfl_xor_sync(kFp8FullMask, v, o));
    return v;
}

// The amax over a 256-thread block (every thread calls it; part: 8 floats of shared memory).
__device__ inline float block256_amax(float v, float* part) {
    v = warp_amax(v);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    float a = part[0];
    for (int i = 1; i < 8; ++i) a = amax_max(a, part[i]);
    return a;
}

// Two E4M3 codes (a in the low byte): the GPU's cvt.rn.satfinite where it has one (sm_89+), the shared
// software rounding elsewhere; the same codes for every finite input (round to nearest even, saturating).
__device__ inline uint16_t e4m3x2(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    return uint16_t(__nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3));
#else
    return uint16_t(e4m3_code(a) | uint32_t(e4m3_code(b)) << 8);
#endif
}

// The (row r, 128-column block cb) item of this half-warp in a row quantization's grid of code_rows x cols items
// (two per warp; consecutive half-warps take consecutive rows of one block column, so their scales, contiguous per
// block column in the VEC128 layout, are stored together). live: the item exists (a lane without one still takes
// part in store_fp8_row_block's shuffles); pad: nothing to read (no item, or a pad row >= rows).
struct Fp8RowItem {
    int64_t r;
    int cb;
    bool live, pad;
};
__device__ inline Fp8RowItem fp8_row_item(int64_t code_rows, int cols, int rows) {
    const int64_t item = int64_t(blockIdx.x) * 16 + threadIdx.x / 16;
    const bool live = item < code_rows * cols;
    const int64_t r = live ? item % code_rows : 0;
    return {r, live ? int(item / code_rows) : 0, live, !live || r >= rows};
}

// The end of a row quantization (quantize_fp8_rows' layout, core/fp8.h) for one half-warp item, row r and block
// column cb of a [rows, K] activation with `cols` block columns, whose lane l = threadIdx.x % 16 holds the block's
// elements 8l..8l+7 in v (0 where there are none): the block's amax by shuffles within the half-warp (every lane of
// the warp calls this), then, when `live`, the lane's 8 codes as one 8-byte store (code 0 past the first `valid` of
// its elements: the pad columns; valid <= 0 in a pad row) and lane 0's scale.
__device__ inline void store_fp8_row_block(uint8_t* codes, float* scales, const float (&v)[8], int64_t r, int cb,
                                           int rows, int cols, int valid, bool live) {
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) amax = amax_of(amax, v[j]);
    for (int o = 8; o > 0; o >>= 1) amax = amax_max(amax, __shfl_xor_sync(kFp8FullMask, amax, o));
    if (!live) return;
    const Fp8Scale s = fp8_scale_of(amax);
    uint32_t lo = 0, hi = 0;
#pragma unroll
    for (int j = 0; j < 4; j += 2) {
        lo |= uint32_t(e4m3x2(v[j] * s.inv, v[j + 1] * s.inv)) << (8 * j);
        hi |= uint32_t(e4m3x2(v[4 + j] * s.inv, v[5 + j] * s.inv)) << (8 * j);
    }
    if (valid < 8) {
        uint32_t keep_lo = 0, keep_hi = 0;
        for (int j = 0; j < 4; ++j) {
            if (j < valid) keep_lo |= 0xFFu << (8 * j);
            if (4 + j < valid) keep_hi |= 0xFFu << (8 * j);
        }
        lo &= keep_lo;
        hi &= keep_hi;
    }
    const int hl = threadIdx.x % 16;
    *reinterpret_cast<uint2*>(codes + r * int64_t(cols) * kFp8Block + cb * kFp8Block + hl * 8) = make_uint2(lo, hi);
    if (hl == 0) scales[fp8_row_scale_at(r, cb, rows, cols)] = s.scale;
}

}  // namespace tandem::cuda
