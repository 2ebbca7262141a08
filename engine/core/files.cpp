// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Whole-file reads and JSON parsing with errors that name the file (see files.h).
#include "core/files.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/utf8.h"
#include "tandem/error.h"

namespace tandem {

std::string read_file(const std::filesystem::path& path, size_t max_bytes) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status))
        throw_io(path.string() + ": file not found");
    if (std::filesystem::is_directory(status))
        throw_io(path.string() + ": is a directory, expected a file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw_io(path.string() + ": cannot open: " + std::strerror(errno));
    in.seekg(0, std::ios::end);
    const auto size = static_cast<size_t>(in.tellg());
    if (size > max_bytes)
        throw_invalid(path.string() + ": file is " + std::to_string(size) + " bytes, more than the " +
                      std::to_string(max_bytes) + " expected for this kind of file");
    in.seekg(0);
    std::string data(size, '\0');
    if (size && !in.read(data.data(), static_cast<std::streamsize>(size)))
        throw_io(path.string() + ": read failed");
    return data;
}

nlohmann::json parse_json(const std::string& text, const std::filesystem::path& path_for_errors) {
    // nlohmann's parser stops at a NUL byte and would accept "{}\0junk"; a NUL never belongs in JSON text.
    if (const auto nul = text.find('\0'); nul != std::string::npos) {
        size_t line = 0, col = 0;
        utf8::line_col(text, nul, line, col);
        throw_invalid(path_for_errors.string() + ":" + std::to_string(line) + ":" + std::to_string(col) +
                      ": invalid JSON: a NUL byte (is this a binary file?)");
    }
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        size_t line = 0, col = 0;
        utf8::line_col(text, e.byte > 0 ? e.byte - 1 : 0, line, col);
        std::string what = e.what();
        if (auto p = what.find("parse error"); p != std::string::npos) what = what.substr(p);
        throw_invalid(path_for_errors.string() + ":" + std::to_string(line) + ":" + std::to_string(col) +
                      ": invalid JSON: " + what);
    } catch (const nlohmann::json::out_of_range& e) {
        // A number beyond double's range (1e309) is out_of_range.406 in nlohmann, not a parse_error.
        std::string what = e.what();
        if (auto p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
        throw_invalid(path_for_errors.string() + ": invalid JSON: " + what + " (beyond the range of a double)");
    }
}

nlohmann::json read_json_file(const std::filesystem::path& path, size_t max_bytes) {
    return parse_json(read_file(path, max_bytes), path);
}

}  // namespace tandem
