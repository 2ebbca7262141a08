// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem-cli subcommands: each file registers one subcommand on the CLI11 app and returns a callback that
// runs it. Callbacks throw tandem::Error; main() turns errors into messages and exit codes.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace tandem::cli {

using Run = std::function<int()>;

Run add_info_command(CLI::App& app);
Run add_tokenize_command(CLI::App& app);
Run add_chat_command(CLI::App& app);
Run add_data_command(CLI::App& app);
Run add_demo_command(CLI::App& app);
Run add_eval_command(CLI::App& app);
Run add_generate_command(CLI::App& app);
Run add_train_command(CLI::App& app);
Run add_export_command(CLI::App& app);
Run add_selftest_command(CLI::App& app);
Run add_bench_command(CLI::App& app);
Run add_download_command(CLI::App& app);
Run add_plan_command(CLI::App& app);

}  // namespace tandem::cli
