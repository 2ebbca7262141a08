// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// SplitMix64: the one deterministic generator of the engine (LoRA initialisation, demo weights, dropout
// masks, sampling, per-step seeds). Chosen over <random> distributions, whose output differs between
// standard libraries; this is the same on every platform.
#pragma once

#include <cstdint>

// Host and device: the CUDA kernels (dropout, random weights) hash exactly as the CPU does.
#if defined(__CUDACC__)
#define TANDEM_HD __host__ __device__
#else
#define TANDEM_HD
#endif

namespace tandem {

inline constexpr uint64_t kSplitMix64Gamma = 0x9E3779B97F4A7C15ull;

// The SplitMix64 output function (a bijective 64-bit mix).
TANDEM_HD inline uint64_t splitmix64_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Stateless hash of x: the first output of a SplitMix64 stream seeded with x. For counter-based randomness
// (dropout masks, seeds derived from (seed, step, micro-batch)).
TANDEM_HD inline uint64_t splitmix64(uint64_t x) { return splitmix64_mix(x + kSplitMix64Gamma); }

// The LoRA dropout draw of element `index` of module `module`'s input in layer `layer`: uniform in [0, 1)
// from the top 53 bits of a hash of (seed, layer, module, index). Kept iff u >= p. Both backends use it.
TANDEM_HD inline double dropout_uniform(uint64_t seed, int layer, int module, uint64_t index) {
    const uint64_t h = splitmix64(splitmix64(splitmix64(seed) ^ (uint64_t(layer) * 16 + uint64_t(module))) ^ index);
    return double(h >> 11) * 0x1.0p-53;
}

class SplitMix64 {
public:
    explicit SplitMix64(uint64_t seed) : state_(seed) {}
    uint64_t next_u64() { return splitmix64_mix(state_ += kSplitMix64Gamma); }
    double next_double() { return double(next_u64() >> 11) * 0x1.0p-53; }  // [0, 1)

private:
    uint64_t state_;
};

}  // namespace tandem
