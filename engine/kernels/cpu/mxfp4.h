// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// MXFP4 weights on the CPU backend (core/mxfp4.h): gpt-oss's experts as the checkpoint stores them, one
// parameter of G groups (experts) of R rows of C columns: codes [G, R, C / 2] (two per byte, low nibble first),
// scales [G, R, C / 32]. The CUDA backend keeps them so on the device and dequantizes one parameter into a bf16
// workspace before its grouped GEMMs; this twin (fp32) is what the self-test compares it with (the CPU model
// itself dequantizes at load).
#pragma once

#include <cstdint>

namespace tandem::cpu {

// out[G, R, C] = code * 2^(scale - 127) (exact). interleaved: row r of a group is written to row r / 2 when even
// and R / 2 + r / 2 when odd (gpt-oss's gate_up_proj: gate rows first, then up). C a multiple of 32, R even
// when interleaved.
void dequantize_mxfp4(float* out, const uint8_t* codes, const uint8_t* scales, int64_t groups, int rows, int cols,
                      bool interleaved);

}  // namespace tandem::cpu
