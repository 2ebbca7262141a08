// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// FP8 quantization and the weight transpose on the CUDA backend (see fp8.h; fp8_matmul is in matmul.cu).
// Decisions a reader must know:
//  - The rounding is core/fp8.h's e4m3_code, the function the CPU twin calls (integer arithmetic on the fp32
//    bits), or in quantize_fp8_rows the GPU's own round-to-nearest-even conversion, which gives the same codes
//    for finite inputs; the scale is fp8_scale_of's two IEEE divisions (no fast math in this build). So a code
//    and a scale here equal the CPU's for the same input values (the self-test checks it).
//  - quantize_fp8_rows: one half-warp per (row, 128-column block), 8 consecutive elements per lane (one 16-byte
//    load, one 8-byte store of codes); the block's amax by shuffles (four items per half-warp with all loads
//    issued first was measured 35% slower on an H200, 2026-11-29); the rounding by the GPU's cvt.rn.satfinite
//    (sm_89+), which equals e4m3_code for every finite input. quantize_fp8_weight: one 256-thread block
//    per 128x128 block (load only).
//  - fp8_transpose: 64x64 byte tiles through shared memory, 32-bit loads and stores.
#include "kernels/cuda/fp8.h"

#include "core/check.h"
#include "kernels/cuda/fp8.cuh"
#include "tandem/error.h"

namespace tandem::cuda {

namespace {

// grid (ceil(code_rows*cols / 16)), 256 threads: each half-warp handles one (row, block) = item % code_rows,
// item / code_rows (two per warp; consecutive half-warps take consecutive rows of one block column, so their
// scales, contiguous per block column in the VEC128 layout, are stored together: the same time as row-major items
// under ncu on an H200, 2026-11-29), lane l of the half holding the block's elements 8l..8l+7 (one 16-byte load
// when vec, K % 8 == 0); store_fp8_row_block (fp8.cuh) does the rest. Rows past `rows` are the tail GEMM's pad
// rows (codes 0, scale 1).
template <bool vec>
__global__ void quantize_rows_kernel(uint8_t* codes, float* scales, const bf16* x, int rows, int K, int cols,
                                     int64_t code_rows) {
    const auto [r, cb, live, pad] = fp8_row_item(code_rows, cols, rows);
    const int c0 = cb * kFp8Block + threadIdx.x % 16 * 8;
    float v[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    if (!pad) {
        const bf16* xr = x + r * K;
        if (vec && c0 + 8 <= K) {
            const uint4 raw = *reinterpret_cast<const uint4*>(xr + c0);
            const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const __nv_bfloat162 p = *reinterpret_cast<const __nv_bfloat162*>(&w[j]);
                v[2 * j] = __low2float(p);
                v[2 * j + 1] = __high2float(p);
            }
        } else {
#pragma unroll
            for (int j = 0; j < 8; ++j)
                if (c0 + j < K) v[j] = __bfloat162float(xr[c0 + j]);
        }
    }
    store_fp8_row_block(codes, scales, v, r, cb, rows, cols, pad ? 0 : K - c0, live);
}

// grid (ld, bands), 256 threads: block columns past cols are the grid's pad entries (scale 1).
__global__ void quantize_weight_kernel(uint8_t* codes, float* scales, const float* w, int OUT, int IN, int cols,
                                       int ld) {
    const int cb = blockIdx.x, band = blockIdx.y;
    const int r0 = band * kFp8Block, c0 = cb * kFp8Block;
    const int r1 = min(OUT, r0 + kFp8Block), c1 = min(IN, c0 + kFp8Block);
    if (cb >= cols) {
        if (threadIdx.x == 0) scales[int64_t(band) * ld + cb] = 1.0f;
        return;
    }
    __shared__ float part[8];
    __shared__ Fp8Scale sh;
    float amax = 0.0f;
    for (int i = threadIdx.x; i < kFp8Block * kFp8Block; i += blockDim.x) {
        const int r = r0 + i / kFp8Block, c = c0 + i % kFp8Block;
        if (r < r1 && c < c1) amax = amax_of(amax, w[int64_t(r) * IN + c]);
    }
    amax = block256_amax(amax, part);
    if (threadIdx.x == 0) {
        sh = fp8_scale_of(amax);
        scales[int64_t(band) * ld + cb] = sh.scale;
    }
    __syncthreads();
    const Fp8Scale s = sh;
    const int64_t INp = int64_t(cols) * kFp8Block;
    for (int i = threadIdx.x; i < kFp8Block * kFp8Block; i += blockDim.x) {
        const int r = r0 + i / kFp8Block, c = c0 + i % kFp8Block;
        if (r < r1) codes[int64_t(r) * INp + c] = c < c1 ? e4m3_code(w[int64_t(r) * IN + c] * s.inv) : uint8_t(0);
    }
}

constexpr int kTile = 64;

// grid (OUTp/64, ceil(IN/64)), 256 threads: a 64x64 byte tile of the codes (rows o0.., columns i0..) read as
// 32-bit words (INp and OUTp are multiples of 128), written transposed as 32-bit words: wt rows i0..,
// columns o0... Source rows past OUT are the pad columns of wt (code 0).
__global__ void transpose_kernel(uint8_t* wt, const uint8_t* w, int OUT, int IN, int64_t INp, int64_t OUTp) {
    __shared__ uint32_t tile[kTile][kTile / 4 + 1];  // [source row][source word]
    const int o0 = blockIdx.x * kTile, i0 = blockIdx.y * kTile;
    for (int t = threadIdx.x; t < kTile * kTile / 4; t += blockDim.x) {
        const int ro = t / (kTile / 4), cw = t % (kTile / 4);
        const int o = o0 + ro, i = i0 + cw * 4;
        tile[ro][cw] = (o < OUT && i < INp) ? *reinterpret_cast<const uint32_t*>(w + int64_t(o) * INp + i) : 0u;
    }
    __syncthreads();
    for (int t = threadIdx.x; t < kTile * kTile / 4; t += blockDim.x) {
        const int ri = t / (kTile / 4), cw = t % (kTile / 4);  // wt row i0 + ri, its word cw (source rows 4cw..)
        const int i = i0 + ri;
        if (i >= IN) continue;
        const int shift = 8 * (ri % 4);
        uint32_t word = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) word |= ((tile[cw * 4 + j][ri / 4] >> shift) & 0xFFu) << (8 * j);
        *reinterpret_cast<uint32_t*>(wt + int64_t(i) * OUTp + o0 + cw * 4) = word;
    }
}

// st[in_bands, out_ld] from s[out_cols bands, in_ld]; st's pad entries (bo >= out_cols) 1.
__global__ void transpose_scales_kernel(float* st, const float* s, int in_bands, int out_cols, int out_ld, int in_ld) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= in_bands * out_ld) return;
    const int bi = t / out_ld, bo = t % out_ld;
    st[t] = bo < out_cols ? s[int64_t(bo) * in_ld + bi] : 1.0f;
}

}  // namespace

void quantize_fp8_rows(uint8_t* codes, float* scales, const bf16* x, int rows, int K) {
    TANDEM_KCHECK_PTR(codes);
    TANDEM_KCHECK_PTR(scales);
    TANDEM_KCHECK_PTR(x);
    TANDEM_KCHECK(rows > 0 && K > 0);
    const int cols = int(fp8_padded(K) / kFp8Block);
    const int64_t code_rows = fp8_code_rows(rows), items = code_rows * cols;
    const unsigned grid = unsigned((items + 15) / 16);
    if (K % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0)
        quantize_rows_kernel<true><<<grid, 256, 0, context().stream>>>(codes, scales, x, rows, K, cols, code_rows);
    else
        quantize_rows_kernel<false><<<grid, 256, 0, context().stream>>>(codes, scales, x, rows, K, cols, code_rows);
    TANDEM_CUDA_LAUNCH_CHECK();
}

void quantize_fp8_grad_rows(uint8_t* codes, float* scales, const bf16* x, int rows, int K) {
    if (fp8_grad_format() != Fp8GradFormat::E4M3)
        throw Error(ErrorCategory::Unsupported,
                    "TANDEM_FP8_GRADS=e5m2: E5M2 output gradients are an ablation of the "
                    "CPU backend's emulation only; the CUDA backend quantizes them as "
                    "E4M3 (unset it)");
    quantize_fp8_rows(codes, scales, x, rows, K);
}

void quantize_fp8_weight(uint8_t* codes, float* scales, const float* w, int OUT, int IN) {
    TANDEM_KCHECK_PTR(codes);
    TANDEM_KCHECK_PTR(scales);
    TANDEM_KCHECK_PTR(w);
    TANDEM_KCHECK(OUT > 0 && IN > 0);
    const int cols = int(fp8_padded(IN) / kFp8Block), ld = int(fp8_scale_ld(IN)), bands = int(fp8_blocks(OUT));
    quantize_weight_kernel<<<dim3(unsigned(ld), unsigned(bands)), 256, 0, context().stream>>>(codes, scales, w, OUT,
                                                                                                 IN, cols, ld);
    TANDEM_CUDA_LAUNCH_CHECK();
}

void fp8_transpose(uint8_t* wt_codes, float* wt_scales, const uint8_t* codes, const float* scales, int OUT, int IN) {
    TANDEM_KCHECK_PTR(wt_codes);
    TANDEM_KCHECK_PTR(wt_scales);
    TANDEM_KCHECK_PTR(codes);
    TANDEM_KCHECK_PTR(scales);
    TANDEM_KCHECK(OUT > 0 && IN > 0);
    const int64_t INp = fp8_padded(IN), OUTp = fp8_padded(OUT);
    const cudaStream_t s = context().stream;
    transpose_kernel<<<dim3(unsigned(OUTp / kTile), unsigned((IN + kTile - 1) / kTile)), 256, 0, s>>>(
        wt_codes, codes, OUT, IN, INp, OUTp);
    TANDEM_CUDA_LAUNCH_CHECK();
    const int in_bands = int(fp8_blocks(IN)), out_cols = int(OUTp / kFp8Block);
    const int out_ld = int(fp8_scale_ld(OUT)), in_ld = int(fp8_scale_ld(IN));
    transpose_scales_kernel<<<grid_for(int64_t(in_bands) * out_ld, 256), 256, 0, s>>>(wt_scales, scales, in_bands,
                                                                                     out_cols, out_ld, in_ld);
    TANDEM_CUDA_LAUNCH_CHECK();
}

}  // namespace tandem::cuda
