// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Fused, chunked lm_head + cross-entropy on the CPU backend.
// N = tokens, C = hidden channels, V = vocab, K = chunk_rows.
// Decisions: logits are made K rows at a time into scratch[K,V] and turned into the loss and their
// gradient in place, so full [N,V] logits never exist. The loss is a SUM over label tokens (targets != -100)
// and the caller normalises: grad_scale is the factor the gradient is multiplied by (1 / label tokens of
// the whole optimizer step, times any loss scale), so accumulation over micro-batches is exact.
// Softmax in fp32 with max subtraction, sums of exponentials in double. Deterministic for any thread
// count: rows are independent, row losses are summed serially in row order. No gradient for the lm_head
// weight (frozen under LoRA, tied or not). softcap > 0 (Gemma 2's final_logit_softcapping): the logits are
// softcap * tanh(logits / softcap), and the gradient goes through the tanh.
#pragma once

#include <cstdint>

namespace tandem::cpu {

inline constexpr int32_t kIgnoreIndex = -100;  // torch's default ignore_index

// Returns sum over rows with targets[n] != -100 of -log softmax(hidden[n] @ weight^T)[targets[n]].
// dhidden[N,C] (nullptr for evaluation) is WRITTEN with grad_scale * d(loss_sum)/d(hidden); rows with an
// ignored target get 0. hidden[N,C], weight[V,C], targets[N] int32 (-100 or 0..V-1, anything else throws
// Error{InvalidInput} naming the row and the id), scratch[chunk_rows,V].
double lm_head_cross_entropy(float* dhidden, const float* hidden, const float* weight, const int32_t* targets, int N,
                             int C, int V, float grad_scale, int chunk_rows, float* scratch, float softcap = 0.0f);

// The form the block code uses on both backends (twin of the CUDA one): the same loss, written per row into
// losses[N] (0 for ignored rows; fp32, as the CUDA twin writes them) instead of summed, with grad_scale read
// through a pointer. Sum the rows with sum() (elementwise.h). workspace: the [chunk_rows,V] fp32 scratch.
void lm_head_cross_entropy(float* dhidden, float* losses, const float* hidden, const float* weight,
                           const int32_t* targets, int N, int C, int V, const float* grad_scale, int chunk_rows,
                           void* workspace, float softcap = 0.0f);

// out[N,V] = hidden[N,C] @ weight[V,C]^T: full logits, for evaluation and generation.
void lm_head_logits(float* out, const float* hidden, const float* weight, int N, int C, int V,
                    float softcap = 0.0f);

}  // namespace tandem::cpu
