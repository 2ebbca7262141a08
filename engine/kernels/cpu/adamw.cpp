// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// AdamW and gradient clipping on the CPU backend (see adamw.h). P = parameter count.
// torch's _single_tensor_adamw, per element, in float32:
//   p   = p * (1 - lr*wd)
//   m   = m + (1 - b1) * (g - m)                     (exp_avg.lerp_(grad, 1 - b1), weight < 0.5 branch)
//   v   = v * b2 + (1 - b2) * g * g                  (mul_(b2).addcmul_(g, g, value=1 - b2))
//   den = sqrt(v) / sqrt(1 - b2^step) + eps
//   p   = p + (-lr / (1 - b1^step)) * (m / den)      (addcdiv_)
#include "kernels/cpu/adamw.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"

namespace tandem::cpu {

void adamw_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t P, double lr,
                  double beta1, double beta2, double eps, double weight_decay, int64_t step) {
    TANDEM_KCHECK_PTR(param);
    TANDEM_KCHECK_PTR(grad);
    TANDEM_KCHECK_PTR(exp_avg);
    TANDEM_KCHECK_PTR(exp_avg_sq);
    TANDEM_KCHECK(P > 0);
    TANDEM_KCHECK(step >= 1);
    TANDEM_KCHECK(beta1 >= 0.0 && beta1 < 1.0 && beta2 >= 0.0 && beta2 < 1.0);
    const float decay = static_cast<float>(1.0 - lr * weight_decay);
    const float w1 = static_cast<float>(1.0 - beta1);
    const float b2 = static_cast<float>(beta2);
    const float w2 = static_cast<float>(1.0 - beta2);
    const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(step));
    const double bc2 = 1.0 - std::pow(beta2, static_cast<double>(step));
    const float neg_step_size = static_cast<float>(-(lr / bc1));
    const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
    const float eps_f = static_cast<float>(eps);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < P; i++) {
        const float g = grad[i];
        float p = param[i] * decay;
        const float m = exp_avg[i] + w1 * (g - exp_avg[i]);
        const float v = exp_avg_sq[i] * b2 + w2 * g * g;
        const float den = std::sqrt(v) / bc2_sqrt + eps_f;
        p = p + neg_step_size * (m / den);
        param[i] = p;
        exp_avg[i] = m;
        exp_avg_sq[i] = v;
    }
}

double global_grad_norm(std::span<const GradSpan> grads) {
    // Fixed blocks (not one per thread) so the summation order never depends on the thread count.
    constexpr int64_t kBlock = 1 << 14;
    double total = 0.0;
    std::vector<double> partial;
    for (const GradSpan& gs : grads) {
        TANDEM_KCHECK(gs.count >= 0);
        if (gs.count == 0) continue;
        TANDEM_KCHECK_PTR(gs.data);
        const int64_t nblocks = (gs.count + kBlock - 1) / kBlock;
        partial.assign(static_cast<size_t>(nblocks), 0.0);
        const float* data = gs.data;
#pragma omp parallel for schedule(static)
        for (int64_t b = 0; b < nblocks; b++) {
            const int64_t i0 = b * kBlock, i1 = std::min(gs.count, i0 + kBlock);
            double acc = 0.0;
            for (int64_t i = i0; i < i1; i++) acc += static_cast<double>(data[i]) * data[i];
            partial[static_cast<size_t>(b)] = acc;
        }
        for (double p : partial) total += p;
    }
    return std::sqrt(total);
}

double clip_grad_norm(std::span<const GradSpan> grads, double max_norm) {
    TANDEM_KCHECK(max_norm > 0.0);
    const double norm = global_grad_norm(grads);
    if (!std::isfinite(norm)) return norm;
    const double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0) {
        const float c = static_cast<float>(coef);
        for (const GradSpan& gs : grads) {
            float* data = gs.data;
            const int64_t n = gs.count;
#pragma omp parallel for schedule(static)
            for (int64_t i = 0; i < n; i++) data[i] *= c;
        }
    }
    return norm;
}

}  // namespace tandem::cpu
