// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Fuzzes model.safetensors.index.json (SafetensorsSet::open_index, engine/io/safetensors.cpp): the
// weight_map that says which shard holds which tensor, and the shard names it may point at. Two valid
// shards sit next to the index (written once), so a map that names them really opens and checks them.
#include <cstring>

#include "fuzz_common.h"
#include "tandem/safetensors.h"

namespace {

void write_shards() {
    static const bool done = [] {
        const float values[4] = {1, 2, 3, 4};
        std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(values), sizeof values);
        const std::vector<tandem::TensorToWrite> one = {
            {"model.embed_tokens.weight", tandem::DType::F32, {2, 2}, bytes},
            {"model.norm.weight", tandem::DType::F32, {4}, bytes}};
        const std::vector<tandem::TensorToWrite> two = {{"lm_head.weight", tandem::DType::F32, {1, 4}, bytes}};
        for (const auto& [name, tensors] : {std::pair{"model-00001-of-00002.safetensors", one},
                                            std::pair{"model-00002-of-00002.safetensors", two}}) {
            const std::string file = tandem::serialize_safetensors(tensors);
            tandem::fuzz::write_scratch(std::string("idx/") + name, reinterpret_cast<const uint8_t*>(file.data()),
                                        file.size());
        }
        return true;
    }();
    (void)done;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    write_shards();
    const auto path = tandem::fuzz::write_scratch("idx/model.safetensors.index.json", data, size);
    tandem::fuzz::run_parser([&] {
        const auto set = tandem::SafetensorsSet::open(path.parent_path());
        for (const auto& name : set.names()) {
            if (set.file_of(name).empty()) std::abort();
            (void)tandem::tensor_to_f32(set.at(name));
        }
        (void)set.total_bytes();
        (void)set.source_name();
    });
    return 0;
}
