// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The per-row settings of next-token sampling (SamplingParams) and its uniform draw, shared by the CPU
// kernels (kernels/cpu/sampling.h, which re-exports SamplingParams as cpu::SamplingParams) and the CUDA twins
// (kernels/cuda/sampling.h), which may include only core/. Decisions a reader must know:
//  - SamplingParams is plain data (standard layout, no pointers): the CUDA kernels read an array of it
//    from device memory, so a decode step's settings can change between replays of one CUDA graph.
//  - sampling_draw_uniform is host + device and is the formula both backends draw with: u in [0, 1) = the
//    top 53 bits of SplitMix64(SplitMix64(seed) ^ draw). cpu::sampling_uniform computes the same (another
//    name, because code that opens both namespaces calls that one unqualified).
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/random.h"  // splitmix64, TANDEM_HD

namespace tandem {

struct SamplingParams {
    float temperature = 0.0f;         // <= 0: greedy
    int32_t top_k = 0;                // 0: off
    float top_p = 1.0f;               // >= 1: off
    float min_p = 0.0f;               // 0: off
    float repetition_penalty = 1.0f;  // 1: off
    uint64_t seed = 0;
};
static_assert(std::is_standard_layout_v<SamplingParams> && std::is_trivially_copyable_v<SamplingParams>);

// The uniform draw of sample_tokens: [0, 1) from (seed, draw index).
TANDEM_HD inline double sampling_draw_uniform(uint64_t seed, int64_t draw) {
    const uint64_t h = splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(draw));
    return double(h >> 11) * 0x1.0p-53;
}

}  // namespace tandem
