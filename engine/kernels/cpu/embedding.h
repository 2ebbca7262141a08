// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Token embedding lookup on the CPU backend. N = tokens, C = channels, V = vocab.
// An id outside the table is a user-visible mismatch (tokenizer vs model), so it throws Error{InvalidInput}
// naming the id, checked before anything is written. Backward ACCUMULATES into dtable and is deterministic
// (parallel over channel blocks, tokens added in order), even with repeated ids.
#pragma once

#include <cstdint>

namespace tandem::cpu {

// out[N,C] = table[ids[N], :] with table[V,C].
void embedding_forward(float* out, const int32_t* ids, const float* table, int N, int C, int V);

// dtable[V,C] += scatter of dout[N,C] to rows ids[N].
void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int N, int C, int V);

}  // namespace tandem::cpu
