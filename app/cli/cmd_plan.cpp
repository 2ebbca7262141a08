// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// `tandem-cli plan --model DIR [settings] [--max-context]` — the memory a run would need, from config.json alone
// (no weights, no data): per purpose, the device and the checkpointing policy `auto` would choose, and whether
// it fits; with --max-context, the longest single sample that trains with these settings.
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "commands.h"
#include "run_flags.h"
#include "tandem/error.h"
#include "tandem/run_config.h"
#include "tandem/trainer.h"

namespace tandem::cli {

namespace {

std::string gib(uint64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / double(1ull << 30));
    return buf;
}

void print(const MemoryEstimate& e) {
    const MemoryPlan& m = e.memory;
    std::cout << "device: " << device_choice_name(e.device) << ", checkpointing: "
              << checkpoint_policy_name(e.checkpointing)
              << (e.attention == AttentionKernels::Inhouse ? ", attention: in-house kernels" : "") << "\n"
              << "  weights        " << gib(m.weights) << "\n"
              << "  LoRA + AdamW   " << gib(m.lora_optimizer) << "\n"
              << "  activations    " << gib(m.activations) << "\n"
              << "  workspace      " << gib(m.workspace) << "\n"
              << "  overhead       " << gib(m.overhead) << "\n"
              << "  total          " << gib(m.total) << " of " << gib(m.device_total) << " (" << gib(m.device_free)
              << " free)\n";
    if (m.pinned_host) std::cout << "  pinned host    " << gib(m.pinned_host) << "\n";
    std::cout << (e.fits ? "fits" : "does not fit") << (e.message.empty() ? "" : ": " + e.message) << "\n";
}

}  // namespace

Run add_plan_command(CLI::App& app) {
    struct Opts {
        std::string config, model, targets, checkpointing, device;
        std::optional<int> lora_r, batch_tokens, max_seq_len;
        bool max_context = false;
        MemoryFlags memory;
    };
    auto o = std::make_shared<Opts>();
    auto* sub = app.add_subcommand("plan", "Memory a run would need (from config.json alone), and the longest sample "
                                           "that fits");
    sub->add_option("--config", o->config, "run config JSON; flags override its values");
    sub->add_option("--model", o->model, "Hugging Face model folder");
    sub->add_option("--lora-r", o->lora_r, "LoRA rank");
    sub->add_option("--targets", o->targets, "comma-separated target modules");
    sub->add_option("--batch-tokens", o->batch_tokens, "micro-batch token budget");
    sub->add_option("--max-seq-len", o->max_seq_len, "longest sample");
    sub->add_option("--checkpointing", o->checkpointing, "auto|off|selective|recompute|smart|smart-single");
    sub->add_option("--device", o->device, "cpu|cuda|auto");
    add_memory_flags(sub, o->memory);
    sub->add_flag("--max-context", o->max_context,
                  "search the longest single sample that trains with these settings (batch of one sample)");
    return [o]() {
        RunConfig c;
        if (!o->config.empty()) c = load_run_config(o->config, /*validate=*/false);
        if (!o->model.empty()) c.model = o->model;
        if (c.model.empty()) throw_invalid("--model: give the Hugging Face model folder to plan for");
        // A plan needs neither data nor an output folder.
        if (c.data.dataset.empty()) c.data.dataset = "(plan)";
        if (c.output_dir.empty()) c.output_dir = "(plan)";
        if (o->lora_r) c.lora.r = *o->lora_r;
        if (!o->targets.empty()) c.lora.target_modules = split_list(o->targets);
        if (o->batch_tokens) c.training.batch_tokens = *o->batch_tokens;
        if (o->max_seq_len) c.data.max_seq_len = *o->max_seq_len;
        apply_choice_flags(c, o->checkpointing, o->device);
        apply_memory_flags(c, o->memory);
        if (o->max_context) {
            const LongestContext l = longest_context(c);
            if (l.tokens == 0) {
                std::cout << "longest sample that fits: none (not even 64 tokens)\n";
                return 3;
            }
            std::cout << "longest sample that fits: " << l.tokens << " tokens\n";
            print(l.estimate);
            return 0;
        }
        const MemoryEstimate e = estimate_memory(c);
        print(e);
        return e.fits ? 0 : 3;
    };
}

}  // namespace tandem::cli
