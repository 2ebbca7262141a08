// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// JSON access helpers for the tokenizer loader: every malformed field becomes Error{InvalidInput} naming the
// file and the JSON location ("model.merges[12]"), and every component type we do not implement becomes
// Error{Unsupported} naming the file, the kind of component and the type string.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tandem::tok {

using Json = nlohmann::json;

// Where a component came from, for error messages.
struct Source {
    std::filesystem::path path;
};

[[noreturn]] void throw_bad_field(const Source& src, std::string_view where, std::string_view what);
[[noreturn]] void throw_unsupported_type(const Source& src, std::string_view kind, std::string_view type,
                                         std::string_view supported);

// j must be an object; returns j[key] or throws when missing (required) / returns nullptr when absent.
const Json& require(const Json& j, const char* key, const Source& src, std::string_view where);
const Json* find(const Json& j, const char* key);

std::string get_string(const Json& j, const char* key, const Source& src, std::string_view where);
std::string get_string_or(const Json& j, const char* key, std::string fallback, const Source& src,
                          std::string_view where);
bool get_bool_or(const Json& j, const char* key, bool fallback, const Source& src, std::string_view where);
int64_t get_int(const Json& j, const char* key, const Source& src, std::string_view where);

// The "type" member of a component object.
std::string component_type(const Json& j, const Source& src, std::string_view where);

}  // namespace tandem::tok
