// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Fuzzes config.json -> ModelConfig (engine/io/model_config.cpp + the family files in engine/arch/):
// parse_model_config on the parsed JSON, then what callers do next with a config that parsed (the
// expected tensor list in both expert layouts, the parameter counts, the MoE layer test).
#include "core/files.h"
#include "fuzz_common.h"
#include "tandem/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    tandem::fuzz::run_parser([&] {
        const auto json = tandem::parse_json(tandem::fuzz::as_string(data, size), "config.json");
        const tandem::ModelConfig c = tandem::parse_model_config(json, "config.json");
        (void)tandem::expected_tensors(c);
        (void)c.parameter_count();
        (void)c.active_parameter_count();
        if (c.num_experts > 0) {  // the fused 3-D expert layout too
            tandem::ModelConfig fused = c;
            fused.experts_fused = true;
            (void)tandem::expected_tensors(fused);
        }
        for (int64_t l = 0; l < c.num_hidden_layers && l < 4; ++l) (void)c.is_moe_layer(l);
    });
    return 0;
}
