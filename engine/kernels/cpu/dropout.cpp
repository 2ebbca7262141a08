// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// LoRA dropout on the CPU backend (see dropout.h): the mask is a hash of (seed, layer, module, index).
#include "kernels/cpu/dropout.h"

#include "core/check.h"
#include "core/random.h"

namespace tandem::cpu {

void dropout_forward(float* out, const float* inp, uint64_t seed, int layer, int module, int64_t n, double p) {
    const float inv = float(1.0 / (1.0 - p));
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
        out[i] = dropout_uniform(seed, layer, module, uint64_t(i)) >= p ? inp[i] * inv : 0.0f;
}

void dropout_backward(float* dinp, const float* dout, uint64_t seed, int layer, int module, int64_t n, double p) {
    const float inv = float(1.0 / (1.0 - p));
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
        if (dropout_uniform(seed, layer, module, uint64_t(i)) >= p) dinp[i] += dout[i] * inv;
}

void dropout_forward(float* out, const float* inp, const uint64_t* seed, int layer, int module, int64_t n, double p) {
    TANDEM_KCHECK_PTR(seed);
    dropout_forward(out, inp, *seed, layer, module, n, p);
}

void dropout_backward(float* dinp, const float* dout, const uint64_t* seed, int layer, int module, int64_t n,
                      double p) {
    TANDEM_KCHECK_PTR(seed);
    dropout_backward(dinp, dout, *seed, layer, module, n, p);
}

}  // namespace tandem::cpu
