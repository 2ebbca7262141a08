// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The host implementations of TrainableModel's optimizer and memory report (see trainable_model.h).
#include "train/trainable_model.h"

#include <cmath>

#include "kernels/cpu/adamw.h"
#include "tandem/error.h"

namespace tandem {

double TrainableModel::optimizer_step(const OptimizerStep& s) {
    auto& params = lora_params();
    std::vector<cpu::GradSpan> spans;
    for (auto& p : params) spans.push_back({p.grad.data(), static_cast<int64_t>(p.grad.size())});
    const double norm = s.max_grad_norm > 0 ? cpu::clip_grad_norm(spans, s.max_grad_norm) : cpu::global_grad_norm(spans);
    if (!std::isfinite(norm)) return norm;
    for (auto& p : params) {
        if (p.exp_avg.size() != p.value.size()) p.exp_avg.assign(p.value.size(), 0.0f);
        if (p.exp_avg_sq.size() != p.value.size()) p.exp_avg_sq.assign(p.value.size(), 0.0f);
        cpu::adamw_update(p.value.data(), p.grad.data(), p.exp_avg.data(), p.exp_avg_sq.data(),
                          static_cast<int64_t>(p.value.size()), s.lr, s.beta1, s.beta2, s.eps, s.weight_decay, s.step);
    }
    return norm;
}

void TrainableModel::queue_forward_backward(const PackedBatch& batch, float grad_scale, uint64_t dropout_seed) {
    queued_loss_ += forward_backward(batch, grad_scale, dropout_seed);
}

void TrainableModel::queue_optimizer_step(const OptimizerStep& s) {
    queued_.push_back({queued_loss_, optimizer_step(s)});
    queued_loss_ = 0;
}

StepResult TrainableModel::collect_step() {
    if (queued_.empty()) throw_internal("trainer: collect_step() with no step queued");
    const StepResult r = queued_.front();
    queued_.pop_front();
    return r;
}

MemoryStats TrainableModel::memory_stats() {
    MemoryStats m;
    m.weights = weight_bytes();
    size_t numel = 0;
    for (const auto& p : lora_params()) numel += p.value.size();
    m.lora_optimizer = lora_bytes() + 2 * numel * sizeof(float);
    m.activations = activation_bytes();
    return m;
}

}  // namespace tandem
