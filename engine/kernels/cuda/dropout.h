// LoRA dropout on the CUDA backend (twin of kernels/cpu/dropout.h): the keep mask of element i of module
// `module` in layer `layer` is a pure function of (seed, layer, module, i) — the same SplitMix64 hash as
// the CPU — so both backends drop the same elements and forward/backward agree without storing a mask.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.h"

namespace tandem::cuda {

// out[n] = inp * keep / (1 - p). out may alias inp.
void dropout_forward(bf16* out, const bf16* inp, uint64_t seed, int layer, int module, int64_t n, double p);
// dinp[n] += dout * keep / (1 - p).
void dropout_backward(bf16* dinp, const bf16* dout, uint64_t seed, int layer, int module, int64_t n, double p);

}  // namespace tandem::cuda
