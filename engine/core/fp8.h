// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// FP8 training (precision fp8): the E4M3 format, the block layouts of FP8 weights and activations, and the
// rounding both backends share (host and device: TANDEM_HD).
// The format (OCP FP8 E4M3, "e4m3fn" in torch): 1 sign, 4 exponent (bias 7), 3 mantissa bits; finite values
// up to 448, subnormals down to 2^-9, no infinities, 0x7F / 0xFF are NaN. Conversion from fp32 rounds to
// nearest even and saturates to +-448 (the GPU's cvt.rn.satfinite; torch's .to(float8_e4m3fn) rounds the same
// way inside the range, which is all a scaled block ever reaches).
// The layouts (cuBLASLt's block-scaled FP8 GEMM on Hopper reads them as they are):
//  - A weight [OUT, IN] is stored as codes [OUT, INp] (INp = IN rounded up to 128, the pad columns code 0) and
//    one fp32 scale per 128x128 block, scales [ceil(OUT/128), fp8_scale_ld(IN)] row-major (the row stride
//    INp/128 rounded up to 4, the pad entries 1: cuBLASLt reads the grid with that stride, measured on an H100):
//    the value of code c in block (i, j) is e4m3(c) * scale[i, j] (BLK128x128_32F).
//  - Activations x [rows, K] (K the GEMM's inner dimension) are quantized per row and 128 columns: codes
//    [fp8_code_rows(rows), Kp] (rows rounded up to 16, the pad rows code 0) and one scale per row and block
//    column, in cuBLASLt's VEC128_32F layout (each block column's scales contiguous over the rows) for two
//    GEMMs: the first fp8_head_rows(rows) rows (a multiple of 16) as [Kp/128, head], then the rest padded to
//    16 rows as [Kp/128, 16] (pad rows scale 1): cuBLASLt's block-scaled kernels take a row count that is a
//    multiple of 16 (measured on an H100: 37 rows are refused), so a batch of other length runs as a head
//    GEMM and a 16-row tail GEMM into a scratch (kernels/cuda/fp8.h). fp8_row_scale_at is the index.
//  - A block's scale is amax / 448 (amax = max |x| over the block, IEEE division); its codes are
//    e4m3(x * (448 / amax)); an all-zero block has scale 1 and codes 0. A NaN or infinite element makes the
//    block's scale NaN, so a diverging step stays visible (the trainer skips non-finite steps).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/random.h"  // TANDEM_HD

namespace tandem {

inline constexpr int kFp8Block = 128;
inline constexpr float kE4M3Max = 448.0f;
inline constexpr float kE5M2Max = 57344.0f;

TANDEM_HD inline int64_t fp8_padded(int64_t k) { return (k + kFp8Block - 1) / kFp8Block * kFp8Block; }
TANDEM_HD inline int64_t fp8_blocks(int64_t n) { return (n + kFp8Block - 1) / kFp8Block; }

// The row stride of a weight's block-scale grid whose inner dimension is k (see the header comment).
TANDEM_HD inline int64_t fp8_scale_ld(int64_t k) { return (fp8_padded(k) / kFp8Block + 3) / 4 * 4; }

inline constexpr int kFp8RowAlign = 16;
TANDEM_HD inline int64_t fp8_head_rows(int64_t rows) { return rows / kFp8RowAlign * kFp8RowAlign; }
TANDEM_HD inline int64_t fp8_code_rows(int64_t rows) {
    return (rows + kFp8RowAlign - 1) / kFp8RowAlign * kFp8RowAlign;
}
// The scale of row r (< fp8_code_rows(rows)) and block column cb of a quantized activation with `cols` block
// columns.
TANDEM_HD inline int64_t fp8_row_scale_at(int64_t r, int64_t cb, int64_t rows, int64_t cols) {
    const int64_t head = fp8_head_rows(rows);
    return r < head ? cb * head + r : cols * head + cb * kFp8RowAlign + (r - head);
}

// The bits of a float and the float of bits, on the host and the device.
TANDEM_HD inline uint32_t fp8_bits_of(float f) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t b;
    std::memcpy(&b, &f, sizeof b);
    return b;
#endif
}
TANDEM_HD inline float fp8_float_of(uint32_t b) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(b);
#else
    float f;
    std::memcpy(&f, &b, sizeof f);
    return f;
#endif
}

// The value of an E4M3 code.
TANDEM_HD inline float e4m3_value(uint8_t c) {
    const uint32_t e = (c >> 3) & 0xF, m = c & 7;
    uint32_t bits;
    if (e == 0xF && m == 7) {
        bits = 0x7FC00000u;  // NaN
    } else if (e == 0) {
        // m * 2^-9: exact as (m as a normal float) scaled; m < 8
        bits = fp8_bits_of(float(m) * 0.001953125f);
    } else {
        bits = (e - 7 + 127) << 23 | m << 20;  // (1 + m/8) * 2^(e-7), exact in fp32
    }
    return fp8_float_of(bits | uint32_t(c & 0x80) << 24);
}

// fp32 -> E4M3, round to nearest even, saturating to +-448; NaN -> 0x7F (sign kept).
TANDEM_HD inline uint8_t e4m3_code(float x) {
    const uint32_t bits = fp8_bits_of(x);
    const uint8_t sign = uint8_t((bits >> 24) & 0x80);
    const uint32_t abs = bits & 0x7FFFFFFFu;
    if (abs > 0x7F800000u) return uint8_t(sign | 0x7F);  // NaN
    if (abs >= 0x43E00000u) return uint8_t(sign | 0x7E);  // >= 448 (and inf): saturate
    const int exp = int(abs >> 23) - 127;
    if (exp < -6) {
        // Subnormal range of E4M3: value = m * 2^-9, m in [0, 8]; round |x| * 2^9 to nearest even integer.
        const float a = fp8_float_of(abs);
        const float scaled = a * 512.0f;  // exact (power of two)
        int m = int(scaled);
        const float rest = scaled - float(m);
        if (rest > 0.5f || (rest == 0.5f && (m & 1))) ++m;
        return uint8_t(sign | m);  // m == 8 is the smallest normal (e = 1, m = 0): code 0x08, the same bits
    }
    // Normal: keep 3 mantissa bits, round to nearest even on the 20 dropped bits.
    uint32_t mant = abs & 0x7FFFFFu;
    int e = exp + 7;
    uint32_t m3 = mant >> 20;
    const uint32_t dropped = mant & 0xFFFFFu;
    if (dropped > 0x80000u || (dropped == 0x80000u && (m3 & 1))) {
        if (++m3 == 8) {
            m3 = 0;
            ++e;
        }
    }
    if (e > 15 || (e == 15 && m3 == 7)) return uint8_t(sign | 0x7E);  // rounded past 448
    return uint8_t(sign | uint32_t(e) << 3 | m3);
}

// The nearest E5M2 value to x (1 sign, 5 exponent bits with bias 15, 2 mantissa bits: finite values up to 57344,
// subnormals m * 2^-16), round to nearest even, saturating; NaN stays NaN. Only the CPU backend's ablation of E5M2
// output gradients uses it (kernels/cpu/fp8.h quantize_fp8_grad_rows); training stores E4M3 codes.
TANDEM_HD inline float e5m2_round(float x) {
    const uint32_t bits = fp8_bits_of(x);
    const uint32_t sign = bits & 0x80000000u, abs = bits & 0x7FFFFFFFu;
    if (abs > 0x7F800000u) return x;                                 // NaN
    if (abs >= 0x47600000u) return fp8_float_of(sign | 0x47600000u);  // >= 57344 (and inf): saturate
    const int exp = int(abs >> 23) - 127;
    // The grid's spacing at |x|: 2^(exp - 2) for normals (exp >= -14), 2^-16 for subnormals.
    const int q = exp < -14 ? -16 : exp - 2;
    const uint32_t qbits = uint32_t(q + 127) << 23;  // 2^q (q >= -16: a normal float)
    const float quantum = fp8_float_of(qbits), a = fp8_float_of(abs);
    const float scaled = a / quantum;  // exact: a power of two
    float m = float(int(scaled));
    const float rest = scaled - m;
    if (rest > 0.5f || (rest == 0.5f && (int(m) & 1))) m += 1.0f;
    const float r = m * quantum;  // exact; may reach the next binade (its 1.0), still on the grid
    return fp8_float_of(sign | (fp8_bits_of(r) & 0x7FFFFFFFu));
}

// The format FP8 output gradients are rounded to before their GEMM: E4M3 for training on both backends; E5M2 is an
// ablation of the CPU backend's emulation (kernels/cpu/fp8.h quantize_fp8_grad_rows), which the CUDA twin refuses.
// From TANDEM_FP8_GRADS, read once (core/fp8.cpp): unset or e4m3 E4M3, e5m2 E5M2, any other value an
// invalid-input error naming the variable. Host only.
enum class Fp8GradFormat { E4M3, E5M2 };
Fp8GradFormat fp8_grad_format();

// A block's scale and the factor its elements are multiplied by before rounding (see the header comment).
struct Fp8Scale {
    float scale, inv;
};
TANDEM_HD inline Fp8Scale fp8_scale_of(float amax) {
    if (amax == 0.0f) return {1.0f, 1.0f};
    return {amax / kE4M3Max, kE4M3Max / amax};
}

// A weight in FP8 (model/plan.h Fp8Pieces): codes [out, fp8_padded(in)], scales [fp8_blocks(out),
// fp8_scale_ld(in)]. A slot of a fused projection is the same matrix from row `row0` (a multiple of 128).
struct Fp8Ref {
    const uint8_t* codes = nullptr;
    const float* scales = nullptr;
    int64_t out = 0, in = 0;  // of the slot
};

}  // namespace tandem
