// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Shared by the fuzz targets: the error policy and scratch files for parsers that take a path.
// Policy: a parser may reject any input, but only with tandem::Error of a user-facing category
// (InvalidInput, Unsupported, Io, OutOfMemory). An Error{Internal} (a bug by definition) or any other
// exception (std::out_of_range, nlohmann::json::type_error, ...) escaping a parser is a finding: we abort so
// libFuzzer saves the input, as it does for sanitizer reports, timeouts and huge allocations.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "tandem/error.h"

namespace tandem::fuzz {

// Runs f; swallows user-facing tandem::Errors, aborts on Internal ones. Other exceptions propagate to
// libFuzzer (std::terminate -> abort -> a crash report with the exception's what()).
template <class F>
void run_parser(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        if (e.category() == ErrorCategory::Internal || e.category() == ErrorCategory::Device ||
            e.category() == ErrorCategory::Cancelled) {
            std::fprintf(stderr, "fuzz: Error{%s} for a user's input: %s\n",
                         std::string(error_category_name(e.category())).c_str(), e.what());
            std::abort();
        }
    }
}

// A per-process scratch folder (tmpfs when there is one), removed at exit.
inline const std::filesystem::path& scratch_dir() {
    static const std::filesystem::path dir = [] {
        std::error_code ec;
        std::filesystem::path base = std::filesystem::exists("/dev/shm", ec) ? std::filesystem::path("/dev/shm")
                                                                              : std::filesystem::temp_directory_path();
        auto d = base / ("tandem-fuzz-" + std::to_string(::getpid()));
        std::filesystem::create_directories(d);
        static const std::filesystem::path copy = d;
        std::atexit([] {
            std::error_code ignored;
            std::filesystem::remove_all(copy, ignored);
        });
        return d;
    }();
    return dir;
}

// Writes bytes to scratch_dir()/name (replacing it) and returns the path.
inline std::filesystem::path write_scratch(const std::string& name, const uint8_t* data, size_t size) {
    const auto path = scratch_dir() / name;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    out.close();
    if (!out) {
        std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
        std::abort();
    }
    return path;
}

inline std::string as_string(const uint8_t* data, size_t size) {
    return std::string(reinterpret_cast<const char*>(data), size);
}

}  // namespace tandem::fuzz
