// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Mixture-of-experts ops on the CUDA backend (twins of kernels/cpu/moe.h, whose comment defines the routing, the
// assignment order and the grouped layout): bf16 activations, fp32 routing weights and probabilities, fp32 math.
// T = tokens, E = experts (<= 512), K = experts per token, N = T*K assignments, C = hidden size, IN / OUT = a
// linear layer's input / output features, R = LoRA rank.
// Decisions a reader must know:
//  - No host sync and no device-to-host copy anywhere: the expert counts and offsets[E+1] stay on the device,
//    every kernel runs on context().stream, nothing allocates, so a step with MoE layers captures as a graph.
//  - moe_sort_count is a stable counting sort in four kernels, deterministic (no result depends on the order
//    atomics land in): per-chunk histograms, one block scanning them into each (chunk, expert)'s first row and
//    offsets[], a per-chunk stable scatter that writes inv[], then order[inv[a]] = a. The chunk histograms live
//    in order[] until the last kernel overwrites it (they fit: a chunk holds at least 2E assignments).
//  - The grouped GEMMs read the offsets on the device. Their grid is an upper bound known on the host
//    (ceil(N/128) + E row tiles); each block finds its expert and row tile by a warp scan over the offsets and
//    returns when it is past the last tile. One kernel for all three products: bf16 mma.sync m16n8k16 with fp32
//    accumulation, 128x128x32 block tiles, 4 warps of 64x64, a 4-stage cp.async pipeline; warps (and 16-row /
//    16-column slabs) wholly outside a partial tile skip their multiply-adds, so the small LoRA shapes
//    (OUT or IN = R <= 64) and an expert's last, short tile run the same kernel without a separate path.
//    16-byte loads when IN and OUT are multiples of 8 and the pointers and w_stride are aligned; otherwise the
//    same kernel with per-element loads (any IN / OUT).
//  - The large expert projections and the LoRA A products (enough rows per expert) first run every expert's
//    whole chunks of rows as cuBLASLt GEMMs batched over device-built pointer arrays
//    (kernels/cuda/expert_gemm.h); the kernel then does each expert's remaining rows. The products that widen
//    a few (<= 64) columns into a wide output (LoRA B forward, LoRA A input gradient) run in a kernel of their
//    own (kernels/cuda/expert_widen.h). Same op, rows split differently (the sum order inside a row's dot
//    products may differ: bf16-rounding level).
//  - grouped_matmul_weight_grad is the same kernel over (IN tile, OUT tile, expert): the reduction runs over
//    the expert's rows, and each block owns its [OUT, IN] tile, so dW is added to without atomics
//    (deterministic). One block loops over all of an expert's rows: fast for the balanced routing of training,
//    slow (but correct) when one expert takes most of the batch.
//  - permute scatters each token's row to its K rows (read once); unpermute and the backwards are gathers (no
//    atomics), summing a token's K rows in j order in fp32; 16-byte vectors when C % 8 == 0 and the pointers are
//    aligned, single elements otherwise.
//  - The router runs one warp per token: fp32 softmax (expf, as on the CPU), top-K by repeated argmax (ties: the
//    lower expert), renorm optional. Its backward writes bf16 dlogits.
#pragma once

#include <cstdint>

#include "core/cuda/context.h"

namespace tandem::cuda {

// probs[T,E] (fp32) = softmax(logits[T,E]); idx[T,K] the K largest, descending (ties: the lower index first);
// w[T,K] (fp32) their probabilities, divided by their sum when renorm.
// given: idx holds an injected choice (cpu/moe.h); only probs and w are written.
void moe_router_forward(int32_t* idx, float* w, float* probs, const bf16* logits, int T, int E, int K, bool renorm,
                        bool given);

// dlogits[T,E] (bf16, written) from dw[T,K] (fp32), the gradient of the routing weights.
void moe_router_backward(bf16* dlogits, const float* dw, const float* probs, const int32_t* idx, const float* w, int T,
                         int E, int K, bool renorm, const float* dense, const int32_t* real_rows);
// The load-balancing loss (cpu/moe.h): one block per expert sums its probabilities and choices over the real rows
// in a fixed order (deterministic); moe_aux_loss is one block. real_rows, label_count, grad_scale: device memory.
void moe_aux_stats(float* stats, const float* probs, const int32_t* idx, const int32_t* real_rows, int T, int E, int K,
                   bool first);
void moe_aux_loss(float* dense, double* loss_sum, const float* stats, const int32_t* real_rows, const float* label_count,
                  const float* grad_scale, int E, int layers, float coef, bool step);

// order[N], inv[N], offsets[E+1] as on the CPU (device memory, written). idx[N]: the router's [T,K]; indices
// outside [0, E) are not counted (a caller bug: order and inv are then incomplete).
void moe_sort_count(int32_t* order, int32_t* inv, int32_t* offsets, const int32_t* idx, int N, int E);

// xs[N,C] (written; N = T*K): row inv[t*K + j] = x[t] (a scatter: each token's row is read once).
void moe_permute(bf16* xs, const bf16* x, const int32_t* inv, int T, int K, int C);
// dx[T,C] += sum over j of dxs[inv[t*K + j]] (j in order, fp32).
void moe_permute_backward(bf16* dx, const bf16* dxs, const int32_t* inv, int T, int K, int C);

// out[T,C] (written) = sum over j of w[t,j] * ys[inv[t*K + j]].
void moe_unpermute(bf16* out, const bf16* ys, const float* w, const int32_t* inv, int T, int K, int C);
// dys[N,C] (bf16, written): row inv[t*K+j] = w[t,j] * dout[t]; dw[T,K] (fp32, written) = dot(dout[t], ys[inv[t*K+j]]).
void moe_unpermute_backward(bf16* dys, float* dw, const bf16* dout, const bf16* ys, const float* w, const int32_t* inv,
                            int T, int K, int C);

// For each expert e, rows offsets[e] <= r < offsets[e+1] (offsets on the device):
// out[r,:] = (accumulate ? out[r,:] : 0) + alpha * inp[r,:] @ W_e^T (+ bias_e, not scaled by alpha, when bias is
// not nullptr: bias + e * bias_stride, [OUT]). W_e = w + e * w_stride, [OUT, IN] bf16.
void grouped_matmul_forward(bf16* out, const bf16* inp, const bf16* w, int64_t w_stride, const bf16* bias,
                            int64_t bias_stride, const int32_t* offsets, int N, int IN, int OUT, int E, float alpha,
                            bool accumulate);
// dinp[r,:] += alpha * dout[r,:] @ W_e.
void grouped_matmul_backward(bf16* dinp, const bf16* dout, const bf16* w, int64_t w_stride, const int32_t* offsets,
                             int N, int IN, int OUT, int E, float alpha);
// dW_e[OUT,IN] (fp32, dw + e * dw_stride) += alpha * dout_e^T @ inp_e over expert e's rows; an expert without
// rows is left as it is. Meant for LoRA (OUT or IN = R), correct for any size.
void grouped_matmul_weight_grad(float* dw, int64_t dw_stride, const bf16* dout, const bf16* inp, const int32_t* offsets,
                                int N, int IN, int OUT, int E, float alpha);

}  // namespace tandem::cuda
