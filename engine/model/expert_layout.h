// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// gpt-oss's expert tensors read into the layout the decoder holds (plan.h ExpertLayout): [E, in, out] stored
// transposed to [E, out, in], gate / up alternating along out moved to the gate rows then the up rows, and
// MXFP4 blocks (io/mxfp4.h, already [E, out, in]) dequantized. Host memory, one tensor at a time (a 20B
// model's largest expert tensor is about 2 GiB as fp32); both backends load through it.
#pragma once

#include <vector>

#include "model/plan.h"
#include "tandem/safetensors.h"

namespace tandem {

// Entry e's values as its piece holds them ([E, out, in], e.numel floats). Error{InvalidInput} naming the
// tensor when the checkpoint's tensor does not match.
std::vector<float> read_expert_tensor(const SafetensorsSet& ws, const WeightEntry& e);

// Values stored as the checkpoint holds them (out_in: already [E, out, in], only the rows interleaved: MXFP4
// blocks) into the piece's layout.
std::vector<float> expert_tensor_from_checkpoint(std::vector<float> values, const ExpertLayout& x, bool out_in = false);

// The inverse for writers (merged export): values as the piece holds them back to the checkpoint's layout
// (never MXFP4: merged weights are 16-bit).
std::vector<float> expert_tensor_to_checkpoint(const std::vector<float>& piece, const ExpertLayout& x);

}  // namespace tandem
