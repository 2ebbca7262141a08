// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Small file helpers: whole-file reads with user-facing errors, and JSON parsing that names the file and
// line of a syntax error. (Memory-mapping and atomic writes live in io/.)
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace tandem {

// Reads a whole file. Throws Error{Io} naming the path when it is missing, a directory, or unreadable.
// max_bytes guards against being handed something absurd (e.g. a 50 GB file where a config was expected).
std::string read_file(const std::filesystem::path& path, size_t max_bytes = size_t(1) << 32);

// Parses JSON text; on a syntax error throws Error{InvalidInput} "PATH:LINE:COL: invalid JSON: ...".
nlohmann::json parse_json(const std::string& text, const std::filesystem::path& path_for_errors);

// read_file + parse_json.
nlohmann::json read_json_file(const std::filesystem::path& path, size_t max_bytes = size_t(1) << 32);

}  // namespace tandem
