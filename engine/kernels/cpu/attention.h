// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Packed variable-length causal attention with grouped-query heads on the CPU backend.
// T = tokens of the packed stream, S = samples, Hq = query heads, Hkv = key/value heads, D = head_dim.
// Token t of sample s (cu_seqlens[s] <= t < cu_seqlens[s+1]) attends to tokens cu_seqlens[s]..t only,
// never across a sample boundary; with a sliding window W > 0 (Mistral's sliding_window) only to the last W of
// those, t-W+1..t (transformers: key j is visible when j > t - W). Query head h reads kv head h / (Hq / Hkv).
// softcap > 0 (Gemma 2): the scaled scores s become softcap * tanh(s / softcap) before the mask and softmax.
// Decisions: forward saves the log-sum-exp lse[Hq,T] (natural log, of the scaled scores); backward
// recomputes the probabilities from it row by row (flash-attention style), so no [T,T] matrix exists.
// All three gradients are WRITTEN (=), not accumulated. Deterministic for any thread count: every output
// row (query row for out/lse/dq, key row for dk/dv) is computed by one thread with a fixed loop order.
#pragma once

#include <cstdint>

namespace tandem::cpu {

// out[T,Hq,D], lse[Hq,T] written. q[T,Hq,D], k[T,Hkv,D], v[T,Hkv,D]; cu_seqlens[S+1] int32 with
// cu_seqlens[0] = 0, non-decreasing, cu_seqlens[S] = T. scale multiplies q.k (usually 1/sqrt(D)).
void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       const int32_t* cu_seqlens, int S, int T, int Hq, int Hkv, int D, float scale, int window = 0,
                       float softcap = 0.0f);

// dq[T,Hq,D], dk[T,Hkv,D], dv[T,Hkv,D] written from dout[T,Hq,D] and what forward saw and saved
// (q, k, v, out, lse). Allocates one [Hq,T] float vector per call (the rows' dout.out terms) besides the
// per-thread row buffers both functions allocate ([T] and [D] floats); the CPU backend only.
void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                        const float* v, const float* out, const float* lse, const int32_t* cu_seqlens, int S, int T,
                        int Hq, int Hkv, int D, float scale, int window = 0, float softcap = 0.0f);

// Attention sinks (gpt-oss): every row's softmax had one more column, logit sinks[h] with no value, which
// only enlarges the denominator. Applied after attention_forward: lse' = log(exp(lse) + exp(sink)) and
// out *= exp(lse - lse'). Backward needs nothing else: with lse' (and out) in place of forward's, the
// probabilities it recomputes and its rowsum(dout * out) are those of the softmax with the sink column.
// out [T,Hq,D], lse [Hq,T] (both updated), sinks [Hq] (the model's dtype).
void attention_sinks(float* out, float* lse, const float* sinks, int T, int Hq, int D);
// One row's part: lse becomes log(exp(lse) + exp(sink)); returns the factor its output is multiplied by.
float sink_rescale(float& lse, float sink);

}  // namespace tandem::cpu
