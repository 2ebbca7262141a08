// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The base model's tensors as the merging exports (merged, GGUF) read them: float tensors converted to fp32,
// and the 4-bit weights of a *-bnb-4bit checkpoint dequantized to fp32 (bitsandbytes' arithmetic,
// kernels/cpu/nf4.h) with their float shape. A 4-bit weight's companions (absmax, quant_map, quant_state,
// ...) are parts of it, not tensors of their own. gpt-oss's MXFP4 experts (io/mxfp4.h): <name>_blocks stands for
// the parameter <name> (dequantized, [E, in, out] as transformers holds it), <name>_scales is its part.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/safetensors.h"

namespace tandem {

// False for a 4-bit weight's companion tensors and MXFP4 scales (skip them).
bool is_base_tensor(const SafetensorsSet& set, const std::string& name);

// The name the tensor stands for: an MXFP4 parameter's <name> for its <name>_blocks, else its own.
std::string base_tensor_name(const SafetensorsSet& set, const TensorInfo& t);

// The tensor's shape as a float weight ([OUT, IN] for a 4-bit one).
std::vector<int64_t> base_tensor_shape(const SafetensorsSet& set, const TensorInfo& t);

// The tensor's values in fp32. Error{Unsupported} naming it for a dtype that cannot be converted.
void read_base_tensor(const SafetensorsSet& set, const TensorInfo& t, std::vector<float>& out, const std::string& what);

}  // namespace tandem
