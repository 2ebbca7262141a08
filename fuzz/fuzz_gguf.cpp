// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Fuzzes the GGUF reader (engine/export/gguf_file.cpp): magic, version, metadata values (strings, arrays, nested
// arrays), tensor infos, alignment, offsets and overlap; every tensor of a file that opens is read back as fp32
// (dequantized), so the offsets it accepted are read to their end. The input is a whole .gguf file.
#include "export/gguf_file.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto path = tandem::fuzz::write_scratch("model.gguf", data, size);
    tandem::fuzz::run_parser([&] {
        const tandem::gguf::GgufFile f = tandem::gguf::read_gguf(path);
        for (const auto& t : f.tensors) (void)f.read_f32(path, t.name);
        for (const auto& k : f.key_order) (void)f.find(k);
    });
    return 0;
}
