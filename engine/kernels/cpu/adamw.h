// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// AdamW and gradient clipping on the CPU backend, as torch.optim.AdamW and torch.nn.utils.clip_grad_norm_.
// P = parameter count. Decisions: weight decay is decoupled (p *= 1 - lr*wd before the Adam step); step
// counts from 1 (the first update has step = 1); the scalar factors are computed in double as Python does
// and used as float32, and the per-element arithmetic follows torch's single-tensor implementation op by op.
// The global norm is accumulated in double in a fixed order (fixed-size blocks, summed serially), so it is
// identical for any thread count.
#pragma once

#include <cstdint>
#include <span>

namespace tandem::cpu {

// One step for one tensor: param, exp_avg, exp_avg_sq [P] updated in place from grad[P].
void adamw_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t P, double lr,
                  double beta1, double beta2, double eps, double weight_decay, int64_t step);

// A gradient tensor: count floats at data.
struct GradSpan {
    float* data = nullptr;
    int64_t count = 0;
};

// sqrt(sum of squares of every element of every span).
double global_grad_norm(std::span<const GradSpan> grads);

// torch's clip_grad_norm_: computes the global norm; if it is finite and above max_norm, multiplies every
// gradient by max_norm / (norm + 1e-6). Returns the norm before clipping (inf/nan left for the caller to
// act on: nothing is scaled then).
double clip_grad_norm(std::span<const GradSpan> grads, double max_norm);

}  // namespace tandem::cpu
