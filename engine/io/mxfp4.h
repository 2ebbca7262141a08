// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// MXFP4 tensors as gpt-oss is released (the OCP microscaling format: blocks of 32 values sharing one power-of-
// two scale, each value a 4-bit E2M1 float). For a parameter P whose dequantized form is [..., OUT, IN]:
//   P_blocks  uint8 [..., OUT, IN / 32, 16]  two E2M1 codes per byte, the low nibble first (element 2j of the
//                                            block in the low nibble of byte j, 2j + 1 in the high one)
//   P_scales  uint8 [..., OUT, IN / 32]      the block's exponent e8m0: value = code * 2^(scale - 127)
// E2M1 codes 0..15: 0, 0.5, 1, 1.5, 2, 3, 4, 6, then the same negated (bit 3 is the sign; core/mxfp4.h). transformers'
// convert_moe_packed_tensors decodes them the same way and then transposes the last two axes for gpt-oss's
// [E, in, out] parameters; Tandem keeps [..., OUT, IN], the orientation the decoder wants.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/safetensors.h"

namespace tandem {

// The two parts of an MXFP4 tensor.
struct Mxfp4Tensor {
    const TensorInfo* blocks = nullptr;
    const TensorInfo* scales = nullptr;
    std::vector<int64_t> shape;  // dequantized: [..., OUT, IN]
};

// True when `name` is absent but name_blocks and name_scales are there.
bool is_mxfp4_tensor(const SafetensorsSet& ws, const std::string& name);

// The parts of `name`, checked: uint8, consistent shapes, and dequantized shape `out_in` ([..., OUT, IN]).
// Error{InvalidInput} naming the tensor and what is wrong.
Mxfp4Tensor find_mxfp4(const SafetensorsSet& ws, const std::string& name, const std::vector<int64_t>& out_in);

// The dequantized shape of a parameter stored [..., IN, OUT] (gpt-oss's experts): its last two axes swapped.
std::vector<int64_t> mxfp4_out_in(const std::vector<int64_t>& param_shape);

// The values, [..., OUT, IN] row-major.
std::vector<float> dequantize_mxfp4(const Mxfp4Tensor& t);

}  // namespace tandem
