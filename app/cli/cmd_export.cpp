// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// `tandem-cli export [RUN] --run DIR --out DIR [--format peft|merged|gguf|gguf-lora] [--dtype bf16|fp16|fp32]
// [--quant f16|bf16|q8_0|q4_k_m|q5_k_m|q6_k] [--force]` — writes a run's LoRA adapter in PEFT's layout, the base
// model with the adapter merged in (a Hugging Face model folder), the merged model as a GGUF file with an Ollama
// Modelfile, or the adapter as a GGUF LoRA adapter; from the final adapter, or the latest complete checkpoint when
// the run did not finish. A progress line goes to stderr (on a terminal); Ctrl-C cancels (exit 130) and leaves
// nothing behind. Exit codes: 0 ok, 1 internal, 2 invalid input, 3 out of memory, 4 unsupported, 130 cancelled.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "hub_progress.h"
#include "tandem/error.h"
#include "tandem/trainer.h"

namespace tandem::cli {

Run add_export_command(CLI::App& app) {
    struct Opts {
        std::string run, run_pos, out, format = "peft", dtype = "bf16", quant;
        bool force = false;
    };
    auto o = std::make_shared<Opts>();
    auto* sub = app.add_subcommand("export", "Export a run's LoRA adapter, the model with it merged in, or GGUF");
    sub->add_option("run_dir", o->run_pos, "run folder (the same as --run)");
    sub->add_option("--run", o->run, "run folder (written by tandem-cli train)");
    sub->add_option("--out", o->out, "folder to write the export to")->required();
    sub->add_option("--format", o->format,
                    "peft (the adapter) | merged (the base model with the adapter merged in, for transformers and "
                    "vLLM) | gguf (the merged model as one GGUF file + an Ollama Modelfile, for llama.cpp, Ollama, "
                    "LM Studio) | gguf-lora (the adapter as a GGUF LoRA adapter, llama.cpp's --lora)")
        ->capture_default_str();
    sub->add_option("--dtype", o->dtype, "merged: bf16 | fp16 | fp32 (merged in fp32, rounded once)")
        ->capture_default_str();
    sub->add_option("--quant", o->quant,
                    "gguf: f16 | bf16 | q8_0 | q4_k_m | q5_k_m | q6_k; gguf-lora: f32 | f16 | bf16 (default f16)");
    sub->add_flag("--force", o->force, "overwrite what is already in --out");
    return [o]() {
        const std::string run = !o->run.empty() ? o->run : o->run_pos;
        if (run.empty()) throw_invalid("export: name the run folder (tandem-cli export RUN --out DIR ...)");
        if (!o->run.empty() && !o->run_pos.empty() && o->run != o->run_pos)
            throw_invalid("export: two different run folders given (" + o->run_pos + " and --run " + o->run + ")");
        ExportOptions eo;
        eo.format = o->format;
        eo.dtype = o->dtype;
        const bool gguf = o->format == "gguf" || o->format == "gguf-lora";
        if (!o->quant.empty() && !gguf)
            throw_invalid("--quant is for --format gguf or gguf-lora (merged exports take --dtype)");
        eo.quant = o->quant.empty() ? "f16" : o->quant;
        eo.overwrite = o->force;
        const bool tty = ::isatty(STDERR_FILENO) == 1;
        const char* verb = o->format == "merged" ? "merging" : "writing";
        eo.progress = [tty, verb, last = uint64_t(0)](uint64_t done, uint64_t total) mutable {
            if (!tty || total == 0 || (done - last < (uint64_t(16) << 20) && done < total)) return;
            last = done;
            std::fprintf(stderr, "\r%s: %llu / %llu MiB (%d%%)", verb, static_cast<unsigned long long>(done >> 20),
                         static_cast<unsigned long long>(total >> 20), int(100.0 * double(done) / double(total)));
            if (done >= total) std::fprintf(stderr, "\n");
        };
        const HubSigint sigint;  // Ctrl-C sets g_hub_cancel: the export stops and removes what it wrote
        eo.cancel = &g_hub_cancel;
        const std::string from = export_run(run, o->out, eo);
        std::cerr << "exported " << from << " of " << run << " as " << o->format
                  << (gguf ? " (" + eo.quant + ")" : std::string()) << "\n";
        std::cout << o->out << "\n";
        return 0;
    };
}

}  // namespace tandem::cli
