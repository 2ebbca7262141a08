// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Packed variable-length causal attention with GQA on the CUDA backend (twin of kernels/cpu/attention.h):
// the in-house flash-attention kernels (forward and backward), used wherever cuDNN's fused attention
// (cudnn_attention.h) does not support a case, and as the reference the cuDNN path is tested against.
// Layouts as on the CPU: q/out [T,Hq,D], k/v [T,Hkv,D] bf16, lse [Hq,T] fp32 (natural log of the scaled
// scores' sum of exponentials), cu_seqlens[S+1] int32 ON THE DEVICE. max_seqlen (host int) sizes the grid.
// Supported head_dim: 64, 128 (and any multiple of 16 up to 256 on the generic path).
// Backward: delta = rowsum(dout*out) in the workspace, then dk/dv per key tile (looping over the query
// heads of its kv head and the query tiles) and dq per query tile, each recomputing P from lse: no atomics,
// so the result is deterministic. Gradients are WRITTEN as on the CPU. max_seqlen must be >= every
// sample's length (it cannot be checked without a sync); pointers 16-byte aligned. window > 0: a sliding
// window as on the CPU (key j visible from query t when t - window < j <= t); key tiles wholly outside it
// are skipped. softcap > 0 (Gemma 2): the scaled scores become softcap * tanh(scores / softcap) before the
// mask and softmax; backward multiplies dS by 1 - tanh^2.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/cuda/context.h"

namespace tandem::cuda {

bool attention_supported(int D);  // head dims the in-house kernels handle

void attention_forward(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v, const int32_t* cu_seqlens,
                       int S, int T, int Hq, int Hkv, int D, float scale, int max_seqlen, int window = 0,
                       float softcap = 0.0f);

size_t attention_backward_workspace(int T, int Hq, int D);

void attention_backward(bf16* dq, bf16* dk, bf16* dv, const bf16* dout, const bf16* q, const bf16* k, const bf16* v,
                        const bf16* out, const float* lse, const int32_t* cu_seqlens, int S, int T, int Hq, int Hkv,
                        int D, float scale, int max_seqlen, void* workspace, int window = 0, float softcap = 0.0f);

// Attention sinks (gpt-oss; kernels/cpu/attention.h): lse' = log(exp(lse) + exp(sink)), out *= exp(lse - lse').
// out [T,Hq,D] bf16, lse [Hq,T] fp32 (both updated), sinks [Hq] bf16. Applied after attention_forward.
void attention_sinks(bf16* out, float* lse, const bf16* sinks, int T, int Hq, int D);

}  // namespace tandem::cuda
