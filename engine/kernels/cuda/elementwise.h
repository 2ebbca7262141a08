// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Elementwise helpers of the CUDA backend (twins of kernels/cpu/elementwise.h) plus the dtype conversions
// the CPU backend does not need. n = element count. bf16 storage, fp32 arithmetic; 16-byte vectorised
// loads where the pointers allow (falls back to scalar otherwise). In-place use allowed as on the CPU.
#pragma once

#include <cstdint>

#include "core/cuda/context.h"

namespace tandem::cuda {

void add(bf16* out, const bf16* a, const bf16* b, int64_t n);  // out = a + b
void accumulate(bf16* out, const bf16* inp, int64_t n);        // out += inp
void accumulate(float* out, const float* inp, int64_t n);      // out += inp (fp32)
void axpy(bf16* out, float alpha, const bf16* inp, int64_t n); // out += alpha * inp
void scale(bf16* x, float alpha, int64_t n);
void scale(float* x, float alpha, int64_t n);
void copy(bf16* out, const bf16* inp, int64_t n);
void zero(bf16* x, int64_t n);   // x[n] = 0 (a memset on the stream, no kernel)
void zero(float* x, int64_t n);
void fill(bf16* x, float value, int64_t n);
void fill(float* x, float value, int64_t n);

void to_bf16(bf16* out, const float* inp, int64_t n);  // round to nearest even
void to_f32(float* out, const bf16* inp, int64_t n);
void f16_to_bf16(bf16* out, const void* inp_f16, int64_t n);  // fp16 checkpoints at load

// out[0] (+)= sum of inp[n] in double, in a fixed order (deterministic). accumulate=false writes.
void sum(double* out, const float* inp, int64_t n, bool accumulate);

// Fills x[n] with uniform values in [-bound, bound) from a counter-based hash of (seed, i): random
// weights for `tandem-cli bench` without a host copy.
void fill_uniform(bf16* x, int64_t n, uint64_t seed, float bound);

}  // namespace tandem::cuda
