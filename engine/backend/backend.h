// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The op table: every op the decoder blocks use, as a C++20 concept that each backend must satisfy, and
// the list of the ops' names (the self-test checks that each has at least one case).
// Decisions a reader must know:
//  - One list, TANDEM_BACKEND_OPS, names each op with the argument list of a typical call; the concept and
//    the name list are both generated from it, so "a twin is missing" or "a twin's arguments drifted" is
//    one compile error at the static_assert in the backend's header, never a runtime surprise.
//  - Arguments are the kernels' own (shape comments in kernels/cpu/*.h): B::Act is the activation type
//    (float on the CPU, bf16 on CUDA); statistics, gradients of LoRA weights and losses are fp32 on both.
//    Per-batch scalars the kernels read (the dropout seed, the loss's grad_scale) are passed as pointers on
//    both backends (host memory on the CPU, device memory on CUDA, so a CUDA graph replays each batch's
//    values).
//  - Inference's KV cache ops (kv_cache_write, decode_attention) are in the table; its sampling ops
//    (repetition_penalty, sample_tokens: fp32 logits, SamplingParams, int64 draws) are not: they are no block
//    op, and the inference runtime calls kernels/*/sampling.h directly after the lm_head.
//  - The optimizer (adamw_update, grad norm) and CUDA-only plumbing (cuBLASLt GEMM, cuDNN attention, the
//    runtime's streams and copies) are not in the table: the optimizer's two forms differ by design (one
//    tensor per call on the CPU, one launch over a descriptor table on CUDA), and attention's cuDNN path is
//    chosen by the CUDA runtime per batch behind the same attention_forward / attention_backward shapes.
#pragma once

#include <array>
#include <concepts>
#include <cstdint>
#include <string_view>

#include "core/quant4.h"

namespace tandem {

// X(op, (arguments of a call)) for every op. Argument names: x/cx an Act pointer (mutable/const), f/cf
// float, d double, ci int32 (ids, positions, targets, cu_seqlens; i: written, the MoE routing), seed (const uint64_t*), scale (const
// float*), rope (B::RopeTable), ws (void* workspace), q4 (a 4-bit weight, core/quant4.h), u8/cu8 FP8 codes or
// other bytes (uint8_t*, mutable/const), n int, n64 int64,
// s float, p double, flag bool.
#define TANDEM_BACKEND_OPS(X)                                                       \
    X(embedding_forward, (x, ci, cx, n, n, n))                                      \
    X(embedding_backward, (f, cx, ci, n, n, n))                                     \
    X(rmsnorm_forward, (x, f, cx, cx, n, n, s, s))                                  \
    X(residual_rmsnorm_forward, (x, x, f, cx, cx, cx, n, n, s, s))                  \
    X(rmsnorm_backward, (x, f, cx, cx, cx, cf, n, n, s))                            \
    X(matmul_forward, (x, cx, cx, cx, n, n, n))                                     \
    X(matmul_backward, (x, f, f, cx, cx, cx, n, n, n))                              \
    X(lora_forward, (x, x, cx, cx, cx, s, n, n, n, n))                              \
    X(lora_tmp_forward, (x, cx, cx, n, n, n))                                       \
    X(lora_backward, (x, f, f, x, cx, cx, cx, cx, cx, s, n, n, n, n))               \
    X(dropout_forward, (x, cx, seed, n, n, n64, p))                                 \
    X(dropout_backward, (x, cx, seed, n, n, n64, p))                                \
    X(rope_forward, (x, cx, ci, rope, n, n, n))                                     \
    X(rope_backward, (x, cx, ci, rope, n, n, n))                                    \
    X(attention_forward, (x, f, cx, cx, cx, ci, n, n, n, n, n, s, n, n, s))         \
    X(attention_backward, (x, x, x, cx, cx, cx, cx, cx, cf, ci, n, n, n, n, n, s, n, ws, n, s)) \
    X(attention_sinks, (x, f, cx, n, n, n))                                         \
    X(swiglu_forward, (x, cx, cx, n, n))                                            \
    X(swiglu_backward, (x, x, cx, cx, cx, n, n))                                    \
    X(geglu_forward, (x, cx, cx, n, n))                                             \
    X(geglu_backward, (x, x, cx, cx, cx, n, n))                                     \
    X(clamped_swiglu_forward, (x, cx, cx, n, n, s, s))                              \
    X(clamped_swiglu_backward, (x, x, cx, cx, cx, n, n, s, s))                      \
    X(lm_head_cross_entropy, (x, f, cx, cx, ci, n, n, n, scale, n, ws, s))          \
    X(lm_head_logits, (f, cx, cx, n, n, n, s))                                      \
    X(add, (x, cx, cx, n64))                                                        \
    X(accumulate, (x, cx, n64))                                                     \
    X(axpy, (x, s, cx, n64))                                                        \
    X(scale, (x, s, n64))                                                           \
    X(copy, (x, cx, n64))                                                           \
    X(fill, (x, s, n64))                                                            \
    X(zero, (x, n64))                                                               \
    X(sum, (d, cf, n64, flag))                                                      \
    X(kv_cache_write, (x, x, cx, cx, ci, ci, n, n, n, n, n, n))                     \
    X(decode_attention, (x, cx, cx, cx, ci, ci, n, n, n, n, n, n, n, n, s, n, s))          \
    X(moe_router_forward, (i, f, f, cx, n, n, n, flag, flag))                       \
    X(moe_router_backward, (x, cf, cf, ci, cf, n, n, n, flag, cf, ci))              \
    X(moe_aux_stats, (f, cf, ci, ci, n, n, n, flag))                                \
    X(moe_aux_loss, (f, d, cf, ci, scale, scale, n, n, s, flag))                    \
    X(moe_sort_count, (i, i, i, ci, n, n))                                          \
    X(moe_permute, (x, cx, ci, n, n, n))                                            \
    X(moe_permute_backward, (x, cx, ci, n, n, n))                                   \
    X(moe_unpermute, (x, cx, cf, ci, n, n, n))                                      \
    X(moe_unpermute_backward, (x, f, cx, cx, cf, ci, n, n, n))                      \
    X(grouped_matmul_forward, (x, cx, cx, n64, cx, n64, ci, n, n, n, n, s, flag))   \
    X(grouped_matmul_backward, (x, cx, cx, n64, ci, n, n, n, n, s))                 \
    X(grouped_matmul_weight_grad, (f, n64, cx, cx, ci, n, n, n, n, s))              \
    X(quantize_fp8_rows, (u8, f, cx, n, n))                                         \
    X(quantize_fp8_grad_rows, (u8, f, cx, n, n))                                    \
    X(fp8_transpose, (u8, f, cu8, cf, n, n))                                        \
    X(fp8_matmul, (x, cu8, cf, cu8, cf, cx, n, n, n, s, x))                         \
    X(dequantize_4bit_fp8, (u8, f, q4, n64, n, n, flag))                            \
    X(activation_forward_fp8, (x, u8, f, cx, cx, n, n, flag))                       \
    X(rmsnorm_forward_fp8, (x, x, u8, f, f, cx, cx, cx, n, n, s, s))                \
    X(rmsnorm_backward_fp8, (x, u8, f, cx, cx, cx, cf, n, n, s))                    \
    X(activation_backward_fp8, (x, x, u8, f, u8, f, cx, cx, cx, n, n, flag))        \
    X(dequantize_mxfp4, (x, cu8, cu8, n64, n, n, flag))

#define TANDEM_BACKEND_OP_REQUIRE(op, args) B::op args;
#define TANDEM_BACKEND_OP_NAME(op, args) std::string_view(#op),

// B::Act, B::RopeTable, a name, and every op of TANDEM_BACKEND_OPS callable with B's types.
template <class B>
concept Backend = requires(typename B::Act* x, const typename B::Act* cx, float* f, const float* cf, double* d,
                           const int32_t* ci, int32_t* i, const uint64_t* seed, const float* scale,
                           const typename B::RopeTable& rope, void* ws, const Quant4Ref& q4, uint8_t* u8,
                           const uint8_t* cu8, int n, int64_t n64,
                           float s, double p,
                           bool flag) {
    typename B::Act;
    typename B::RopeTable;
    { B::kName } -> std::convertible_to<std::string_view>;
    TANDEM_BACKEND_OPS(TANDEM_BACKEND_OP_REQUIRE)
};

inline constexpr std::array kBackendOps = {TANDEM_BACKEND_OPS(TANDEM_BACKEND_OP_NAME)};

// A backend struct forwards op `op` to the same-named kernel in namespace `ns`: one line per op, and only
// where the kernel accepts the arguments (otherwise the forwarder does not exist and the concept fails).
#define TANDEM_FORWARD_OP(ns, op)                                                   \
    template <class... A>                                                           \
    static auto op(A&&... a) -> decltype(ns::op(static_cast<A&&>(a)...)) {          \
        return ns::op(static_cast<A&&>(a)...);                                      \
    }

}  // namespace tandem
