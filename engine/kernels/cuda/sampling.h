// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Next-token choice on the CUDA backend (twin of kernels/cpu/sampling.h, same names and arguments): the
// repetition penalty and sampling (greedy, temperature, top-k, top-p, min-p), one block per row, fp32 logits.
// T = rows, V = vocabulary, N = sequence slots, M = positions per slot.
// Decisions a reader must know:
//  - Every pointer is DEVICE memory (logits, tokens, row_slot, row_len, params, draw, out): the launchers
//    never read them, so a decode step with its sampling can be one CUDA graph whose settings change between
//    replays. What the CPU twin checks on the host and throws for is handled on the device instead: a row
//    whose slot is outside [0, N) or whose length is outside [0, M] is not penalised; token ids outside
//    [0, V) are ignored; top_k < 0 counts as 0 (off) and min_p is clamped to [0, 1].
//  - Same order, meaning and draw as the CPU (penalty, temperature, top-k, top-p, min-p, softmax, the first
//    id in id order whose running probability exceeds u = sampling_draw_uniform(seed, draw)). Greedy rows
//    (temperature <= 0) are the argmax, lowest id on ties, and leave their logits unchanged: exactly the CPU's
//    choice. Sampled rows agree with the CPU except where the rounding of a sum decides (the softmax total,
//    top-p's cumulative mass at its cut, the running sum at u): the GPU sums in double in another order.
//  - Sampled rows overwrite their logits with the distribution drawn from (0 for removed ids), as the CPU.
//    One difference at the edges: the CPU keeps ids whose logit is -inf (with probability 0) through the
//    filters; here a -inf score means "removed" (the filters mark removals that way), which changes only the
//    fallback when u lies beyond a total rounded below 1.
//  - SamplingParams and sampling_draw_uniform come from core/sampling_params.h (the CPU header re-exports
//    SamplingParams).
//  - Not in the op table (backend/backend.h): their arguments (fp32 logits on both backends, SamplingParams,
//    int64 draws, int32 outputs) are not the decoder blocks' kinds, and the inference runtime calls them once
//    per step after the lm_head, as the trainer calls the optimizer.
#pragma once

#include <cstdint>

#include "core/sampling_params.h"

namespace tandem::cuda {

// logits [T, V] in place: row t's logits at the ids tokens[row_slot[t] * M + 0 .. row_len[t] - 1] become
// x / penalty (x > 0) or x * penalty, each id once. tokens [N, M]; params [T]. V up to ~1.8M (a bitmap of the
// vocabulary in shared memory).
void repetition_penalty(float* logits, const int32_t* tokens, const int32_t* row_slot, const int32_t* row_len,
                        const SamplingParams* params, int T, int V, int N, int M);

// out [T]: the chosen ids. logits [T, V]; params [T]; draw [T]: each row's draw index.
void sample_tokens(int32_t* out, float* logits, const SamplingParams* params, const int64_t* draw, int T, int V);

}  // namespace tandem::cuda
