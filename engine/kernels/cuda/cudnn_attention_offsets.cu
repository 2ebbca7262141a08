// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Device side of cudnn_attention.cpp: turns cu_seqlens into the per-sample tensors cuDNN's packed (ragged)
// attention reads — element offsets of every sample in Q/K/V/O/stats and the per-sample lengths — so the
// host never has to read cu_seqlens (no sync).
// S = samples, B = cuDNN batch (S rounded up to a bucket, B >= S); samples s in [S, B) are empty: length 0 and
// offsets equal to the end of the stream, which cuDNN skips.
// Offsets are int64 (cuDNN >= 9.5 takes int64 ragged offsets; no overflow for any T * H * D).
#include <cstdint>

#include "core/cuda/context.h"

namespace tandem::cuda::detail {

namespace {

// One thread per entry b in [0, B]. The offset arrays have B + 1 entries, the length arrays B.
__global__ void cudnn_attention_offsets_kernel(const int32_t* __restrict__ cu_seqlens,  // [S + 1]
                                               int S, int B, int64_t q_elems_per_token, int64_t kv_elems_per_token,
                                               int64_t stats_elems_per_token,
                                               int64_t* __restrict__ off_q,      // [B + 1]
                                               int64_t* __restrict__ off_k,      // [B + 1]
                                               int64_t* __restrict__ off_v,      // [B + 1]
                                               int64_t* __restrict__ off_o,      // [B + 1]
                                               int64_t* __restrict__ off_stats,  // [B + 1]
                                               int32_t* __restrict__ seq_q,      // [B]
                                               int32_t* __restrict__ seq_kv) {   // [B]
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b > B) return;
    const int64_t start = cu_seqlens[b < S ? b : S];  // first token of sample b (T for the empty tail)
    off_q[b] = start * q_elems_per_token;
    off_o[b] = start * q_elems_per_token;
    off_k[b] = start * kv_elems_per_token;
    off_v[b] = start * kv_elems_per_token;
    off_stats[b] = start * stats_elems_per_token;
    if (b < B) {
        const int32_t len = b < S ? cu_seqlens[b + 1] - cu_seqlens[b] : 0;
        seq_q[b] = len;
        seq_kv[b] = len;
    }
}

}  // namespace

// Declared in cudnn_attention.cpp (the only caller). Runs on context().stream.
void cudnn_attention_fill_offsets(const int32_t* cu_seqlens, int S, int B, int64_t q_elems_per_token,
                                  int64_t kv_elems_per_token, int64_t stats_elems_per_token, int64_t* off_q,
                                  int64_t* off_k, int64_t* off_v, int64_t* off_o, int64_t* off_stats, int32_t* seq_q,
                                  int32_t* seq_kv) {
    TANDEM_KCHECK_PTR(cu_seqlens);
    TANDEM_KCHECK(S > 0 && B >= S);
    constexpr int threads = 128;
    cudnn_attention_offsets_kernel<<<grid_for(int64_t(B) + 1, threads), threads, 0, context().stream>>>(
        cu_seqlens, S, B, q_elems_per_token, kv_elems_per_token, stats_elems_per_token, off_q, off_k, off_v, off_o,
        off_stats, seq_q, seq_kv);
    TANDEM_CUDA_LAUNCH_CHECK();
}

}  // namespace tandem::cuda::detail
