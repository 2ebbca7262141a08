// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Fused, chunked lm_head + cross-entropy + gradient on the CUDA backend (twin of
// kernels/cpu/cross_entropy.h). Rows are processed chunk_rows at a time: logits[K,V] = hidden @ weight^T in
// fp32 into the workspace, one kernel per chunk turns each row into its loss and, in place, into the bf16
// gradient of its logits (grad_scale * (softmax - onehot)), and one GEMM adds the chunk's dhidden. Full
// [N, V] logits never exist. Softmax/loss math in fp32; per-row losses are written to losses[N] so the
// sum is deterministic (elementwise.h sum) and needs no host sync. softcap > 0: the logits are
// softcap * tanh(logits / softcap) (Gemma 2's final_logit_softcapping) and the gradient goes through the tanh.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/cuda/context.h"

namespace tandem::cuda {

// Bytes of workspace lm_head_cross_entropy needs for chunk_rows rows of a V-wide vocabulary.
size_t lm_head_cross_entropy_workspace(int chunk_rows, int V);

// losses[N] (fp32, written): -log softmax(hidden[n] @ weight^T)[targets[n]], 0 where targets[n] == -100.
// dhidden[N,C] (bf16, written; nullptr for evaluation) = grad_scale * d(loss sum)/d(hidden), 0 for ignored
// rows. hidden[N,C], weight[V,C] bf16, targets[N] int32 on the device (validated on the host).
void lm_head_cross_entropy(bf16* dhidden, float* losses, const bf16* hidden, const bf16* weight, const int32_t* targets,
                           int N, int C, int V, float grad_scale, int chunk_rows, void* workspace,
                           float softcap = 0.0f);
// The same with grad_scale read on the device from grad_scale_device [1] when the kernels run (the CUDA
// model's way: a captured CUDA graph then replays with each batch's scale).
void lm_head_cross_entropy(bf16* dhidden, float* losses, const bf16* hidden, const bf16* weight, const int32_t* targets,
                           int N, int C, int V, const float* grad_scale_device, int chunk_rows, void* workspace,
                           float softcap = 0.0f);

// out[N,V] (fp32) = hidden @ weight^T: full logits, for evaluation, generation and the self-test.
void lm_head_logits(float* out, const bf16* hidden, const bf16* weight, int N, int C, int V, float softcap = 0.0f);

}  // namespace tandem::cuda
