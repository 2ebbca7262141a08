// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Elementwise helpers of the CPU backend (see elementwise.h). n = element count.
#include "kernels/cpu/elementwise.h"

#include <cstring>

#include "core/check.h"

namespace tandem::cpu {

void add(float* out, const float* a, const float* b, int64_t n) {
    TANDEM_KCHECK(out && a && b && n >= 0);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void accumulate(float* out, const float* inp, int64_t n) {
    TANDEM_KCHECK(out && inp && n >= 0);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) out[i] += inp[i];
}

void axpy(float* out, float alpha, const float* inp, int64_t n) {
    TANDEM_KCHECK(out && inp && n >= 0);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) out[i] += alpha * inp[i];
}

void scale(float* x, float alpha, int64_t n) {
    TANDEM_KCHECK(x && n >= 0);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) x[i] *= alpha;
}

void copy(float* out, const float* inp, int64_t n) {
    TANDEM_KCHECK(out && inp && n >= 0);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) out[i] = inp[i];
}

void fill(float* x, float value, int64_t n) {
    TANDEM_KCHECK(x && n >= 0);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) x[i] = value;
}

void sum(double* out, const float* inp, int64_t n, bool accumulate) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK(n >= 0 && (n == 0 || inp != nullptr));
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += static_cast<double>(inp[i]);
    *out = accumulate ? *out + s : s;
}

void zero(float* x, int64_t n) {
    TANDEM_KCHECK(n >= 0 && (n == 0 || x != nullptr));
    if (n > 0) std::memset(x, 0, static_cast<size_t>(n) * sizeof(float));
}

}  // namespace tandem::cpu
