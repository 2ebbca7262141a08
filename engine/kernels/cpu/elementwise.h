// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Elementwise helpers of the CPU backend (residual adds, scaling, copies). n = element count.
// Trivially deterministic; in-place use is allowed wherever an output may equal an input.
#pragma once

#include <cstdint>

namespace tandem::cpu {

void add(float* out, const float* a, const float* b, int64_t n);  // out[n] = a + b (out may alias a or b)
void accumulate(float* out, const float* inp, int64_t n);         // out[n] += inp
void axpy(float* out, float alpha, const float* inp, int64_t n);  // out[n] += alpha * inp
void scale(float* x, float alpha, int64_t n);                     // x[n] *= alpha
void copy(float* out, const float* inp, int64_t n);               // out[n] = inp (no overlap)
void fill(float* x, float value, int64_t n);                      // x[n] = value
void zero(float* x, int64_t n);                                   // x[n] = 0
// out[0] (+)= sum of inp[n] in double, serially in index order (deterministic); accumulate=false writes.
void sum(double* out, const float* inp, int64_t n, bool accumulate);

}  // namespace tandem::cpu
