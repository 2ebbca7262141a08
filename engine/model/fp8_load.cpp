// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Loading FP8 projections on the CPU (see fp8_load.h).
#include "model/fp8_load.h"

#include <string>
#include <vector>

#include "kernels/cpu/fp8.h"
#include "model/quant4_load.h"
#include "tandem/error.h"

namespace tandem {

const TensorInfo& fp8_source_tensor(const SafetensorsSet& ws, const WeightEntry& e) {
    return float_tensor(ws, e.name, e.f8.out * e.f8.in, "FP8 quantization at load");
}

void load_fp8_host(const ArenaLayout& W, void* base, const WeightEntry& e, const SafetensorsSet& ws) {
    const std::vector<float> v = tensor_to_f32(fp8_source_tensor(ws, e));
    cpu::quantize_fp8_weight(W.ptr<uint8_t>(base, e.f8.codes), W.ptr<float>(base, e.f8.scales), v.data(),
                             int(e.f8.out), int(e.f8.in));
}

}  // namespace tandem
