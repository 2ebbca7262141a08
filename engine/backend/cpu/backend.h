// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// CpuBackend: the op table (backend/backend.h) over kernels/cpu, fp32 activations. The fp32 oracle every
// CUDA op and step is checked against.
#pragma once

#include <cstdint>
#include <string_view>

#include "backend/backend.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/fp8.h"
#include "kernels/cpu/kv_cache.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/moe.h"
#include "kernels/cpu/mxfp4.h"
#include "kernels/cpu/nf4.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/swiglu.h"

namespace tandem {

struct CpuBackend {
    using Act = float;
    using RopeTable = cpu::RopeTable;
    static constexpr std::string_view kName = "cpu";

    TANDEM_FORWARD_OP(cpu, embedding_forward)
    TANDEM_FORWARD_OP(cpu, embedding_backward)
    TANDEM_FORWARD_OP(cpu, rmsnorm_forward)
    TANDEM_FORWARD_OP(cpu, residual_rmsnorm_forward)
    TANDEM_FORWARD_OP(cpu, rmsnorm_backward)
    TANDEM_FORWARD_OP(cpu, matmul_forward)
    TANDEM_FORWARD_OP(cpu, matmul_backward)
    TANDEM_FORWARD_OP(cpu, dequantize_4bit)
    TANDEM_FORWARD_OP(cpu, dequantize_mxfp4)
    TANDEM_FORWARD_OP(cpu, lora_forward)
    TANDEM_FORWARD_OP(cpu, lora_tmp_forward)
    TANDEM_FORWARD_OP(cpu, lora_backward)
    TANDEM_FORWARD_OP(cpu, dropout_forward)
    TANDEM_FORWARD_OP(cpu, dropout_backward)
    TANDEM_FORWARD_OP(cpu, rope_forward)
    TANDEM_FORWARD_OP(cpu, rope_backward)
    TANDEM_FORWARD_OP(cpu, attention_sinks)
    TANDEM_FORWARD_OP(cpu, swiglu_forward)
    TANDEM_FORWARD_OP(cpu, swiglu_backward)
    TANDEM_FORWARD_OP(cpu, geglu_forward)
    TANDEM_FORWARD_OP(cpu, geglu_backward)
    TANDEM_FORWARD_OP(cpu, clamped_swiglu_forward)
    TANDEM_FORWARD_OP(cpu, clamped_swiglu_backward)
    TANDEM_FORWARD_OP(cpu, lm_head_cross_entropy)
    TANDEM_FORWARD_OP(cpu, lm_head_logits)
    TANDEM_FORWARD_OP(cpu, add)
    TANDEM_FORWARD_OP(cpu, accumulate)
    TANDEM_FORWARD_OP(cpu, axpy)
    TANDEM_FORWARD_OP(cpu, scale)
    TANDEM_FORWARD_OP(cpu, copy)
    TANDEM_FORWARD_OP(cpu, fill)
    TANDEM_FORWARD_OP(cpu, zero)
    TANDEM_FORWARD_OP(cpu, sum)
    TANDEM_FORWARD_OP(cpu, kv_cache_write)
    TANDEM_FORWARD_OP(cpu, decode_attention)
    TANDEM_FORWARD_OP(cpu, moe_router_forward)
    TANDEM_FORWARD_OP(cpu, moe_router_backward)
    TANDEM_FORWARD_OP(cpu, moe_aux_stats)
    TANDEM_FORWARD_OP(cpu, moe_aux_loss)
    TANDEM_FORWARD_OP(cpu, moe_sort_count)
    TANDEM_FORWARD_OP(cpu, moe_permute)
    TANDEM_FORWARD_OP(cpu, moe_permute_backward)
    TANDEM_FORWARD_OP(cpu, moe_unpermute)
    TANDEM_FORWARD_OP(cpu, moe_unpermute_backward)
    TANDEM_FORWARD_OP(cpu, grouped_matmul_forward)
    TANDEM_FORWARD_OP(cpu, grouped_matmul_backward)
    TANDEM_FORWARD_OP(cpu, grouped_matmul_weight_grad)
    TANDEM_FORWARD_OP(cpu, quantize_fp8_rows)
    TANDEM_FORWARD_OP(cpu, quantize_fp8_grad_rows)
    TANDEM_FORWARD_OP(cpu, fp8_transpose)
    TANDEM_FORWARD_OP(cpu, fp8_matmul)
    TANDEM_FORWARD_OP(cpu, dequantize_4bit_fp8)
    TANDEM_FORWARD_OP(cpu, activation_forward_fp8)
    TANDEM_FORWARD_OP(cpu, rmsnorm_forward_fp8)
    TANDEM_FORWARD_OP(cpu, rmsnorm_backward_fp8)
    TANDEM_FORWARD_OP(cpu, activation_backward_fp8)
    TANDEM_FORWARD_OP(cpu, quantize_fp8_weight)  // load only (not a block op)

    // Attention has the CUDA shape: max_seqlen sizes CUDA's grid and its workspace is planned; the CPU kernel
    // walks each sample whole and keeps its own [Hq,T] scratch. window: the sliding window (0: none); softcap:
    // the scores' soft-capping (0: none).
    static void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                                  const int32_t* cu_seqlens, int S, int T, int Hq, int Hkv, int D, float scale,
                                  int /*max_seqlen*/, int window, float softcap = 0.0f) {
        cpu::attention_forward(out, lse, q, k, v, cu_seqlens, S, T, Hq, Hkv, D, scale, window, softcap);
    }
    static void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                                   const float* v, const float* out, const float* lse, const int32_t* cu_seqlens,
                                   int S, int T, int Hq, int Hkv, int D, float scale, int /*max_seqlen*/,
                                   void* /*workspace*/, int window, float softcap = 0.0f) {
        cpu::attention_backward(dq, dk, dv, dout, q, k, v, out, lse, cu_seqlens, S, T, Hq, Hkv, D, scale, window,
                                softcap);
    }
};

static_assert(Backend<CpuBackend>, "CpuBackend lacks an op of TANDEM_BACKEND_OPS or takes other arguments");

}  // namespace tandem
