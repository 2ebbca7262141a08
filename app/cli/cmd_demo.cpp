// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// `tandem-cli demo [--out DIR] [--seed N]` — writes the built-in demo model (tiny, random weights from a fixed
// seed, no download) as a Hugging Face model folder and prints where it went.
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "tandem/demo_model.h"

namespace tandem::cli {

Run add_demo_command(CLI::App& app) {
    struct Opts {
        std::string out = "tandem-demo-model";
        uint64_t seed = 1234;
        DemoModelSpec spec;
    };
    auto o = std::make_shared<Opts>();
    auto* sub = app.add_subcommand("demo", "Write the built-in demo model (tiny, random weights, for trying Tandem)");
    sub->add_option("--out", o->out, "folder to write (created if needed)")->capture_default_str();
    sub->add_option("--seed", o->seed, "weight seed")->capture_default_str();
    // Sizes, for benchmarks on random models of a chosen shape (the defaults make the tiny demo).
    sub->add_option("--hidden", o->spec.hidden_size, "hidden size")->capture_default_str();
    sub->add_option("--intermediate", o->spec.intermediate_size, "MLP size")->capture_default_str();
    sub->add_option("--layers", o->spec.num_hidden_layers, "decoder layers")->capture_default_str();
    sub->add_option("--heads", o->spec.num_attention_heads, "attention heads")->capture_default_str();
    sub->add_option("--kv-heads", o->spec.num_key_value_heads, "key/value heads")->capture_default_str();
    sub->add_option("--vocab", o->spec.vocab_size, "embedding rows (0: the demo tokenizer's size)");
    return [o]() {
        DemoModelSpec spec = o->spec;
        spec.seed = o->seed;
        create_demo_model(o->out, spec);
        std::cout << "demo model (random weights, seed " << o->seed << ", not trained) written to " << o->out << "\n";
        return 0;
    };
}

}  // namespace tandem::cli
