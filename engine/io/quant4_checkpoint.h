// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The tensors of one 4-bit projection in a pre-quantized (*-bnb-4bit) checkpoint, found and validated.
// bitsandbytes (QuantState.as_dict(packed=True), saved by transformers) stores, for a weight W of [OUT,IN]:
//   W                      uint8 [ceil(n/2), 1]   two 4-bit codes per byte (kernels/cpu/nf4.h)
//   W.absmax               uint8 [blocks] (double quantization) or float32 [blocks]
//   W.nested_absmax        float32 [ceil(blocks / nested_blocksize)]   (double quantization only)
//   W.nested_quant_map     float32 [256]                               (double quantization only)
//   W.quant_map            float32 [16]       the code table (NF4 or FP4)
//   W.quant_state.bitsandbytes__nf4 (or __fp4)  uint8: JSON {quant_type, blocksize, dtype, shape,
//                          nested_blocksize, nested_dtype, nested_offset}
// Every length is checked against the shape the config implies; errors name the tensor and what is wrong
// (Error{InvalidInput}), or what is not supported (Error{Unsupported}: another code table, a blocksize
// other than the plan's).
#pragma once

#include <string>
#include <vector>

#include "tandem/safetensors.h"

namespace tandem {

struct Quant4Tensors {
    const TensorInfo* codes = nullptr;
    const TensorInfo* absmax = nullptr;
    const TensorInfo* nested_absmax = nullptr;  // double quantization only
    const TensorInfo* nested_code = nullptr;    // double quantization only
    const TensorInfo* code = nullptr;
    std::string quant_type;                     // nf4 | fp4
    int blocksize = 0, nested_blocksize = 0;
    bool nested = false;
    float offset = 0.0f;                        // nested_offset
    std::string dtype;                          // the original weight's dtype ("bfloat16")
    std::vector<int64_t> shape;                 // the float weight's shape (from the quant_state)
};

// True when `weight_name` is stored 4-bit in `set` (a uint8 tensor with a quant_state beside it).
bool is_quant4_tensor(const SafetensorsSet& set, const std::string& weight_name);

// True for the companions of a 4-bit weight (absmax, nested_absmax, nested_quant_map, quant_map, quant_state):
// not tensors of their own.
bool is_quant4_part(const SafetensorsSet& set, const std::string& name);

// The validated tensors of the 4-bit weight `weight_name` whose float shape should be `shape` (empty: whatever
// its quant_state says).
Quant4Tensors find_quant4(const SafetensorsSet& set, const std::string& weight_name,
                          const std::vector<int64_t>& shape);

}  // namespace tandem
