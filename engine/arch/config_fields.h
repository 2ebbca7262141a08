// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// ConfigFields: typed access to the fields of a JSON object (config.json), with errors that name the source
// file and the field (Error{InvalidInput}). Shared by the config parser (io/model_config.cpp) and the family
// files (arch/*.cpp), which read their own fields with it.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/error.h"

namespace tandem {

// Typed field access with errors naming the source and the field.
class ConfigFields {
public:
    ConfigFields(const nlohmann::json& j, const std::string& src) : j_(j), src_(src) {}

    [[noreturn]] void bad(const std::string& what) const { throw_invalid(src_ + ": " + what); }

    // Present and not null.
    bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

    int64_t integer(const char* key) const {
        if (!has(key)) bad(std::string("required field '") + key + "' is missing");
        return as_int(j_[key], key);
    }
    int64_t integer(const char* key, int64_t def) const { return has(key) ? as_int(j_[key], key) : def; }

    double number(const char* key, double def) const {
        if (!has(key)) return def;
        return as_number(j_[key], key);
    }

    bool boolean(const char* key, bool def) const {
        if (!has(key)) return def;
        if (!j_[key].is_boolean())
            bad(std::string("field '") + key + "' must be true or false, found " + describe(j_[key]));
        return j_[key].get<bool>();
    }

    std::string string(const char* key, const std::string& def) const {
        if (!has(key)) return def;
        if (!j_[key].is_string()) bad(std::string("field '") + key + "' must be a string, found " + describe(j_[key]));
        return j_[key].get<std::string>();
    }

    // int, list of ints, or null/absent.
    std::vector<int64_t> int_list(const char* key) const {
        std::vector<int64_t> out;
        if (!has(key)) return out;
        const auto& v = j_[key];
        if (v.is_array()) {
            for (const auto& x : v) out.push_back(as_int(x, key));
        } else {
            out.push_back(as_int(v, key));
        }
        for (auto id : out)
            if (id < 0) bad(std::string("field '") + key + "' has a negative token id (" + std::to_string(id) + ")");
        return out;
    }

    int64_t as_int(const nlohmann::json& v, const std::string& key) const {
        if (v.is_number_unsigned()) {
            if (v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
                bad("field '" + key + "' is too large (" + v.dump() + ")");
            return static_cast<int64_t>(v.get<uint64_t>());
        }
        if (v.is_number_integer()) return v.get<int64_t>();
        bad("field '" + key + "' must be an integer, found " + describe(v));
    }

    double as_number(const nlohmann::json& v, const std::string& key) const {
        if (!v.is_number()) bad("field '" + key + "' must be a number, found " + describe(v));
        const double d = v.get<double>();
        if (!std::isfinite(d)) bad("field '" + key + "' must be finite");
        return d;
    }

    static std::string describe(const nlohmann::json& v) {
        std::string d = v.dump();
        if (d.size() > 60) d = d.substr(0, 57) + "...";
        return std::string(v.type_name()) + " " + d;
    }

    const nlohmann::json& raw() const { return j_; }
    const std::string& src() const { return src_; }

private:
    const nlohmann::json& j_;
    const std::string& src_;
};

inline void check_range(const ConfigFields& r, const char* name, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
        r.bad(std::string(name) + " (" + std::to_string(v) + ") must be between " + std::to_string(lo) + " and " +
              std::to_string(hi));
}


}  // namespace tandem
