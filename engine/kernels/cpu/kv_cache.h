// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The KV cache of inference (engine/infer) on the CPU backend: writing a layer's keys and values into it, and
// attention of query rows against it (decode, and the prefill of a prompt that continues a cached prefix).
// T = query rows of the call (decode: one per active sequence), N = sequence slots of the cache, L = layers,
// M = max_len (positions per slot), Hq / Hkv = query / kv heads, D = head_dim, KV = Hkv * D.
// Decisions a reader must know:
//  - The cache is contiguous per slot: k_cache and v_cache are [N, L, M, KV] each (row (slot, layer, pos)),
//    so a slot's layer is one [M, KV] matrix. Rows carry their own slot and position (row_slot, row_pos), so
//    one call serves any mix of sequences and of rows per sequence.
//  - decode_attention: row t (slot s, position p) attends to keys 0..p of slot s, the key at p included (it
//    must have been written first); with a sliding window W > 0 only to p-W+1..p (transformers: key j is
//    visible when j > p - W). The arithmetic is cpu::attention_forward's for one row, operation for operation
//    (float scores and exponentials, a double sum), so a row gives the same bits as the training attention
//    given the same keys and values.
//  - Not in the op table yet: the CUDA twins (same names and arguments, bf16 cache) come with the CUDA
//    inference runtime.
#pragma once

#include <cstdint>

namespace tandem::cpu {

// k_cache, v_cache [N, L, M, KV]: rows (row_slot[t], layer, row_pos[t]) = k[t], v[t] for t < T.
// k, v [T, KV]; row_slot [T] in [0, N); row_pos [T] in [0, M).
void kv_cache_write(float* k_cache, float* v_cache, const float* k, const float* v, const int32_t* row_slot,
                    const int32_t* row_pos, int T, int layer, int N, int L, int M, int KV);

// out [T, Hq, D] written from q [T, Hq, D] and layer `layer` of the cache (see above). scale multiplies q.k;
// softcap > 0: scores become softcap * tanh(score / softcap) before the softmax (Gemma 2). sinks [Hq]
// (gpt-oss; nullptr: none): one more softmax column per head with that logit and no value, as
// attention_forward + attention_sinks compute it.
void decode_attention(float* out, const float* q, const float* k_cache, const float* v_cache,
                      const int32_t* row_slot, const int32_t* row_pos, int T, int layer, int N, int L, int M, int Hq,
                      int Hkv, int D, float scale, int window = 0, float softcap = 0.0f,
                      const float* sinks = nullptr);

}  // namespace tandem::cpu
