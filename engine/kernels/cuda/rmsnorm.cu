// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// RMSNorm on the CUDA backend (see rmsnorm.h). N = rows, C = channels.
// Decisions:
//  - A row is handled by one warp when C <= 1024 (q/k norm, small models: many short rows) and by one block
//    when it is wider (hidden sizes 2048..8192). Each thread takes 8-channel pieces (16-byte loads) when
//    C % 8 == 0 and the pointers are aligned, single channels otherwise. Both passes over a row give a
//    thread the same channels, so a thread only re-reads what it read or wrote itself (in-place is safe).
//  - Row sums are fp32 (per-thread sums, then a butterfly within the warp and a fixed-order sum over the
//    warps): deterministic, but not bit-identical to the CPU's double sums. rstd = 1/sqrt(ss/C + eps) is
//    taken in double from that fp32 sum, once per row.
//  - residual_rmsnorm_forward normalises the residual after its rounding to bf16, so it equals
//    add() followed by rmsnorm_forward().
//  - rmsnorm_forward_fp8 / rmsnorm_backward_fp8 (FP8 models) are the same forward / backward whose second pass
//    also quantizes the stored bf16 output (the updated input gradient) for the FP8 GEMM(s) it feeds: with
//    8-channel pieces a half-warp's 16 lanes hold one 128-column block in each pass (C % 128 == 0), so fp8.cuh's
//    store_fp8_row_block finishes it. Every thread of a row runs the same passes (the block's shuffles are
//    warp-wide), and the grid also covers the pad rows up to a multiple of 16 (codes 0, scale 1).
//  - dweight: a separate kernel, blocks of 32 columns x 32 row-strides, per-thread fp32 sums over rows in
//    order, then a fixed-order sum of the 32 partials: deterministic without atomics or workspace. Its
//    parallelism is C/32 blocks, which is slow for C = head_dim; training never asks for it (norm weights
//    are frozen under LoRA).
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/fp8.cuh"
#include "kernels/cuda/fp8.h"
#include "kernels/cuda/vec.cuh"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace tandem::cuda {

namespace {

constexpr int kWarpMaxC = 1024;     // widest row one warp handles
constexpr int kRowsPerBlock = 8;    // warp-per-row kernels: 8 warps = 256 threads
constexpr int kDwCols = 32;         // dweight kernel: columns per block
constexpr int kDwRows = 32;         //                 row strides per block

template <int W>
__device__ inline void load_f(float (&x)[W], const bf16* p) {
    if constexpr (W == 8) {
        const Pack<bf16, 8> q = *reinterpret_cast<const Pack<bf16, 8>*>(p);
#pragma unroll
        for (int k = 0; k < 8; k++) x[k] = __bfloat162float(q.v[k]);
    } else {
#pragma unroll
        for (int k = 0; k < W; k++) x[k] = __bfloat162float(p[k]);
    }
}

template <int W>
__device__ inline void store_f(bf16* p, const float (&x)[W]) {
    if constexpr (W == 8) {
        Pack<bf16, 8> q;
#pragma unroll
        for (int k = 0; k < 8; k++) q.v[k] = __float2bfloat16_rn(x[k]);
        *reinterpret_cast<Pack<bf16, 8>*>(p) = q;
    } else {
#pragma unroll
        for (int k = 0; k < W; k++) p[k] = __float2bfloat16_rn(x[k]);
    }
}

__device__ inline float warp_sum(float v) {
#pragma unroll
    for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
    return v;  // identical in every lane (the butterfly adds the same pairs, commutatively)
}

// The threads that own one row: a warp (BLOCK = false) or the whole block (BLOCK = true).
template <bool BLOCK>
struct Row {
    __device__ static int index() { return BLOCK ? int(blockIdx.x) : int(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32); }
    __device__ static int lane() { return BLOCK ? int(threadIdx.x) : int(threadIdx.x % 32); }
    __device__ static int size() { return BLOCK ? int(blockDim.x) : 32; }
    // Sum of v over the row's threads, the same value in each of them.
    __device__ static float sum(float v) {
        v = warp_sum(v);
        if constexpr (BLOCK) {
            __shared__ float part[32];
            if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
            __syncthreads();
            v = 0.0f;
            for (int w = 0; w < int(blockDim.x / 32); w++) v += part[w];
        }
        return v;
    }
};

// ---------------------------------------------------------------------------------------------------------
// CUDA kernels

// A row's first forward pass (RESIDUAL: residual = bf16(a + b) stored, and the norm is of it; else of a): its rstd
// 1 / sqrt(mean(x^2) + eps), the same value in every thread of the row.
template <int W, bool BLOCK, bool RESIDUAL>
__device__ inline float forward_rstd(bf16* residual, const bf16* a, const bf16* b, size_t base, int C, float eps) {
    const int lane = Row<BLOCK>::lane(), step = Row<BLOCK>::size() * W;
    float ss = 0.0f;
    for (int c = lane * W; c < C; c += step) {
        float x[W];
        load_f<W>(x, a + base + c);
        if constexpr (RESIDUAL) {
            float y[W];
            load_f<W>(y, b + base + c);
#pragma unroll
            for (int k = 0; k < W; k++) x[k] = __bfloat162float(__float2bfloat16_rn(x[k] + y[k]));
            store_f<W>(residual + base + c, x);
        }
#pragma unroll
        for (int k = 0; k < W; k++) ss += x[k] * x[k];
    }
    ss = Row<BLOCK>::sum(ss);
    return float(1.0 / sqrt(double(ss) / C + double(eps)));
}

// A row's first backward pass: k = mean(w*dy*x) * r^2 (r its rstd), the same value in every thread of the row.
template <int W, bool BLOCK>
__device__ inline float backward_k(const bf16* dout, const bf16* inp, const bf16* weight, size_t base, int C,
                                   float woff, float r) {
    const int lane = Row<BLOCK>::lane(), step = Row<BLOCK>::size() * W;
    float dot = 0.0f;
    for (int c = lane * W; c < C; c += step) {
        float dy[W], x[W], w[W];
        load_f<W>(dy, dout + base + c);
        load_f<W>(x, inp + base + c);
        load_f<W>(w, weight + c);
#pragma unroll
        for (int k = 0; k < W; k++) dot += ((w[k] + woff) * dy[k]) * x[k];
    }
    dot = Row<BLOCK>::sum(dot);
    return (dot / float(C)) * r * r;
}

// RESIDUAL: residual = bf16(a + b) and the norm is of residual; else the norm is of a.
template <int W, bool BLOCK, bool RESIDUAL>
__global__ void rmsnorm_forward_kernel(bf16* out, float* rstd, bf16* residual, const bf16* a, const bf16* b,
                                       const bf16* weight, int N, int C, float eps, float woff) {
    const int row = Row<BLOCK>::index();
    if (row >= N) return;  // uniform over the row's threads
    const int lane = Row<BLOCK>::lane(), step = Row<BLOCK>::size() * W;
    const size_t base = size_t(row) * C;
    const float r = forward_rstd<W, BLOCK, RESIDUAL>(residual, a, b, base, C, eps);
    if (lane == 0) rstd[row] = r;
    const bf16* src = (RESIDUAL ? residual : a) + base;
    for (int c = lane * W; c < C; c += step) {
        float x[W], w[W];
        load_f<W>(x, src + c);
        load_f<W>(w, weight + c);
#pragma unroll
        for (int k = 0; k < W; k++) x[k] = (w[k] + woff) * (x[k] * r);
        store_f<W>(out + base + c, x);
    }
}

// rmsnorm_forward_kernel<8, BLOCK, RESIDUAL> that also quantizes its output (see the file comment): rows up to
// code_rows; a pad row (>= N) writes codes 0 and scale 1 only. C % 128 == 0.
template <bool BLOCK, bool RESIDUAL>
__global__ void rmsnorm_forward_fp8_kernel(bf16* out, uint8_t* codes, float* scales, float* rstd, bf16* residual,
                                           const bf16* a, const bf16* b, const bf16* weight, int N, int C,
                                           int code_rows, float eps, float woff) {
    const int row = Row<BLOCK>::index();
    if (row >= code_rows) return;  // uniform over the row's threads
    const int lane = Row<BLOCK>::lane(), step = Row<BLOCK>::size() * 8, cols = C / kFp8Block;
    const bool pad = row >= N;  // uniform too
    const size_t base = size_t(row) * C;
    float r = 0.0f;
    if (!pad) {
        r = forward_rstd<8, BLOCK, RESIDUAL>(residual, a, b, base, C, eps);
        if (lane == 0) rstd[row] = r;
    }
    const bf16* src = (RESIDUAL ? residual : a) + base;
    for (int c0 = 0; c0 < C; c0 += step) {  // the same trip count in every lane
        const int c = c0 + lane * 8;
        const bool live = c < C;  // whole half-warps (C % 128 == 0)
        float v[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
        if (live && !pad) {
            float x[8], w[8];
            load_f<8>(x, src + c);
            load_f<8>(w, weight + c);
#pragma unroll
            for (int k = 0; k < 8; k++) v[k] = __bfloat162float(__float2bfloat16_rn((w[k] + woff) * (x[k] * r)));
            store_f<8>(out + base + c, v);
        }
        store_fp8_row_block(codes, scales, v, row, live ? c / kFp8Block : 0, N, cols, pad ? 0 : 8, live);
    }
}

// dinp += r * (w*dy - x * k),  k = mean(w*dy*x) * r^2
template <int W, bool BLOCK>
__global__ void rmsnorm_backward_kernel(bf16* dinp, const bf16* dout, const bf16* inp, const bf16* weight,
                                        const float* rstd, int N, int C, float woff) {
    const int row = Row<BLOCK>::index();
    if (row >= N) return;
    const int lane = Row<BLOCK>::lane(), step = Row<BLOCK>::size() * W;
    const size_t base = size_t(row) * C;
    const float r = rstd[row];
    const float kk = backward_k<W, BLOCK>(dout, inp, weight, base, C, woff, r);
    for (int c = lane * W; c < C; c += step) {
        float dy[W], x[W], w[W], d[W];
        load_f<W>(dy, dout + base + c);
        load_f<W>(x, inp + base + c);
        load_f<W>(w, weight + c);
        load_f<W>(d, dinp + base + c);
#pragma unroll
        for (int k = 0; k < W; k++) d[k] += r * ((w[k] + woff) * dy[k] - x[k] * kk);
        store_f<W>(dinp + base + c, d);
    }
}

// rmsnorm_backward_kernel<8, BLOCK> that also quantizes the updated dinp, as rmsnorm_forward_fp8_kernel does its
// output: rows up to code_rows; a pad row (>= N) writes codes 0 and scale 1 only. C % 128 == 0.
template <bool BLOCK>
__global__ void rmsnorm_backward_fp8_kernel(bf16* dinp, uint8_t* codes, float* scales, const bf16* dout,
                                            const bf16* inp, const bf16* weight, const float* rstd, int N, int C,
                                            int code_rows, float woff) {
    const int row = Row<BLOCK>::index();
    if (row >= code_rows) return;  // uniform over the row's threads
    const int lane = Row<BLOCK>::lane(), step = Row<BLOCK>::size() * 8, cols = C / kFp8Block;
    const bool pad = row >= N;  // uniform too
    const size_t base = size_t(row) * C;
    float r = 0.0f, kk = 0.0f;
    if (!pad) {
        r = rstd[row];
        kk = backward_k<8, BLOCK>(dout, inp, weight, base, C, woff, r);
    }
    for (int c0 = 0; c0 < C; c0 += step) {  // the same trip count in every lane
        const int c = c0 + lane * 8;
        const bool live = c < C;  // whole half-warps (C % 128 == 0)
        float v[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
        if (live && !pad) {
            float dy[8], x[8], w[8];
            load_f<8>(dy, dout + base + c);
            load_f<8>(x, inp + base + c);
            load_f<8>(w, weight + c);
            load_f<8>(v, dinp + base + c);
#pragma unroll
            for (int k = 0; k < 8; k++)
                v[k] = __bfloat162float(__float2bfloat16_rn(v[k] + r * ((w[k] + woff) * dy[k] - x[k] * kk)));
            store_f<8>(dinp + base + c, v);
        }
        store_fp8_row_block(codes, scales, v, row, live ? c / kFp8Block : 0, N, cols, pad ? 0 : 8, live);
    }
}

// dweight[C] += sum_n dy * (x * r). Block (kDwCols, kDwRows): column blockIdx.x*kDwCols + threadIdx.x.
__global__ void rmsnorm_dweight_kernel(float* dweight, const bf16* dout, const bf16* inp, const float* rstd, int N,
                                       int C) {
    __shared__ float part[kDwRows][kDwCols + 1];
    const int c = blockIdx.x * kDwCols + threadIdx.x;
    float acc = 0.0f;
    if (c < C)
        for (int n = threadIdx.y; n < N; n += kDwRows) {
            const size_t i = size_t(n) * C + c;
            acc += __bfloat162float(dout[i]) * (__bfloat162float(inp[i]) * rstd[n]);
        }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float s = 0.0f;
        for (int j = 0; j < kDwRows; j++) s += part[j][threadIdx.x];
        dweight[c] += s;
    }
}

// ---------------------------------------------------------------------------------------------------------
// kernel launchers

// Threads of the block-per-row kernels: about two pieces of W channels per thread.
unsigned wide_threads(int C, int W) {
    const int pieces = (C + W - 1) / W;
    const int t = ((pieces + 1) / 2 + 31) / 32 * 32;
    return unsigned(std::clamp(t, 128, 1024));
}

unsigned warp_rows_grid(int N) { return unsigned((N + kRowsPerBlock - 1) / kRowsPerBlock); }

template <bool RESIDUAL>
void launch_forward(bf16* out, float* rstd, bf16* residual, const bf16* a, const bf16* b, const bf16* weight, int N,
                    int C, float eps, float woff) {
    const cudaStream_t s = context().stream;
    const bool vec = C % 8 == 0 && aligned16(out) && aligned16(a) && aligned16(weight) &&
                     (!RESIDUAL || (aligned16(b) && aligned16(residual)));
    if (C <= kWarpMaxC) {
        const unsigned grid = warp_rows_grid(N), threads = kRowsPerBlock * 32;
        if (vec)
            rmsnorm_forward_kernel<8, false, RESIDUAL><<<grid, threads, 0, s>>>(out, rstd, residual, a, b, weight, N, C, eps, woff);
        else
            rmsnorm_forward_kernel<1, false, RESIDUAL><<<grid, threads, 0, s>>>(out, rstd, residual, a, b, weight, N, C, eps, woff);
    } else {
        if (vec)
            rmsnorm_forward_kernel<8, true, RESIDUAL><<<unsigned(N), wide_threads(C, 8), 0, s>>>(out, rstd, residual, a, b,
                                                                                                 weight, N, C, eps, woff);
        else
            rmsnorm_forward_kernel<1, true, RESIDUAL><<<unsigned(N), wide_threads(C, 1), 0, s>>>(out, rstd, residual, a, b,
                                                                                                 weight, N, C, eps, woff);
    }
    TANDEM_CUDA_LAUNCH_CHECK();
}

}  // namespace

void rmsnorm_forward(bf16* out, float* rstd, const bf16* inp, const bf16* weight, int N, int C, float eps,
                     float weight_offset) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(rstd);
    TANDEM_KCHECK_PTR(inp);
    TANDEM_KCHECK_PTR(weight);
    TANDEM_KCHECK(N > 0 && C > 0);
    launch_forward<false>(out, rstd, nullptr, inp, nullptr, weight, N, C, eps, weight_offset);
}

void residual_rmsnorm_forward(bf16* residual, bf16* out, float* rstd, const bf16* a, const bf16* b,
                              const bf16* weight, int N, int C, float eps, float weight_offset) {
    TANDEM_KCHECK_PTR(residual);
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(rstd);
    TANDEM_KCHECK_PTR(a);
    TANDEM_KCHECK_PTR(b);
    TANDEM_KCHECK_PTR(weight);
    TANDEM_KCHECK(N > 0 && C > 0);
    launch_forward<true>(out, rstd, residual, a, b, weight, N, C, eps, weight_offset);
}

void rmsnorm_forward_fp8(bf16* residual, bf16* out, uint8_t* codes, float* scales, float* rstd, const bf16* a,
                         const bf16* b, const bf16* weight, int N, int C, float eps, float weight_offset) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(codes);
    TANDEM_KCHECK_PTR(scales);
    TANDEM_KCHECK_PTR(rstd);
    TANDEM_KCHECK_PTR(a);
    TANDEM_KCHECK_PTR(weight);
    TANDEM_KCHECK((residual == nullptr) == (b == nullptr));
    TANDEM_KCHECK(N > 0 && C > 0);
    const bool fused = C % kFp8Block == 0 && aligned16(out) && aligned16(a) && aligned16(weight) &&
                       (!residual || (aligned16(b) && aligned16(residual)));
    if (!fused) {
        if (residual)
            launch_forward<true>(out, rstd, residual, a, b, weight, N, C, eps, weight_offset);
        else
            launch_forward<false>(out, rstd, nullptr, a, nullptr, weight, N, C, eps, weight_offset);
        quantize_fp8_rows(codes, scales, out, N, C);
        return;
    }
    const cudaStream_t s = context().stream;
    const int code_rows = int(fp8_code_rows(N));
    if (C <= kWarpMaxC) {
        const unsigned grid = warp_rows_grid(code_rows), threads = kRowsPerBlock * 32;
        if (residual)
            rmsnorm_forward_fp8_kernel<false, true><<<grid, threads, 0, s>>>(
                out, codes, scales, rstd, residual, a, b, weight, N, C, code_rows, eps, weight_offset);
        else
            rmsnorm_forward_fp8_kernel<false, false><<<grid, threads, 0, s>>>(
                out, codes, scales, rstd, nullptr, a, nullptr, weight, N, C, code_rows, eps, weight_offset);
    } else {
        const unsigned threads = wide_threads(C, 8);
        if (residual)
            rmsnorm_forward_fp8_kernel<true, true><<<unsigned(code_rows), threads, 0, s>>>(
                out, codes, scales, rstd, residual, a, b, weight, N, C, code_rows, eps, weight_offset);
        else
            rmsnorm_forward_fp8_kernel<true, false><<<unsigned(code_rows), threads, 0, s>>>(
                out, codes, scales, rstd, nullptr, a, nullptr, weight, N, C, code_rows, eps, weight_offset);
    }
    TANDEM_CUDA_LAUNCH_CHECK();
}

void rmsnorm_backward(bf16* dinp, float* dweight, const bf16* dout, const bf16* inp, const bf16* weight,
                      const float* rstd, int N, int C, float weight_offset) {
    TANDEM_KCHECK_PTR(dout);
    TANDEM_KCHECK_PTR(inp);
    TANDEM_KCHECK_PTR(rstd);
    TANDEM_KCHECK(N > 0 && C > 0);
    const cudaStream_t s = context().stream;
    if (dinp) {
        TANDEM_KCHECK_PTR(weight);
        const bool vec = C % 8 == 0 && aligned16(dinp) && aligned16(dout) && aligned16(inp) && aligned16(weight);
        if (C <= kWarpMaxC) {
            const unsigned grid = warp_rows_grid(N), threads = kRowsPerBlock * 32;
            if (vec)
                rmsnorm_backward_kernel<8, false><<<grid, threads, 0, s>>>(dinp, dout, inp, weight, rstd, N, C, weight_offset);
            else
                rmsnorm_backward_kernel<1, false><<<grid, threads, 0, s>>>(dinp, dout, inp, weight, rstd, N, C, weight_offset);
        } else {
            if (vec)
                rmsnorm_backward_kernel<8, true><<<unsigned(N), wide_threads(C, 8), 0, s>>>(dinp, dout, inp, weight,
                                                                                           rstd, N, C, weight_offset);
            else
                rmsnorm_backward_kernel<1, true><<<unsigned(N), wide_threads(C, 1), 0, s>>>(dinp, dout, inp, weight,
                                                                                           rstd, N, C, weight_offset);
        }
        TANDEM_CUDA_LAUNCH_CHECK();
    }
    if (dweight) {
        rmsnorm_dweight_kernel<<<unsigned((C + kDwCols - 1) / kDwCols), dim3(kDwCols, kDwRows), 0, s>>>(dweight, dout,
                                                                                                     inp, rstd, N, C);
        TANDEM_CUDA_LAUNCH_CHECK();
    }
}

void rmsnorm_backward_fp8(bf16* dinp, uint8_t* codes, float* scales, const bf16* dout, const bf16* inp,
                          const bf16* weight, const float* rstd, int N, int C, float weight_offset) {
    TANDEM_KCHECK_PTR(dinp);
    TANDEM_KCHECK_PTR(codes);
    TANDEM_KCHECK_PTR(scales);
    TANDEM_KCHECK_PTR(dout);
    TANDEM_KCHECK_PTR(inp);
    TANDEM_KCHECK_PTR(weight);
    TANDEM_KCHECK_PTR(rstd);
    TANDEM_KCHECK(N > 0 && C > 0);
    const bool fused = C % kFp8Block == 0 && aligned16(dinp) && aligned16(dout) && aligned16(inp) && aligned16(weight);
    if (!fused) {
        rmsnorm_backward(dinp, nullptr, dout, inp, weight, rstd, N, C, weight_offset);
        quantize_fp8_rows(codes, scales, dinp, N, C);
        return;
    }
    const cudaStream_t s = context().stream;
    const int code_rows = int(fp8_code_rows(N));
    if (C <= kWarpMaxC)
        rmsnorm_backward_fp8_kernel<false><<<warp_rows_grid(code_rows), kRowsPerBlock * 32, 0, s>>>(
            dinp, codes, scales, dout, inp, weight, rstd, N, C, code_rows, weight_offset);
    else
        rmsnorm_backward_fp8_kernel<true><<<unsigned(code_rows), wide_threads(C, 8), 0, s>>>(
            dinp, codes, scales, dout, inp, weight, rstd, N, C, code_rows, weight_offset);
    TANDEM_CUDA_LAUNCH_CHECK();
}

}  // namespace tandem::cuda
