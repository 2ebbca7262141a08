// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Packed causal variable-length attention through cuDNN's fused flash attention (SDPA forward and
// backward), built with the cuDNN graph/backend C API (the C++ frontend is not available). The RAII
// wrapper over backend descriptors lives in cudnn_attention.cpp only.
// Same layouts and meaning as attention.h (q/out [T,Hq,D], k/v [T,Hkv,D] bf16, cu_seqlens[S+1] on the
// device), so the model switches between the two without copying. cuDNN sees the packed stream as a
// batch of S sequences of at most max_seqlen tokens with ragged offsets (element offsets computed on the
// device from cu_seqlens into the workspace) and per-sample lengths read from device memory.
// Graphs (forward and backward) are built, checked and cached per shape key (S bucket, max_seqlen bucket,
// Hq, Hkv, D, the sliding window when a sample is longer than it); buckets round up so a run builds only a handful.
// Version gate: cudnn_attention_available() checks cudnnGetVersion() at run time against what the code
// needs (ragged offsets + padding mask + causal for bf16 fwd/bwd); a case cuDNN rejects (graph check or
// no engine config) is remembered and reported as unsupported, and the caller uses the in-house kernels.
// The stats (log-sum-exp) layout differs from attention.h's [Hq,T]: callers size it with
// cudnn_attention_stats_bytes and pass the same buffer to backward.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/cuda/context.h"

namespace tandem::cuda {

// Run-time gate: cuDNN present, new enough, GPU arch supported. reason says why not.
bool cudnn_attention_available(std::string* reason = nullptr);

struct CudnnAttentionShape {
    int S = 0;           // samples in the packed stream
    int T = 0;           // tokens
    int Hq = 0, Hkv = 0, D = 0;
    int max_seqlen = 0;  // longest sample
    float scale = 0;
    int window = 0;      // sliding window: query i attends to keys j with i - j < window (0: none)
    // GQA backward once per kv head (its query heads as an MQA problem in compact copies): about a quarter of the
    // workspace for long sequences (cudnn_attention_split_backward decides it per model).
    bool split = false;
};

// Whether a model of max_tokens tokens per batch splits its backward (the whole backward's workspace would pass
// 1 GiB; GQA only).
bool cudnn_attention_split_backward(int max_tokens, int Hq, int Hkv, int D);

// True when cuDNN builds and supports both graphs for this shape (builds and caches them; may take
// tens of ms the first time per bucket). Never throws for "unsupported"; reason says why.
bool cudnn_attention_supported(const CudnnAttentionShape& shape, std::string* reason = nullptr);

// Bytes of the stats buffer and of the workspace for a shape (workspace includes the ragged offsets and
// the larger of the two graphs' cuDNN workspaces).
size_t cudnn_attention_stats_bytes(const CudnnAttentionShape& shape);
size_t cudnn_attention_workspace_bytes(const CudnnAttentionShape& shape);
// Upper bounds over every shape with at most max_tokens tokens and max_seqlen per sample (for the plan).
size_t cudnn_attention_stats_bytes_max(int max_tokens, int max_seqlen, int Hq);
size_t cudnn_attention_workspace_bytes_max(int max_tokens, int max_seqlen, int Hq, int Hkv, int D,
                                          bool split = false);

void cudnn_attention_forward(bf16* out, void* stats, const bf16* q, const bf16* k, const bf16* v,
                             const int32_t* cu_seqlens, const CudnnAttentionShape& shape, void* workspace);

void cudnn_attention_backward(bf16* dq, bf16* dk, bf16* dv, const bf16* dout, const bf16* q, const bf16* k,
                              const bf16* v, const bf16* out, const void* stats, const int32_t* cu_seqlens,
                              const CudnnAttentionShape& shape, void* workspace);

// Drops every cached graph (tests; the end of a run).
void cudnn_attention_clear_cache();

}  // namespace tandem::cuda
