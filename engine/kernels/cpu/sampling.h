// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Next-token choice on the CPU backend: the repetition penalty and sampling (greedy, temperature, top-k,
// top-p, min-p), one row per sequence. T = rows, V = vocabulary, N = sequence slots, M = positions per slot.
// Decisions a reader must know:
//  - transformers' order and meaning: the repetition penalty on the raw logits (a seen token's logit x
//    becomes x / penalty when x > 0, x * penalty otherwise; each seen id once), then temperature, top-k
//    (tokens below the k-th largest score removed; ties kept), top-p (ascending sort, tokens whose cumulative
//    probability is <= 1 - top_p removed, the most likely always kept), min-p (tokens whose probability is
//    below min_p times the largest removed), then a draw from the softmax of what is left.
//  - Deterministic: the draw of a row is u = the top 53 bits of a SplitMix64 hash of (seed, draw index) (the
//    index is the number of tokens the sequence has generated), and the token is the first id, in id order,
//    where the running sum of probabilities exceeds u times their total. A sequence's tokens therefore do not
//    depend on which other sequences share the batch, nor on the thread count.
//  - Greedy (temperature <= 0): the largest logit after the penalty, the lowest id on ties (torch.argmax).
//  - SamplingParams (core/sampling_params.h) is plain data so the CUDA twins (kernels/cuda/sampling.h, same
//    names and arguments) can read it from device memory.
#pragma once

#include <cstdint>

#include "core/sampling_params.h"

namespace tandem::cpu {

// The settings of one row (core/sampling_params.h; shared with the CUDA twins).
using SamplingParams = tandem::SamplingParams;

// logits [T, V] in place: row t penalised at the ids tokens[row_slot[t] * M + 0 .. row_len[t]-1] (the
// sequence so far: prompt and generated tokens) by params[t].repetition_penalty. tokens [N, M].
void repetition_penalty(float* logits, const int32_t* tokens, const int32_t* row_slot, const int32_t* row_len,
                        const SamplingParams* params, int T, int V, int N, int M);

// out [T]: the chosen ids. logits [T, V] is overwritten, for the sampled rows (temperature > 0), with the
// distribution drawn from (0 for removed ids; greedy rows are left as they were). draw [T]: each row's draw
// index. params [T].
void sample_tokens(int32_t* out, float* logits, const SamplingParams* params, const int64_t* draw, int T, int V);

// The uniform draw of sample_tokens: [0, 1) from (seed, draw index); the same value as
// tandem::sampling_draw_uniform (core/sampling_params.h), which the CUDA kernels call.
double sampling_uniform(uint64_t seed, int64_t draw);

}  // namespace tandem::cpu
