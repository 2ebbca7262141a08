// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Fuzzes the 4-bit (bnb-4bit) checkpoint reader (engine/io/quant4_checkpoint.cpp): the quant_state JSON, the
// parts' dtypes and lengths against the shape, the code table; and the dequantization the exports run on what it
// accepts (engine/export/base_weights.cpp, kernels/cpu/nf4.cpp). The input is a whole .safetensors file.
#include <vector>

#include "export/base_weights.h"
#include "fuzz_common.h"
#include "io/quant4_checkpoint.h"
#include "tandem/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto path = tandem::fuzz::write_scratch("model.safetensors", data, size);
    tandem::fuzz::run_parser([&] {
        const tandem::SafetensorsSet set = tandem::SafetensorsSet::open(path);
        for (const auto& name : set.names()) {
            (void)tandem::is_quant4_part(set, name);
            if (!tandem::is_quant4_tensor(set, name)) continue;
            const tandem::Quant4Tensors q = tandem::find_quant4(set, name, {});
            int64_t n = 1;
            for (int64_t d : q.shape) n *= d;
            if (n > (int64_t(1) << 22)) continue;  // a valid but large weight: not worth dequantizing here
            std::vector<float> out;
            tandem::read_base_tensor(set, set.at(name), out, "fuzz");
            if (int64_t(out.size()) != n) std::abort();
        }
    });
    return 0;
}
