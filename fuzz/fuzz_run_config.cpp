// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Fuzzes the run config (parse_run_config + validate_run_config, engine/train/run_config.cpp, with the LoRA
// section's from_json in engine/model/lora_config.cpp): the run.json a user writes or the studio saves. A
// config that validates must survive to_json -> parse_run_config unchanged (resume compares them).
#include "core/files.h"
#include "fuzz_common.h"
#include "tandem/run_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    tandem::fuzz::run_parser([&] {
        const auto j = tandem::parse_json(tandem::fuzz::as_string(data, size), "run.json");
        const tandem::RunConfig c = tandem::parse_run_config(j);
        tandem::validate_run_config(c);
        nlohmann::json out;
        tandem::to_json(out, c);
        if (!(tandem::parse_run_config(out) == c)) {
            std::fprintf(stderr, "fuzz: run config changed in a to_json round trip: %s\n", out.dump().c_str());
            std::abort();
        }
    });
    return 0;
}
