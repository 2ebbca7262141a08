// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The KV cache of inference on the CUDA backend (twin of kernels/cpu/kv_cache.h): writing a layer's keys and
// values into it, and attention of query rows against it. bf16 cache and activations, fp32 softmax.
// T = query rows, N = sequence slots, L = layers, M = positions per slot, Hq / Hkv = query / kv heads,
// G = Hq / Hkv, D = head_dim, KV = Hkv * D.
// Decisions a reader must know:
//  - Layouts as on the CPU: k_cache, v_cache [N, L, M, KV] bf16; q / out [T, Hq, D]; k / v [T, KV].
//  - Every pointer is DEVICE memory, row_slot [T] and row_pos [T] included: the launchers never read them
//    (a decode step can be captured once in a CUDA graph and replayed with new rows). So slots and positions
//    cannot be checked on the host as the CPU twin does; on the device a row whose slot is outside [0, N) or
//    whose position is outside [0, M) is skipped by kv_cache_write and gets NaN outputs from
//    decode_attention (visible, never an out-of-bounds access).
//  - decode_attention is "flash decoding": a block per (row, kv head, group of up to 8 query heads, key
//    split) streams its keys once for all the query heads that share them (GQA / MQA read the cache once
//    per kv head), with an online softmax in fp32. The number of key splits is chosen on the host from
//    (T, Hq, Hkv, D, M) only, never from the positions: decode is memory-bound, and one block per (row, kv
//    head) would leave most SMs idle at batch 1. Splits need a workspace (decode_attention_workspace bytes);
//    without one (the op table's call, identical to the CPU's arguments) every block streams its whole
//    range [0, pos] alone: correct, and the right shape once T * Hkv fills the GPU, slow for a long cache
//    at small batches. Blocks whose split lies beyond the row's position exit at once.
//  - head_dim up to 256 (vector path when D % 8 == 0 and every pointer is 16-byte aligned, a scalar one
//    otherwise).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/cuda/context.h"

namespace tandem::cuda {

// k_cache, v_cache [N, L, M, KV]: rows (row_slot[t], layer, row_pos[t]) = k[t], v[t] for t < T. Exact copies.
// k, v [T, KV]. Two rows naming the same (slot, position) leave either row's values.
void kv_cache_write(bf16* k_cache, bf16* v_cache, const bf16* k, const bf16* v, const int32_t* row_slot,
                    const int32_t* row_pos, int T, int layer, int N, int L, int M, int KV);

// Bytes of the split-K workspace decode_attention uses for these sizes (0: it would not split).
size_t decode_attention_workspace(int T, int Hq, int Hkv, int D, int M);

// out [T, Hq, D] written from q [T, Hq, D] and layer `layer` of the cache: row t attends to keys
// max(0, p - window + 1) .. p of slot row_slot[t] (p = row_pos[t]; window 0: all), scores scale * q.k,
// soft-capped when softcap > 0. workspace: nullptr, or decode_attention_workspace(T, Hq, Hkv, D, M) bytes
// of device memory, 256-byte aligned (enables the key splits). sinks [Hq] (gpt-oss; nullptr: none): one more
// softmax column per head with that logit and no value (kernels/cpu/attention.h attention_sinks).
void decode_attention(bf16* out, const bf16* q, const bf16* k_cache, const bf16* v_cache, const int32_t* row_slot,
                      const int32_t* row_pos, int T, int layer, int N, int L, int M, int Hq, int Hkv, int D,
                      float scale, int window = 0, float softcap = 0.0f, void* workspace = nullptr,
                      const bf16* sinks = nullptr);

}  // namespace tandem::cuda
