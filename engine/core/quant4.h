// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The 4-bit weight format (bitsandbytes' layout, QLoRA's NF4): the reference to one 4-bit tensor that the
// kernels take, the code tables and the sizes of the parts. The layout and the arithmetic are described in
// kernels/cpu/nf4.h; the checkpoint reader is io/quant4_checkpoint.h.
#pragma once

#include <array>
#include <cstdint>

#include "core/random.h"  // TANDEM_HD

namespace tandem {

inline constexpr int kQuant4Codes = 16;    // values of a 4-bit code table
inline constexpr int kNestedCodes = 256;   // values of the 8-bit table of double-quantized absmax

// A 4-bit weight (pointers into one backend's memory: host on the CPU, device on CUDA). absmax (plain fp32)
// or absmax_q + nested_code + nested_absmax + offset (double-quantized) is set.
struct Quant4Ref {
    const uint8_t* codes = nullptr;          // [ceil(n/2)]
    const float* code = nullptr;             // [16] the value of each 4-bit code (quant_map)
    const float* absmax = nullptr;           // [blocks] fp32, or nullptr when double-quantized
    const uint8_t* absmax_q = nullptr;       // [blocks] 8-bit codes of absmax - offset
    const float* nested_code = nullptr;      // [256] (nested_quant_map)
    const float* nested_absmax = nullptr;    // [ceil(blocks / nested_blocksize)]
    const float* offset = nullptr;           // [1]
    int64_t n = 0;
    int blocksize = 64;
    int nested_blocksize = 256;

    int64_t blocks() const { return (n + blocksize - 1) / blocksize; }
    int64_t nested_blocks() const { return (blocks() + nested_blocksize - 1) / nested_blocksize; }
    bool nested() const { return absmax_q != nullptr; }
};

// The code tables: NF4 (bitsandbytes' get_4bit_type("nf4"), the published QLoRA values), FP4 (1 sign, 2
// exponent, 1 mantissa bits scaled by 1/12: get_4bit_type("fp4")), and bitsandbytes' signed 8-bit dynamic
// code (create_dynamic_map(signed=True), sorted), computed here the way bitsandbytes computes it.
const std::array<float, kQuant4Codes>& nf4_code();
const std::array<float, kQuant4Codes>& fp4_code();
const std::array<float, kNestedCodes>& dynamic_code_8bit();

// The NF4 decision thresholds: thresholds[i] is the midpoint of nf4_code()[i] and [i+1] (rounded from double
// to float once); a scaled value x gets code i+1 when x > thresholds[i].
const std::array<float, kQuant4Codes - 1>& nf4_thresholds();

// Bytes of each part of a 4-bit tensor of n elements.
inline int64_t quant4_code_bytes(int64_t n) { return (n + 1) / 2; }
inline int64_t quant4_blocks(int64_t n, int blocksize) { return (n + blocksize - 1) / blocksize; }


// The NF4 code of a scaled value x: the largest i with x > t[i-1] over the 15 ascending thresholds t
// (nf4_thresholds(); NaN compares false: code 0, as bitsandbytes' decision tree). Host and device.
TANDEM_HD inline uint8_t nf4_code_from(const float* t, float x) {
    uint8_t c = 0;
    for (int i = 0; i < kQuant4Codes - 1; ++i)
        if (x > t[i]) c = uint8_t(i + 1);
    return c;
}

// bitsandbytes' dQuantize<0>, the 8-bit code of x: binary search over the sorted 256-value `code`, then the
// nearer neighbour by the midpoint rule (fp32 midpoints, ties to the lower code). Host and device (TANDEM_HD):
// the CPU and CUDA twins of quantize_blockwise_8bit share it.
TANDEM_HD inline uint8_t code8_of(const float* code, float x) {
    int pivot = 127, upper_pivot = 255, lower_pivot = 0;
    float lower = -1.0f, upper = 1.0f;
    float val = code[pivot];
    for (int i = 64; i > 0; i >>= 1) {
        if (x > val) {
            lower_pivot = pivot;
            lower = val;
            pivot += i;
        } else {
            upper_pivot = pivot;
            upper = val;
            pivot -= i;
        }
        val = code[pivot];
    }
    if (upper_pivot == 255) upper = code[upper_pivot];
    if (lower_pivot == 0) lower = code[lower_pivot];
    if (x > val) {
        const float midpoint = (upper + val) * 0.5f;
        return uint8_t(x > midpoint ? upper_pivot : pivot);
    }
    const float midpoint = (lower + val) * 0.5f;
    return uint8_t(x < midpoint ? lower_pivot : pivot);
}

}  // namespace tandem
