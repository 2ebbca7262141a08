// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// LoRA dropout on the CUDA backend (twin of kernels/cpu/dropout.h): the keep mask of element i of module
// `module` in layer `layer` is a pure function of (seed, layer, module, i) — the same SplitMix64 hash as
// the CPU — so both backends drop the same elements and forward/backward agree without storing a mask.
// The seed can also come from device memory (seed_device, one uint64 read by every thread): the CUDA model
// passes it that way so that a captured CUDA graph replays with each batch's seed (a by-value kernel
// argument would be frozen into the graph).
#pragma once

#include <cstdint>

#include "core/cuda/context.h"

namespace tandem::cuda {

// out[n] = inp * keep / (1 - p). out may alias inp.
void dropout_forward(bf16* out, const bf16* inp, uint64_t seed, int layer, int module, int64_t n, double p);
// dinp[n] += dout * keep / (1 - p).
void dropout_backward(bf16* dinp, const bf16* dout, uint64_t seed, int layer, int module, int64_t n, double p);
// The same with the seed read on the device from seed_device [1] when the kernel runs.
void dropout_forward(bf16* out, const bf16* inp, const uint64_t* seed_device, int layer, int module, int64_t n,
                     double p);
void dropout_backward(bf16* dinp, const bf16* dout, const uint64_t* seed_device, int layer, int module, int64_t n,
                      double p);

}  // namespace tandem::cuda
