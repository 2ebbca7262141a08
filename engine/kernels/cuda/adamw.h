// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// AdamW, gradient norm and clipping on the CUDA backend (twins of kernels/cpu/adamw.h), over ALL LoRA
// tensors in one launch each: the tensors are described by a device array of AdamWTensor built once at
// load. Nothing here reads a value back to the host: the norm lands in device memory and the clip factor
// is applied inside the update kernel, so a step needs no host sync for the optimizer.
// Decisions: the norm is a deterministic two-pass reduction (fixed block partials summed in order, double);
// the clip factor is max_norm / (norm + 1e-6) when norm > max_norm (torch's clip_grad_norm_), and a
// non-finite norm skips the update (the model reports it). The per-element math follows torch's
// single-tensor AdamW op by op in fp32, with the scalar factors computed on the host in double, as
// cpu::adamw_update does; each update also refreshes the bf16 copy the GEMMs read.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/cuda/context.h"

namespace tandem::cuda {

struct AdamWTensor {
    float* param = nullptr;     // fp32 master
    float* grad = nullptr;      // fp32
    float* exp_avg = nullptr;
    float* exp_avg_sq = nullptr;
    bf16* param_bf16 = nullptr; // copy for the GEMMs (may be nullptr)
    int64_t n = 0;
};

// Scratch bytes global_grad_norm needs for `count` tensors of `total` elements.
size_t grad_norm_workspace(int count, int64_t total);

// norm_out[0] = sqrt(sum of squares of every grad) (fp32 result of a double sum). tensors: device array.
void global_grad_norm(float* norm_out, const AdamWTensor* tensors, int count, int64_t total, void* workspace);

// One AdamW step over every tensor. clip: when max_norm > 0, grads are scaled by the clip factor computed
// on the device from *norm; a non-finite *norm leaves every tensor unchanged.
void adamw_update(const AdamWTensor* tensors, int count, int64_t total, const float* norm, double max_norm, double lr,
                  double beta1, double beta2, double eps, double weight_decay, int64_t step);

}  // namespace tandem::cuda
