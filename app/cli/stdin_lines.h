// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Line-by-line JSON input for the streaming subcommands (tokenize, chat): one JSON value per stdin line;
// errors name "stdin:LINE". Blank lines are skipped.
#pragma once

#include <cstddef>
#include <functional>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "tandem/error.h"

namespace tandem::cli {

// Objects keep their key order (ordered_json): a tool schema rendered with `tojson` must print as written.
inline void for_each_json_line(const std::function<void(const nlohmann::ordered_json&, size_t line)>& fn) {
    std::string text;
    size_t line = 0;
    while (std::getline(std::cin, text)) {
        ++line;
        if (!text.empty() && text.back() == '\r') text.pop_back();
        if (text.find_first_not_of(" \t") == std::string::npos) continue;
        nlohmann::ordered_json value;
        try {
            value = nlohmann::ordered_json::parse(text);
        } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for 1e309
            throw_invalid("stdin:" + std::to_string(line) + ": not valid JSON (" + e.what() +
                          "); expected one JSON value per line");
        }
        fn(value, line);
    }
}

// JSON text of a string, keeping non-ASCII characters as UTF-8 (like Python's ensure_ascii=False).
inline std::string json_string(const std::string& s) {
    return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tandem::cli
