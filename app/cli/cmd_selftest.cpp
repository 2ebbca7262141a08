// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// `tandem-cli selftest --device cuda [--filter S] [--seed N] [--json FILE] [--list] [--verbose]` — every
// CUDA op and whole training steps against the CPU reference on fresh random inputs (tandem/selftest.h).
// Prints one line per compared tensor as it is known (status, relative error, tolerance, name; the detail
// for failures and skips, or always with --verbose), then a summary. Exit 0 when everything passed, 1 when
// anything failed; engine errors map as everywhere (no GPU or no CUDA build: unsupported, 4).
// --json writes every result; a non-finite relative error is written as null.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "tandem/error.h"
#include "tandem/selftest.h"
#include "tandem/system_info.h"

namespace tandem::cli {
namespace {

const char* status_of(const SelftestResult& r) {
    return r.skipped ? "SKIP" : r.passed ? "PASS" : "FAIL";
}

void print_result(const SelftestResult& r, bool verbose) {
    if (r.skipped)
        std::printf("%s  %-9s  %-9s  %s\n", status_of(r), "-", "-", r.name.c_str());
    else
        std::printf("%s  %9.3g  %9.1e  %s\n", status_of(r), r.rel_error, r.tolerance, r.name.c_str());
    if (verbose || !r.passed || r.skipped) std::printf("      %s\n", r.detail.c_str());
    std::fflush(stdout);
}

void write_json(const std::string& path, const SelftestOptions& opts, const std::vector<SelftestResult>& results,
                int passed, int failed, int skipped) {
    nlohmann::ordered_json j;
    j["device"] = opts.device;
    j["seed"] = opts.seed;
    j["filter"] = opts.filter;
    j["fixtures"] = opts.fixtures_dir;
    j["passed"] = passed;
    j["failed"] = failed;
    j["skipped"] = skipped;
    j["results"] = nlohmann::ordered_json::array();
    for (const auto& r : results) {
        nlohmann::ordered_json e;
        e["name"] = r.name;
        e["status"] = status_of(r);
        e["rel_error"] = std::isfinite(r.rel_error) ? nlohmann::ordered_json(r.rel_error) : nlohmann::ordered_json();
        e["tolerance"] = r.tolerance;
        e["passed"] = r.passed;
        e["skipped"] = r.skipped;
        e["detail"] = r.detail;
        j["results"].push_back(std::move(e));
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw_io(path + ": cannot open for writing");
    out << j.dump(2) << "\n";
    out.flush();
    if (!out) throw_io(path + ": write failed");
}

}  // namespace

Run add_selftest_command(CLI::App& app) {
    struct Opts {
        SelftestOptions run;
        std::string json;
        bool list = false;
        bool verbose = false;
    };
    auto o = std::make_shared<Opts>();
    CLI::App* sub =
        app.add_subcommand("selftest", "check every CUDA op and a whole training step against the CPU reference");
    sub->add_option("--device", o->run.device, "the backend to check (cuda; cpu has nothing to compare against)")
        ->check(CLI::IsMember({"cuda", "cpu"}));
    sub->add_option("--filter", o->run.filter, "run only the cases whose name contains this text");
    sub->add_option("--fixtures", o->run.fixtures_dir,
                    "also check the PyTorch fixtures and out-of-memory handling (the repository's tests/fixtures)");
    sub->add_option("--seed", o->run.seed, "seed of the random inputs (default 1)");
    sub->add_option("--json", o->json, "also write every result to this JSON file");
    sub->add_flag("--list", o->list, "print the case names and exit");
    sub->add_flag("--verbose", o->verbose, "print the detail of every result, not only of failures and skips");
    return [o]() -> int {
        if (o->list) {
            const auto names = selftest_case_names();
            if (names.empty())  // the cases are the CUDA plugin's
                throw_unsupported("selftest: no CUDA backend here (" + system_info().gpu_unavailable_reason +
                                  "), so there are no cases");
            for (const auto& n : names)
                if (n.find(o->run.filter) != std::string::npos) std::printf("%s\n", n.c_str());
            return 0;
        }
        std::printf("%s  %9s  %9s  %s\n", "    ", "rel error", "tolerance", "case: tensor");
        const auto results = run_selftest(o->run, [&](const SelftestResult& r) { print_result(r, o->verbose); });
        int passed = 0, failed = 0, skipped = 0;
        for (const auto& r : results) {
            if (r.skipped)
                ++skipped;
            else if (r.passed)
                ++passed;
            else
                ++failed;
        }
        std::printf("selftest (seed %llu): %d passed, %d failed, %d skipped\n",
                    static_cast<unsigned long long>(o->run.seed), passed, failed, skipped);
        if (failed) {
            std::printf("failed:\n");
            for (const auto& r : results)
                if (!r.passed) std::printf("  %s (%.3g > %.1e)\n", r.name.c_str(), r.rel_error, r.tolerance);
        }
        if (!o->json.empty()) {
            write_json(o->json, o->run, results, passed, failed, skipped);
            std::printf("wrote %s\n", o->json.c_str());
        }
        return failed ? 1 : 0;
    };
}

}  // namespace tandem::cli
