// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Loading 4-bit projections (QLoRA) into their plan pieces (model/plan.h Quant4Pieces), shared by both
// backends: a pre-quantized checkpoint's parts are copied as they are; a float checkpoint is quantized at load
// (NF4, blocksize 64, double quantization: bitsandbytes' quantize_4bit with compress_statistics). The CPU
// quantizes with kernels/cpu/nf4; the CUDA model streams the tensor through its workspace and quantizes on
// the device (cuda_model.cpp), with the same offset (absmax_mean) and tables from here.
#pragma once

#include <array>
#include <vector>

#include "core/layout.h"
#include "io/quant4_checkpoint.h"
#include "model/plan.h"
#include "tandem/safetensors.h"

namespace tandem {

// The consts piece: code table [16], nested code table [256], offset.
using Quant4Consts = std::array<float, kQuant4Consts>;
Quant4Consts quant4_consts(const float* code16, const float* nested256, float offset);
// The consts of Tandem's own quantization (NF4 table, bitsandbytes' dynamic 8-bit code, this offset).
Quant4Consts nf4_consts(float offset);
// The consts stored in a checkpoint's 4-bit tensors.
Quant4Consts checkpoint_consts(const Quant4Tensors& q);

// The 4-bit tensors of entry e in the checkpoint, checked against the plan (block size, double
// quantization); Error{Unsupported} naming the tensor when the checkpoint differs from what was planned.
Quant4Tensors checkpoint_quant4(const SafetensorsSet& ws, const WeightEntry& e, const Dims& d);

// A float tensor that the plan holds as 4-bit, or a 4-bit one it holds as float: which applies, with a
// clear error for the second (the checkpoint contradicts its quantization_config).
bool checkpoint_is_quant4(const SafetensorsSet& ws, const WeightEntry& e);

// The float tensor a load quantizes (4-bit or FP8 at load), checked: numel elements, a dtype that converts to
// fp32 (`reader` names the load in the refusal: "4-bit quantization reads BF16, F16, F32 and F64").
const TensorInfo& float_tensor(const SafetensorsSet& ws, const std::string& name, int64_t numel,
                               const std::string& reader);

// Error{Unsupported} when the checkpoint stores entry e 4-bit though the plan holds it in float (its config's
// llm_int8_skip_modules and the tensors disagree).
void check_not_quant4(const SafetensorsSet& ws, const WeightEntry& e);

// CPU backend: every base weight of plan y into the fp32 weights arena at base (host memory): float tensors
// converted, 4-bit projections copied or quantized (load_quant4_host). CpuModel and CpuInferModel load so.
void load_weights_fp32(const ModelPlan& y, void* base, const Dims& d, const SafetensorsSet& ws);

// The checkpoint tensors of entry e: its own name, or its parts (each numel / parts.size() values).
std::vector<std::string> entry_tensors(const WeightEntry& e);

// The n float values of entry e: its tensor, or its parts (the Hub's per-expert tensors of one 4-bit expert
// parameter) one after the other. Error{InvalidInput} naming a tensor of the wrong size or dtype.
std::vector<float> entry_floats(const SafetensorsSet& ws, const WeightEntry& e, int64_t n);

// CPU backend: fills entry e's pieces in the weights arena at base (host memory).
void load_quant4_host(const ArenaLayout& W, void* base, const WeightEntry& e, const Dims& d,
                      const SafetensorsSet& ws);

}  // namespace tandem
