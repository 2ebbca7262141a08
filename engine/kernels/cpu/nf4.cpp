// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// 4-bit weights on the CPU backend (see nf4.h): the code tables, quantization (NF4 + 8-bit double
// quantization of the absmax) and dequantization. Blocks are independent, so every loop is parallel over
// blocks and the result does not depend on the thread count.
#include "kernels/cpu/nf4.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/fp8.h"
#include "kernels/cpu/fp8.h"
#include "tandem/safetensors.h"  // f32_to_bf16, bf16_to_f32

namespace tandem::cpu {

uint8_t nf4_code_of(float x) { return nf4_code_from(nf4_thresholds().data(), x); }

namespace {

// The absmax of block b of w.
float block_absmax(const Quant4Ref& w, int64_t b) {
    if (!w.nested()) return w.absmax[b];
    const float a = w.nested_code[w.absmax_q[b]] * w.nested_absmax[b / w.nested_blocksize];
    return a + w.offset[0];
}

// The 4-bit code table's value of element e (before its block's absmax).
float code_value(const Quant4Ref& w, int64_t e) {
    const uint8_t byte = w.codes[e >> 1];
    return w.code[(e & 1) ? uint8_t(byte & 0x0F) : uint8_t(byte >> 4)];
}

// The pieces a 4-bit reference must point at.
void check_quant4_ref(const Quant4Ref& w) {
    TANDEM_KCHECK_PTR(w.codes);
    TANDEM_KCHECK_PTR(w.code);
    TANDEM_KCHECK(w.nested() ? (w.nested_code && w.nested_absmax && w.offset) : w.absmax != nullptr);
    TANDEM_KCHECK(w.blocksize > 0 && w.nested_blocksize > 0);
}

}  // namespace

void dequantize_4bit(float* out, const Quant4Ref& w, int64_t first, int64_t count) {
    TANDEM_KCHECK_PTR(out);
    check_quant4_ref(w);
    TANDEM_KCHECK(first >= 0 && count >= 0 && first + count <= w.n);
    const int64_t b0 = first / w.blocksize, b1 = (first + count + w.blocksize - 1) / w.blocksize;
#pragma omp parallel for schedule(static)
    for (int64_t b = b0; b < b1; ++b) {
        const float a = block_absmax(w, b);
        const int64_t lo = std::max(first, b * w.blocksize), hi = std::min(first + count, (b + 1) * w.blocksize);
        for (int64_t e = lo; e < hi; ++e) out[e - first] = code_value(w, e) * a;
    }
}

void dequantize_4bit_fp8(uint8_t* codes, float* scales, const Quant4Ref& w, int64_t first, int OUT, int IN,
                         bool transposed) {
    TANDEM_KCHECK_PTR(codes);
    TANDEM_KCHECK_PTR(scales);
    check_quant4_ref(w);
    TANDEM_KCHECK(OUT > 0 && IN > 0 && first >= 0 && first + int64_t(OUT) * IN <= w.n);
    const int64_t INp = fp8_padded(IN), OUTp = fp8_padded(OUT), in_cols = INp / kFp8Block, out_cols = OUTp / kFp8Block,
                  in_ld = fp8_scale_ld(IN), out_ld = fp8_scale_ld(OUT), bands = out_cols;
    // One 128x128 block at a time, as the CUDA kernel's shared tile: its values (rounded to bf16), their max,
    // then the codes in either layout. No copy of the whole slot.
#pragma omp parallel
    {
        std::vector<float> tile(size_t(kFp8Block) * kFp8Block);
#pragma omp for schedule(static)
        for (int64_t item = 0; item < bands * in_cols; ++item) {
            const int64_t band = item / in_cols, cb = item % in_cols;
            const int64_t r0 = band * kFp8Block, r1 = std::min<int64_t>(OUT, r0 + kFp8Block);
            const int64_t c0 = cb * kFp8Block, c1 = std::min<int64_t>(IN, c0 + kFp8Block);
            float amax = 0.0f;
            for (int64_t r = r0; r < r1; ++r) {
                int64_t b = -1;
                float a = 0.0f;
                for (int64_t c = c0; c < c1; ++c) {
                    const int64_t e = first + r * IN + c;
                    if (e / w.blocksize != b) a = block_absmax(w, b = e / w.blocksize);
                    const float v = bf16_to_f32(f32_to_bf16(code_value(w, e) * a));
                    tile[size_t((r - r0) * kFp8Block + (c - c0))] = v;
                    amax = fp8_amax_step(amax, v);
                }
            }
            const Fp8Scale s = fp8_scale_of(amax);
            const auto code_at = [&](int64_t r, int64_t c) {
                return e4m3_code(tile[size_t((r - r0) * kFp8Block + (c - c0))] * s.inv);
            };
            if (!transposed) {  // codes [OUT, INp], scales [bands, in_ld]
                scales[band * in_ld + cb] = s.scale;
                for (int64_t r = r0; r < r1; ++r) {
                    uint8_t* q = codes + r * INp;
                    for (int64_t c = c0; c < c1; ++c) q[c] = code_at(r, c);
                    for (int64_t c = c1; c < c0 + kFp8Block; ++c) q[c] = 0;
                }
            } else {  // codes [IN, OUTp], scales [in_cols, out_ld]
                scales[cb * out_ld + band] = s.scale;
                for (int64_t c = c0; c < c1; ++c) {
                    uint8_t* q = codes + c * OUTp;
                    for (int64_t r = r0; r < r1; ++r) q[r] = code_at(r, c);
                    for (int64_t r = r1; r < r0 + kFp8Block; ++r) q[r] = 0;
                }
            }
        }
    }
    // The scale grid's pad entries (its row stride rounded up to 4).
    const int64_t rows = transposed ? in_cols : bands, cols = transposed ? out_cols : in_cols,
                  ld = transposed ? out_ld : in_ld;
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = cols; j < ld; ++j) scales[i * ld + j] = 1.0f;
}

void quantize_4bit(uint8_t* codes, float* absmax, const float* in, int64_t n, int blocksize) {
    TANDEM_KCHECK_PTR(codes);
    TANDEM_KCHECK_PTR(absmax);
    TANDEM_KCHECK_PTR(in);
    TANDEM_KCHECK(n > 0 && blocksize > 0 && blocksize % 2 == 0);
    const int64_t blocks = quant4_blocks(n, blocksize);
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
        const int64_t lo = b * blocksize, hi = std::min(n, lo + blocksize);
        float m = -FLT_MAX;
        for (int64_t e = lo; e < hi; ++e) m = std::fmax(m, std::fabs(in[e]));
        absmax[b] = m;
        const float r = 1.0f / m;
        for (int64_t e = lo; e < hi; e += 2) {
            const float x0 = in[e] * r;
            const float x1 = (e + 1 < hi ? in[e + 1] : 0.0f) * r;  // an odd n pads with 0.0
            codes[e >> 1] = uint8_t((nf4_code_of(x0) << 4) | nf4_code_of(x1));
        }
    }
}

float absmax_mean(const float* absmax, int64_t n) {
    TANDEM_KCHECK_PTR(absmax);
    TANDEM_KCHECK(n > 0);
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += double(absmax[i]);
    return float(s / double(n));
}

void quantize_blockwise_8bit(uint8_t* q, float* block_absmax, const float* in, float offset, const float* code,
                             int64_t n, int blocksize) {
    TANDEM_KCHECK_PTR(q);
    TANDEM_KCHECK_PTR(block_absmax);
    TANDEM_KCHECK_PTR(in);
    TANDEM_KCHECK_PTR(code);
    TANDEM_KCHECK(n > 0 && blocksize > 0);
    const int64_t blocks = quant4_blocks(n, blocksize);
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
        const int64_t lo = b * blocksize, hi = std::min(n, lo + blocksize);
        float m = -FLT_MAX;
        for (int64_t e = lo; e < hi; ++e) m = std::fmax(m, std::fabs(in[e] - offset));
        block_absmax[b] = m;
        const float r = 1.0f / m;
        for (int64_t e = lo; e < hi; ++e) q[e] = code8_of(code, (in[e] - offset) * r);
    }
}

}  // namespace tandem::cpu
