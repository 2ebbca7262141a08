// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Rotary position embedding on the CUDA backend (see rope.h). T = tokens, H = heads, D = head_dim,
// P = table positions.
// Decisions: one thread per 8 channel pairs (i, i + D/2) of a row when D/2 % 8 == 0 and the pointers are
// 16-byte aligned, one per pair otherwise; a thread reads both halves before writing them, so in-place is
// safe. The arithmetic is the CPU's (y1 = x1*c - x2*s', y2 = x2*c + x1*s', s' = sign * s) in fp32.
#include "kernels/cuda/rope.h"
#include "kernels/cuda/vec.cuh"

#include <cstddef>
#include <cstdint>

namespace tandem::cuda {

namespace {

constexpr int kThreads = 256;

// ---------------------------------------------------------------------------------------------------------
// CUDA kernels

// sign +1: forward rotation; -1: its transpose (backward).
// Dr: the rotated channels (partial rotary: the first Dr of D; the rest pass through, copied when out != inp).
template <int W>
__global__ void rope_kernel(bf16* out, const bf16* inp, const int32_t* positions, const float* cos_table,
                            const float* sin_table, int T, int H, int D, int Dr, float sign) {
    const int half = Dr / 2;
    const int per_row = half / W;
    const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= int64_t(T) * H * per_row) return;
    const int64_t row = idx / per_row;                // t * H + h
    const int i = int(idx % per_row) * W;             // first channel of the pair block
    const int t = int(row / H);
    const size_t trow = size_t(positions[t]) * half;  // table row
    const Pack<float, W> c = *reinterpret_cast<const Pack<float, W>*>(cos_table + trow + i);
    const Pack<float, W> s = *reinterpret_cast<const Pack<float, W>*>(sin_table + trow + i);
    const bf16* x = inp + row * D;  // [D]
    bf16* y = out + row * D;        // [D]
    const Pack<bf16, W> a = *reinterpret_cast<const Pack<bf16, W>*>(x + i);
    const Pack<bf16, W> b = *reinterpret_cast<const Pack<bf16, W>*>(x + i + half);
    Pack<bf16, W> ya, yb;
#pragma unroll
    for (int k = 0; k < W; k++) {
        const float x1 = __bfloat162float(a.v[k]), x2 = __bfloat162float(b.v[k]);
        const float si = sign * s.v[k];
        ya.v[k] = __float2bfloat16_rn(x1 * c.v[k] - x2 * si);
        yb.v[k] = __float2bfloat16_rn(x2 * c.v[k] + x1 * si);
    }
    *reinterpret_cast<Pack<bf16, W>*>(y + i) = ya;
    *reinterpret_cast<Pack<bf16, W>*>(y + i + half) = yb;
    if (i == 0 && Dr < D && y != x)
        for (int k = Dr; k < D; k++) y[k] = x[k];
}

// ---------------------------------------------------------------------------------------------------------
// kernel launchers

void rope_launch(bf16* out, const bf16* inp, const int32_t* positions, const RopeTableDevice& table, int T, int H,
                 int D, float sign) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(inp);
    TANDEM_KCHECK_PTR(positions);
    TANDEM_KCHECK_PTR(table.cos);
    TANDEM_KCHECK_PTR(table.sin);
    TANDEM_KCHECK(T > 0 && H > 0 && D > 0 && D % 2 == 0);
    TANDEM_KCHECK(table.head_dim > 0 && table.head_dim <= D);  // the table's rotary dim: all of D, or its start
    const int Dr = table.head_dim, half = Dr / 2;
    const bool vec = half % 8 == 0 && aligned16(out) && aligned16(inp) && aligned16(table.cos) && aligned16(table.sin);
    const cudaStream_t s = context().stream;
    if (vec)
        rope_kernel<8><<<grid_for(int64_t(T) * H * (half / 8), kThreads), kThreads, 0, s>>>(
            out, inp, positions, table.cos, table.sin, T, H, D, Dr, sign);
    else
        rope_kernel<1><<<grid_for(int64_t(T) * H * half, kThreads), kThreads, 0, s>>>(out, inp, positions, table.cos,
                                                                                      table.sin, T, H, D, Dr, sign);
    TANDEM_CUDA_LAUNCH_CHECK();
}

}  // namespace

size_t rope_table_bytes(const cpu::RopeTable& table) {
    return 2 * size_t(table.max_pos) * size_t(table.head_dim / 2) * sizeof(float);
}

RopeTableDevice rope_table_upload(const cpu::RopeTable& table, void* dst) {
    TANDEM_KCHECK_PTR(dst);
    TANDEM_KCHECK(table.head_dim > 0 && table.head_dim % 2 == 0 && table.max_pos > 0);
    const size_t count = size_t(table.max_pos) * size_t(table.head_dim / 2);
    TANDEM_KCHECK(table.cos.size() == count && table.sin.size() == count);
    RopeTableDevice d;
    d.head_dim = table.head_dim;
    d.max_pos = table.max_pos;
    d.long_from = table.long_from;
    d.cos = static_cast<float*>(dst);
    d.sin = d.cos + count;
    // Copies from pageable memory may still read it after returning; the sync (load time, once) lets the
    // caller drop the host table right away.
    const cudaStream_t s = context().stream;
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(d.cos, table.cos.data(), count * sizeof(float), cudaMemcpyHostToDevice, s));
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(d.sin, table.sin.data(), count * sizeof(float), cudaMemcpyHostToDevice, s));
    synchronize(s);
    return d;
}

void rope_forward(bf16* out, const bf16* inp, const int32_t* positions, const RopeTableDevice& table, int T, int H,
                  int D) {
    rope_launch(out, inp, positions, table, T, H, D, 1.0f);
}

void rope_backward(bf16* dinp, const bf16* dout, const int32_t* positions, const RopeTableDevice& table, int T, int H,
                   int D) {
    rope_launch(dinp, dout, positions, table, T, H, D, -1.0f);
}

}  // namespace tandem::cuda
