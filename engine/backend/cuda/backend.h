// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// CudaBackend: the op table (backend/backend.h) over kernels/cuda, bf16 activations with fp32 statistics.
// Every op launches on the calling thread's compute stream (core/cuda/context.h). Only in CUDA builds.
#pragma once

#include <string_view>

#include "backend/backend.h"
#include "core/cuda/context.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/fp8.h"
#include "kernels/cuda/kv_cache.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/moe.h"
#include "kernels/cuda/mxfp4.h"
#include "kernels/cuda/nf4.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/swiglu.h"

namespace tandem {

struct CudaBackend {
    using Act = cuda::bf16;
    using RopeTable = cuda::RopeTableDevice;
    static constexpr std::string_view kName = "cuda";

    TANDEM_FORWARD_OP(cuda, embedding_forward)
    TANDEM_FORWARD_OP(cuda, embedding_backward)
    TANDEM_FORWARD_OP(cuda, rmsnorm_forward)
    TANDEM_FORWARD_OP(cuda, residual_rmsnorm_forward)
    TANDEM_FORWARD_OP(cuda, rmsnorm_backward)
    TANDEM_FORWARD_OP(cuda, matmul_forward)
    TANDEM_FORWARD_OP(cuda, matmul_backward)
    TANDEM_FORWARD_OP(cuda, dequantize_4bit)
    TANDEM_FORWARD_OP(cuda, dequantize_mxfp4)
    TANDEM_FORWARD_OP(cuda, lora_forward)
    TANDEM_FORWARD_OP(cuda, lora_tmp_forward)
    TANDEM_FORWARD_OP(cuda, lora_backward)
    TANDEM_FORWARD_OP(cuda, dropout_forward)
    TANDEM_FORWARD_OP(cuda, dropout_backward)
    TANDEM_FORWARD_OP(cuda, rope_forward)
    TANDEM_FORWARD_OP(cuda, rope_backward)
    TANDEM_FORWARD_OP(cuda, attention_forward)
    TANDEM_FORWARD_OP(cuda, attention_backward)
    TANDEM_FORWARD_OP(cuda, attention_sinks)
    TANDEM_FORWARD_OP(cuda, swiglu_forward)
    TANDEM_FORWARD_OP(cuda, swiglu_backward)
    TANDEM_FORWARD_OP(cuda, geglu_forward)
    TANDEM_FORWARD_OP(cuda, geglu_backward)
    TANDEM_FORWARD_OP(cuda, clamped_swiglu_forward)
    TANDEM_FORWARD_OP(cuda, clamped_swiglu_backward)
    TANDEM_FORWARD_OP(cuda, lm_head_cross_entropy)
    TANDEM_FORWARD_OP(cuda, lm_head_logits)
    TANDEM_FORWARD_OP(cuda, add)
    TANDEM_FORWARD_OP(cuda, accumulate)
    TANDEM_FORWARD_OP(cuda, axpy)
    TANDEM_FORWARD_OP(cuda, scale)
    TANDEM_FORWARD_OP(cuda, copy)
    TANDEM_FORWARD_OP(cuda, fill)
    TANDEM_FORWARD_OP(cuda, zero)
    TANDEM_FORWARD_OP(cuda, sum)
    TANDEM_FORWARD_OP(cuda, kv_cache_write)
    TANDEM_FORWARD_OP(cuda, decode_attention)
    TANDEM_FORWARD_OP(cuda, moe_router_forward)
    TANDEM_FORWARD_OP(cuda, moe_router_backward)
    TANDEM_FORWARD_OP(cuda, moe_aux_stats)
    TANDEM_FORWARD_OP(cuda, moe_aux_loss)
    TANDEM_FORWARD_OP(cuda, moe_sort_count)
    TANDEM_FORWARD_OP(cuda, moe_permute)
    TANDEM_FORWARD_OP(cuda, moe_permute_backward)
    TANDEM_FORWARD_OP(cuda, moe_unpermute)
    TANDEM_FORWARD_OP(cuda, moe_unpermute_backward)
    TANDEM_FORWARD_OP(cuda, grouped_matmul_forward)
    TANDEM_FORWARD_OP(cuda, grouped_matmul_backward)
    TANDEM_FORWARD_OP(cuda, grouped_matmul_weight_grad)
    TANDEM_FORWARD_OP(cuda, quantize_fp8_rows)
    TANDEM_FORWARD_OP(cuda, quantize_fp8_grad_rows)
    TANDEM_FORWARD_OP(cuda, fp8_transpose)
    TANDEM_FORWARD_OP(cuda, fp8_matmul)
    TANDEM_FORWARD_OP(cuda, dequantize_4bit_fp8)
    TANDEM_FORWARD_OP(cuda, activation_forward_fp8)
    TANDEM_FORWARD_OP(cuda, rmsnorm_forward_fp8)
    TANDEM_FORWARD_OP(cuda, rmsnorm_backward_fp8)
    TANDEM_FORWARD_OP(cuda, activation_backward_fp8)
    TANDEM_FORWARD_OP(cuda, quantize_fp8_weight)  // load only (not a block op)
};

static_assert(Backend<CudaBackend>, "CudaBackend lacks an op of TANDEM_BACKEND_OPS or takes other arguments");

}  // namespace tandem
