// `tandem-cli export --run DIR --format peft --out DIR [--force]` — writes a run's LoRA adapter in PEFT's
// layout: the final adapter, or the latest complete checkpoint when the run did not finish. Other formats
// (merged weights, GGUF) are not implemented yet: Error{Unsupported}.
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "tandem/error.h"
#include "tandem/trainer.h"

namespace tandem::cli {

Run add_export_command(CLI::App& app) {
    struct Opts {
        std::string run, out, format = "peft";
        bool force = false;
    };
    auto o = std::make_shared<Opts>();
    auto* sub = app.add_subcommand("export", "Export a run's LoRA adapter");
    sub->add_option("--run", o->run, "run folder (written by tandem-cli train)")->required();
    sub->add_option("--out", o->out, "folder to write the adapter to")->required();
    sub->add_option("--format", o->format, "peft")->capture_default_str();
    sub->add_flag("--force", o->force, "overwrite an adapter already in --out");
    return [o]() {
        if (o->format != "peft") throw_unsupported("--format " + o->format + ": only peft is implemented");
        const std::string from = export_run_adapter(o->run, o->out, o->force);
        std::cerr << "exported " << from << " of " << o->run << "\n";
        std::cout << o->out << "\n";
        return 0;
    };
}

}  // namespace tandem::cli
