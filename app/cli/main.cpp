// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem-cli: the headless front end of the engine. Exit codes: 0 ok, 1 internal error, 2 invalid input,
// 3 out of memory, 4 unsupported, 130 cancelled. Every engine error is printed as one line on stderr
// ("tandem-cli: invalid input: PATH: what was wrong; what to do").
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <new>
#include <vector>

#include "commands.h"
#include "tandem/error.h"
#include "tandem/system_info.h"

int main(int argc, char** argv) {
    CLI::App app{"Tandem: fine-tune LLMs with LoRA on NVIDIA GPUs (headless front end)", "tandem-cli"};
    // --version: the build and the machine (GPU, CUDA runtime and driver, cuDNN), for bug reports.
    app.set_version_flag("--version", [] {
        const tandem::SystemInfo info = tandem::system_info();
        return "tandem-cli " + info.version + "\n" + tandem::system_info_text(info);
    });
    app.require_subcommand(1);

    struct Entry { CLI::App* sub; tandem::cli::Run run; };
    std::vector<Entry> entries;
    auto add = [&](tandem::cli::Run (*reg)(CLI::App&)) {
        const size_t before = app.get_subcommands({}).size();
        auto run = reg(app);
        entries.push_back({app.get_subcommands({}).at(before), std::move(run)});
    };
    add(tandem::cli::add_info_command);
    add(tandem::cli::add_tokenize_command);
    add(tandem::cli::add_chat_command);
    add(tandem::cli::add_data_command);
    add(tandem::cli::add_demo_command);
    add(tandem::cli::add_eval_command);
    add(tandem::cli::add_generate_command);
    add(tandem::cli::add_train_command);
    add(tandem::cli::add_export_command);
    add(tandem::cli::add_selftest_command);
    add(tandem::cli::add_bench_command);
    add(tandem::cli::add_download_command);
    add(tandem::cli::add_plan_command);

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int rc = app.exit(e);
        return rc == 0 ? 0 : 2;  // usage errors are invalid input
    }

    try {
        for (auto& e : entries)
            if (e.sub->parsed()) return e.run();
        return 2;
    } catch (const tandem::Error& e) {
        std::cerr << "tandem-cli: " << tandem::error_category_name(e.category()) << ": " << e.what() << "\n";
        return tandem::exit_code_for(e.category());
    } catch (const std::bad_alloc&) {
        std::cerr << "tandem-cli: out of memory\n";
        return 3;
    } catch (const std::filesystem::filesystem_error& e) {
        // A file or folder the user named or owns (missing, a file where a folder should be, no permission, a
        // full disk) that a path without its own check met: an I/O error naming the path, never an internal one.
        const std::string path = e.path1().empty() ? std::string() : e.path1().string() + ": ";
        std::cerr << "tandem-cli: " << tandem::error_category_name(tandem::ErrorCategory::Io) << ": " << path
                  << e.code().message() << "; check that the path exists, is writable and its disk has space\n";
        return tandem::exit_code_for(tandem::ErrorCategory::Io);
    } catch (const std::exception& e) {
        std::cerr << "tandem-cli: internal error: " << e.what() << "\n";
        return 1;
    }
}
