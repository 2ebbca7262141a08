// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Helpers shared by the Qt Test suites: where the shared assets and committed fixtures are, running
// tandem-cli as a child process, and writing scratch files.
#pragma once

#include <QProcess>
#include <QString>
#include <QTemporaryDir>
#include <QTest>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "tandem/error.h"
#include "tandem/run_config.h"

namespace tandem::test {

inline std::filesystem::path assets() { return TANDEM_ASSETS_DIR; }
inline std::filesystem::path fixtures() { return TANDEM_FIXTURES_DIR; }
inline std::filesystem::path source_dir() { return TANDEM_SOURCE_DIR; }

// Skips the current test (QSKIP) when the shared assets are not beside the checkout.
#define TANDEM_REQUIRE_ASSET(path)                                                        \
    do {                                                                                  \
        if (!std::filesystem::exists(path))                                               \
            QSKIP(qPrintable(QString("asset not found: ") + QString::fromStdString((path).string()))); \
    } while (0)

inline void write_file(const std::filesystem::path& path, const std::string& data) {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

// Runs fn, which must throw tandem::Error of `category` whose message contains every needle.
inline void expect_error(const std::function<void()>& fn, tandem::ErrorCategory category,
                         const std::vector<std::string>& needles) {
    try {
        fn();
    } catch (const tandem::Error& e) {
        const std::string msg = e.what();
        QVERIFY2(e.category() == category,
                 qPrintable(QString("wrong category '%1' for: %2")
                                .arg(QString::fromUtf8(std::string(tandem::error_category_name(e.category())).c_str()),
                                     QString::fromStdString(msg))));
        for (const auto& n : needles)
            QVERIFY2(msg.find(n) != std::string::npos,
                     qPrintable(QString("message lacks '%1': %2").arg(QString::fromStdString(n), QString::fromStdString(msg))));
        return;
    } catch (const std::exception& e) {
        QFAIL(qPrintable(QString("expected tandem::Error, got std::exception: ") + e.what()));
    }
    QFAIL("expected tandem::Error, nothing was thrown");
}

struct CliResult {
    int exit_code = -1;
    bool crashed = false;   // killed by a signal
    QByteArray out;
    QByteArray err;
};

// Runs tandem-cli with args, feeding `input` on stdin, in `env` when given. Never hangs: killed after
// timeout_ms (then crashed).
inline CliResult run_cli(const QStringList& args, const QByteArray& input = {}, int timeout_ms = 120000,
                         const QProcessEnvironment* env = nullptr) {
    QProcess p;
    if (env) p.setProcessEnvironment(*env);
    p.start(QString(TANDEM_CLI_PATH), args);
    CliResult r;
    if (!p.waitForStarted(10000)) return r;
    if (!input.isEmpty()) p.write(input);
    p.closeWriteChannel();
    if (!p.waitForFinished(timeout_ms)) {
        p.kill();
        p.waitForFinished();
        r.crashed = true;
        return r;
    }
    r.crashed = p.exitStatus() == QProcess::CrashExit;
    r.exit_code = p.exitCode();
    r.out = p.readAllStandardOutput();
    r.err = p.readAllStandardError();
    return r;
}

// A tiny CPU run config (LoRA r 4, 256-token batches of samples up to 128 tokens) of `model` on `dataset`,
// written to `out` after `max_steps` steps: the studio tests' runs.
inline RunConfig tiny_cpu_run(const std::string& model, const std::string& dataset, const std::string& out,
                              int64_t max_steps) {
    RunConfig c;
    c.model = model;
    c.data.dataset = dataset;
    c.data.max_seq_len = 128;
    c.training.batch_tokens = 256;
    c.training.max_steps = max_steps;
    c.lora.r = 4;
    c.lora.alpha = 8;
    c.device = DeviceChoice::Cpu;
    c.output_dir = out;
    return c;
}

}  // namespace tandem::test
