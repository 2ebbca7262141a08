// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Mixture-of-experts ops on the CPU backend (fp32; the CUDA twins in kernels/cuda/moe.h take bf16 where these
// take float activations). T = tokens, E = experts, K = experts per token (top-k), N = T*K assignments,
// C = hidden size, IN / OUT = a linear layer's input / output features, R = LoRA rank.
// The routing as transformers computes it (Qwen3-MoE, Mixtral; gpt-oss's top-k-then-softmax is the same
// function): probs = softmax(logits) in fp32, the K largest (ties: the lower expert first), and with renorm
// the chosen weights divided by their sum.
// Decisions a reader must know:
//  - Assignment a = t*K + j is token t's j-th choice. moe_sort_count orders the assignments by expert, stably
//    (within an expert by a), and gives each expert's first row: offsets[e] .. offsets[e+1] are expert e's rows
//    of every [N, ...] buffer. Both twins compute the same order, so the grouped ops see the same rows.
//  - The grouped ops take the offsets as an array in the backend's memory (device memory on CUDA: no expert
//    count ever goes to the host, so a step with MoE layers stays one host sync and capturable as a graph).
//  - Expert e's weight is w + e * w_stride, an [OUT, IN] row-major matrix (leading dimension IN): the gate half
//    of a fused gate_up_proj [E, 2F, C] is w_stride = 2F*C, its up half the same from w + F*C.
//  - Gathers, never scatters with atomics: unpermute and permute's backward sum a token's K rows in j order, so
//    both are deterministic.
//  - Gradient convention as in matmul.h: input gradients accumulate (+=) unless a comment says written.
#pragma once

#include <cstdint>

namespace tandem::cpu {

// probs[T,E] = softmax(logits[T,E]) (kept for backward); idx[T,K] the K largest in descending order (ties: the
// lower index first); w[T,K] their probabilities, divided by their sum when renorm. given: idx already holds
// each token's K distinct experts (a routing injected by a check, e.g. the CPU's into a CUDA step, so bf16
// near-ties cannot pick other experts): only probs and w are computed.
void moe_router_forward(int32_t* idx, float* w, float* probs, const float* logits, int T, int E, int K, bool renorm,
                        bool given);

// dlogits[T,E] (written) from dw[T,K], the gradient of the routing weights, plus (dense not nullptr: the
// load-balancing loss) dense[E], a gradient of every probability of the first *real_rows rows (padding rows
// after them get none).
void moe_router_backward(float* dlogits, const float* dw, const float* probs, const int32_t* idx, const float* w,
                         int T, int E, int K, bool renorm, const float* dense, const int32_t* real_rows);

// The load-balancing loss (transformers' load_balancing_loss_func, on when config.json has output_router_logits):
// over the real rows of every MoE layer, f_e = the fraction of (row, choice) pairs routed to e... counted per row:
// f_e = count_e / rows, P_e = the mean probability of e, aux = E * sum_e f_e P_e; the loss adds coef * aux.
// moe_aux_stats accumulates one layer into stats[2E] (first: overwrite): [0,E) the sum of probs over the first
// *real_rows rows, [E,2E) how often each expert was chosen in them.
void moe_aux_stats(float* stats, const float* probs, const int32_t* idx, const int32_t* real_rows, int T, int E, int K,
                   bool first);
// After the last layer: rows = layers * *real_rows; loss_sum[0] (the batch's cross-entropy sum) += coef * aux *
// *label_count (the loss divides by the label tokens: coef * aux per micro-batch, as transformers adds it to its
// mean), and with step loss_sum[1] (the step's sum) += the batch's whole loss_sum[0], the one addition a host
// summing the batches makes (so an asynchronous step's sum has the same bits); dense[E] (written) = the gradient
// of each probability, coef * E * f_e / rows, times the micro-batch's share *label_count * *grad_scale.
void moe_aux_loss(float* dense, double* loss_sum, const float* stats, const int32_t* real_rows, const float* label_count,
                  const float* grad_scale, int E, int layers, float coef, bool step);

// order[N]: the assignments sorted by expert, stably; inv[N]: inv[order[i]] = i (where assignment a's row is);
// offsets[E+1]: exclusive prefix sum of the per-expert counts (offsets[E] = N). idx[N] = the router's [T,K].
void moe_sort_count(int32_t* order, int32_t* inv, int32_t* offsets, const int32_t* idx, int N, int E);

// xs[N,C] (written; N = T*K): row inv[t*K + j] = x[t] for every j (row i = x[order[i] / K]).
void moe_permute(float* xs, const float* x, const int32_t* inv, int T, int K, int C);
// dx[T,C] += sum over j of dxs[inv[t*K + j]] (j in order).
void moe_permute_backward(float* dx, const float* dxs, const int32_t* inv, int T, int K, int C);

// out[T,C] = sum over j of w[t,j] * ys[inv[t*K + j]] (written; j in order).
void moe_unpermute(float* out, const float* ys, const float* w, const int32_t* inv, int T, int K, int C);
// dys[N,C] (written): row inv[t*K+j] = w[t,j] * dout[t]; dw[T,K] (written) = dot(dout[t], ys[inv[t*K+j]]).
void moe_unpermute_backward(float* dys, float* dw, const float* dout, const float* ys, const float* w,
                            const int32_t* inv, int T, int K, int C);

// For each expert e, rows r of offsets[e] <= r < offsets[e+1]:
// out[r,:] = (accumulate ? out[r,:] : 0) + alpha * inp[r,:] @ W_e^T (+ bias_e, when bias is not nullptr:
// expert e's bias [OUT] at bias + e * bias_stride). W_e = w + e * w_stride, [OUT, IN].
void grouped_matmul_forward(float* out, const float* inp, const float* w, int64_t w_stride, const float* bias,
                            int64_t bias_stride, const int32_t* offsets, int N, int IN, int OUT, int E, float alpha,
                            bool accumulate);
// dinp[r,:] += alpha * dout[r,:] @ W_e (the input gradient; the base weights are frozen).
void grouped_matmul_backward(float* dinp, const float* dout, const float* w, int64_t w_stride, const int32_t* offsets,
                             int N, int IN, int OUT, int E, float alpha);
// dW_e[OUT,IN] += alpha * dout_e^T @ inp_e over expert e's rows; dW_e = dw + e * dw_stride (fp32, as every LoRA
// gradient). An expert without rows is left as it is.
void grouped_matmul_weight_grad(float* dw, int64_t dw_stride, const float* dout, const float* inp,
                                const int32_t* offsets, int N, int IN, int OUT, int E, float alpha);

}  // namespace tandem::cpu
