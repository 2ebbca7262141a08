// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Fuzzes the MXFP4 checkpoint reader (engine/io/mxfp4.cpp: gpt-oss's <name>_blocks / <name>_scales, their dtypes
// and shapes against the parameter's) and the dequantization the loads and exports run on what it accepts
// (io/mxfp4.cpp, kernels/cpu/mxfp4.cpp, export/base_weights.cpp). The input is a whole .safetensors file.
#include <cstdlib>
#include <string>
#include <vector>

#include "export/base_weights.h"
#include "fuzz_common.h"
#include "io/mxfp4.h"
#include "tandem/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto path = tandem::fuzz::write_scratch("model.safetensors", data, size);
    tandem::fuzz::run_parser([&] {
        const tandem::SafetensorsSet set = tandem::SafetensorsSet::open(path);
        for (const auto& name : set.names()) {
            (void)tandem::is_base_tensor(set, name);
            const tandem::TensorInfo& t = set.at(name);
            if (!name.ends_with("_blocks")) continue;
            const std::string param = name.substr(0, name.size() - 7);
            if (!tandem::is_mxfp4_tensor(set, param)) continue;
            // As the exports read it: the shape from the blocks, then the values.
            const std::vector<int64_t> shape = tandem::base_tensor_shape(set, t);
            int64_t n = 1;
            for (int64_t d : shape) n *= d;
            if (n > (int64_t(1) << 22)) continue;  // a valid but large tensor: not worth dequantizing here
            std::vector<float> out;
            tandem::read_base_tensor(set, t, out, "fuzz");
            if (int64_t(out.size()) != n) std::abort();
            // As a load checks it against the shape config.json implies (here: the blocks' own, and a wrong one).
            if (t.shape.size() >= 2) {
                std::vector<int64_t> out_in(t.shape.begin(), t.shape.end() - 1);
                out_in.back() *= 32;
                (void)tandem::dequantize_mxfp4(tandem::find_mxfp4(set, param, out_in));
                out_in.back() += 32;
                (void)tandem::find_mxfp4(set, param, out_in);
            }
        }
    });
    return 0;
}
