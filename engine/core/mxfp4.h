// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// MXFP4 (the OCP microscaling format gpt-oss stores its experts in): blocks of 32 E2M1 values (4 bits: sign,
// 2 exponent, 1 mantissa; 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives) sharing one e8m0 scale 2^(s - 127);
// two codes per byte, the low nibble first. One decoding for host and device (TANDEM_HD); the checkpoint
// layout is in io/mxfp4.h, the device layout in kernels/cpu/mxfp4.h.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/random.h"  // TANDEM_HD

namespace tandem {

inline constexpr int kMxfp4Block = 32;  // values per scale

// The value of E2M1 code c (its low 4 bits).
TANDEM_HD inline float e2m1_value(uint8_t c) {
    const int m = c & 7;
    const float v = m < 2 ? 0.5f * float(m) : m < 4 ? 1.0f + 0.5f * float(m - 2) : m < 6 ? 2.0f + float(m - 4)
                                                                                          : 4.0f + 2.0f * float(m - 6);
    return (c & 8) ? -v : v;
}

// 2^(s - 127) for an e8m0 scale byte s: s as a float's exponent field (s = 0: the subnormal 2^-127; s = 255,
// NaN in the format and never in gpt-oss's checkpoints, decodes as inf).
TANDEM_HD inline float e8m0_scale(uint8_t s) {
    if (s == 0) return 5.877471754111438e-39f;  // 2^-127
    const uint32_t bits = uint32_t(s) << 23;
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

}  // namespace tandem
