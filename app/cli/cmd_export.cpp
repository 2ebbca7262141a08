// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// `tandem-cli export --run DIR --out DIR [--format peft|merged] [--dtype bf16|fp16|fp32] [--force]` — writes a
// run's LoRA adapter in PEFT's layout, or the base model with the adapter merged in (a Hugging Face model
// folder), from the final adapter or the latest complete checkpoint when the run did not finish. GGUF is not
// implemented yet: Error{Unsupported}.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "tandem/error.h"
#include "tandem/trainer.h"

namespace tandem::cli {

Run add_export_command(CLI::App& app) {
    struct Opts {
        std::string run, out, format = "peft", dtype = "bf16";
        bool force = false;
    };
    auto o = std::make_shared<Opts>();
    auto* sub = app.add_subcommand("export", "Export a run's LoRA adapter, or the model with it merged in");
    sub->add_option("--run", o->run, "run folder (written by tandem-cli train)")->required();
    sub->add_option("--out", o->out, "folder to write the adapter to")->required();
    sub->add_option("--format", o->format,
                    "peft (the adapter) | merged (the base model with the adapter merged in, for transformers, vLLM, "
                    "llama.cpp's converter)")
        ->capture_default_str();
    sub->add_option("--dtype", o->dtype, "merged: bf16 | fp16 | fp32 (merged in fp32, rounded once)")
        ->capture_default_str();
    sub->add_flag("--force", o->force, "overwrite what is already in --out");
    return [o]() {
        if (o->format == "gguf" || o->format == "gguf-lora")
            throw_unsupported("--format " + o->format + ": GGUF export is not implemented yet; use merged and "
                              "llama.cpp's convert_hf_to_gguf.py");
        if (o->format != "peft" && o->format != "merged")
            throw_invalid("--format " + o->format + ": expected peft or merged");
        ExportOptions eo;
        eo.format = o->format;
        eo.dtype = o->dtype;
        eo.overwrite = o->force;
        const bool tty = ::isatty(STDERR_FILENO) == 1;
        eo.progress = [tty, last = uint64_t(0)](uint64_t done, uint64_t total) mutable {
            if (!tty || total == 0 || (done - last < (uint64_t(64) << 20) && done < total)) return;
            last = done;
            std::fprintf(stderr, "\rmerging: %llu / %llu MiB", static_cast<unsigned long long>(done >> 20),
                         static_cast<unsigned long long>(total >> 20));
            if (done >= total) std::fprintf(stderr, "\n");
        };
        const std::string from = export_run(o->run, o->out, eo);
        std::cerr << "exported " << from << " of " << o->run << "\n";
        std::cout << o->out << "\n";
        return 0;
    };
}

}  // namespace tandem::cli
