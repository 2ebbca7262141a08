// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// JSON access helpers for the tokenizer loader (see json_util.h).
#include "tokenizer/json_util.h"

#include "tandem/error.h"

namespace tandem::tok {

void throw_bad_field(const Source& src, std::string_view where, std::string_view what) {
    throw_invalid(src.path.string() + ": " + std::string(where) + ": " + std::string(what) +
                  " (not what Hugging Face writes; re-save the tokenizer with transformers' "
                  "AutoTokenizer.from_pretrained(...).save_pretrained(folder))");
}

void throw_unsupported_type(const Source& src, std::string_view kind, std::string_view type,
                            std::string_view supported) {
    throw_unsupported(src.path.string() + ": " + std::string(kind) + " type \"" + std::string(type) +
                      "\" is not supported by Tandem's tokenizer (supported: " + std::string(supported) + ")");
}

const Json* find(const Json& j, const char* key) {
    if (!j.is_object()) return nullptr;
    auto it = j.find(key);
    return it == j.end() ? nullptr : &*it;
}

const Json& require(const Json& j, const char* key, const Source& src, std::string_view where) {
    if (!j.is_object()) throw_bad_field(src, where, "expected a JSON object");
    auto it = j.find(key);
    if (it == j.end()) throw_bad_field(src, where, std::string("missing \"") + key + "\"");
    return *it;
}

std::string get_string(const Json& j, const char* key, const Source& src, std::string_view where) {
    const Json& v = require(j, key, src, where);
    if (!v.is_string()) throw_bad_field(src, where, std::string("\"") + key + "\" must be a string");
    return v.get<std::string>();
}

std::string get_string_or(const Json& j, const char* key, std::string fallback, const Source& src,
                          std::string_view where) {
    const Json* v = find(j, key);
    if (!v || v->is_null()) return fallback;
    if (!v->is_string()) throw_bad_field(src, where, std::string("\"") + key + "\" must be a string");
    return v->get<std::string>();
}

bool get_bool_or(const Json& j, const char* key, bool fallback, const Source& src, std::string_view where) {
    const Json* v = find(j, key);
    if (!v || v->is_null()) return fallback;
    if (!v->is_boolean()) throw_bad_field(src, where, std::string("\"") + key + "\" must be true or false");
    return v->get<bool>();
}

int64_t get_int(const Json& j, const char* key, const Source& src, std::string_view where) {
    const Json& v = require(j, key, src, where);
    if (!v.is_number_integer()) throw_bad_field(src, where, std::string("\"") + key + "\" must be an integer");
    return v.get<int64_t>();
}

std::string component_type(const Json& j, const Source& src, std::string_view where) {
    if (!j.is_object()) throw_bad_field(src, where, "expected a JSON object");
    return get_string(j, "type", src, where);
}

}  // namespace tandem::tok
