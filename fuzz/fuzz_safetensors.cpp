// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Fuzzes the safetensors reader (engine/io/safetensors.cpp): 8-byte header length, JSON header, offsets.
// The input is a whole .safetensors file; every tensor of a file that opens is converted to fp32 when its
// dtype allows, so the spans handed out are read to their end (ASan checks they stay in the mapping).
#include "fuzz_common.h"
#include "tandem/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto path = tandem::fuzz::write_scratch("model.safetensors", data, size);
    tandem::fuzz::run_parser([&] {
        tandem::SafetensorsFile file(path);
        for (const auto& t : file.tensors()) {
            if (file.find(t.name) != &t) std::abort();
            if (tandem::dtype_converts_to_f32(t.dtype)) (void)tandem::tensor_to_f32(t);
            (void)tandem::shape_to_string(t.shape);
        }
        (void)file.names();
        (void)file.metadata();
    });
    return 0;
}
