// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// LoRA dropout on the CPU backend: the keep mask of element i of module `module`'s input in layer `layer`
// is a pure function of (seed, layer, module, i) (core/random.h dropout_uniform), so forward and backward
// agree without storing a mask, a step is reproducible for any thread count, and the CUDA twin
// (kernels/cuda/dropout.h) drops exactly the same elements.
#pragma once

#include <cstdint>

namespace tandem::cpu {

// out[n] = inp * keep / (1 - p). out may alias inp.
void dropout_forward(float* out, const float* inp, uint64_t seed, int layer, int module, int64_t n, double p);
// dinp[n] += dout * keep / (1 - p).
void dropout_backward(float* dinp, const float* dout, uint64_t seed, int layer, int module, int64_t n, double p);

// The same with the seed read through a pointer (the form the block code uses on both backends: on CUDA the
// seed lives in device memory so that a captured graph replays with each batch's seed).
void dropout_forward(float* out, const float* inp, const uint64_t* seed, int layer, int module, int64_t n, double p);
void dropout_backward(float* dinp, const float* dout, const uint64_t* seed, int layer, int module, int64_t n,
                      double p);

}  // namespace tandem::cpu
