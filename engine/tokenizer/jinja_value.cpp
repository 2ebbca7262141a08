// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Python semantics of jinja::Value: truthiness, str()/repr(), ==/<, iteration, json.dumps, and the str
// methods chat templates use, all in code points like Python. Case mapping uses utf8proc's simple mappings;
// the ~100 characters whose Python mapping is not one-to-one (ß -> SS, final sigma, ligatures) are refused as
// unsupported instead of being mapped differently from Python.
#include "tokenizer/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include <utf8proc.h>

#include "core/utf8.h"

namespace tandem::jinja {

void value_error(std::string message) { throw ValueError{ErrorCategory::InvalidInput, std::move(message)}; }
void value_unsupported(std::string message) { throw ValueError{ErrorCategory::Unsupported, std::move(message)}; }

// ---------------------------------------------------------------------------------------------------------------
// Value construction

Value Value::undefined(std::string hint) {
    Value v;
    if (!hint.empty()) v.str_ = std::make_shared<const std::string>(std::move(hint));
    return v;
}
Value Value::none() {
    Value v;
    v.kind_ = Kind::None;
    return v;
}
Value Value::boolean(bool b) {
    Value v;
    v.kind_ = Kind::Bool;
    v.int_ = b ? 1 : 0;
    return v;
}
Value Value::integer(int64_t i) {
    Value v;
    v.kind_ = Kind::Int;
    v.int_ = i;
    return v;
}
Value Value::floating(double f) {
    Value v;
    v.kind_ = Kind::Float;
    v.float_ = f;
    return v;
}
Value Value::string(std::string s, bool markup) {
    Value v;
    v.kind_ = Kind::String;
    v.markup_ = markup;
    v.str_ = std::make_shared<const std::string>(std::move(s));
    return v;
}
Value Value::list(List items, Flavor flavor) {
    Value v;
    v.kind_ = Kind::List;
    v.flavor_ = flavor;
    v.list_ = std::make_shared<const List>(std::move(items));
    return v;
}
Value Value::dict(Dict d) {
    Value v;
    v.kind_ = Kind::Dict;
    v.dict_ = std::make_shared<const Dict>(std::move(d));
    return v;
}
Value Value::object(std::shared_ptr<Object> obj, ObjectKind kind) {
    Value v;
    v.kind_ = Kind::Object;
    v.object_kind_ = kind;
    v.obj_ = std::move(obj);
    return v;
}

const Value* Dict::find(const Value& key) const {
    for (const auto& [k, v] : items)
        if (equals(k, key)) return &v;
    return nullptr;
}
const Value* Dict::find(std::string_view key) const {
    for (const auto& [k, v] : items)
        if (k.is_string() && k.as_string() == key) return &v;
    return nullptr;
}

Value Namespace::get(std::string_view name) const {
    for (const auto& [k, v] : attrs)
        if (k == name) return v;
    return Value::undefined("'Namespace object' has no attribute '" + std::string(name) + "'");
}
void Namespace::set(const std::string& name, Value v) {
    for (auto& [k, old] : attrs)
        if (k == name) {
            old = std::move(v);
            return;
        }
    attrs.emplace_back(name, std::move(v));
}

// ---------------------------------------------------------------------------------------------------------------
// Strings in code points

namespace str {

std::vector<char32_t> decode(std::string_view s) {
    std::vector<char32_t> out;
    out.reserve(s.size());
    size_t i = 0;
    while (i < s.size()) {
        const int32_t cp = utf8::decode(s, i);
        if (cp < 0) value_error("invalid UTF-8 in a string");
        out.push_back(static_cast<char32_t>(cp));
    }
    return out;
}

std::string encode(const std::vector<char32_t>& cps) {
    std::string out;
    out.reserve(cps.size());
    for (char32_t c : cps) utf8::append(out, c);
    return out;
}

size_t length(std::string_view s) {
    size_t n = 0;
    for (unsigned char c : s)
        if ((c & 0xC0) != 0x80) ++n;
    return n;
}

bool is_ascii(std::string_view s) {
    for (unsigned char c : s)
        if (c >= 0x80) return false;
    return true;
}

bool is_space(char32_t c) {
    if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F)) return true;
    if (c < 0x80) return false;
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
           c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
    const auto cps = decode(s);
    std::vector<char32_t> set;
    if (chars) set = decode(*chars);
    auto strip_it = [&](char32_t c) {
        return chars ? std::find(set.begin(), set.end(), c) != set.end() : is_space(c);
    };
    size_t b = 0, e = cps.size();
    if (left)
        while (b < e && strip_it(cps[b])) ++b;
    if (right)
        while (e > b && strip_it(cps[e - 1])) --e;
    return encode(std::vector<char32_t>(cps.begin() + static_cast<ptrdiff_t>(b),
                                        cps.begin() + static_cast<ptrdiff_t>(e)));
}

// Characters whose Python case mapping is not a one-to-one simple mapping (generated with Python 3.11's
// unicodedata: len(c.upper()/lower()/title()) != 1, plus U+03A3 for the final-sigma rule).
static const char32_t kSpecialCasing[] = {
    0xdf, 0x130, 0x149, 0x1f0, 0x390, 0x3a3, 0x3b0, 0x587, 0x1e96, 0x1e97, 0x1e98, 0x1e99, 0x1e9a, 0x1f50,
    0x1f52, 0x1f54, 0x1f56, 0x1f80, 0x1f81, 0x1f82, 0x1f83, 0x1f84, 0x1f85, 0x1f86, 0x1f87, 0x1f88, 0x1f89,
    0x1f8a, 0x1f8b, 0x1f8c, 0x1f8d, 0x1f8e, 0x1f8f, 0x1f90, 0x1f91, 0x1f92, 0x1f93, 0x1f94, 0x1f95, 0x1f96,
    0x1f97, 0x1f98, 0x1f99, 0x1f9a, 0x1f9b, 0x1f9c, 0x1f9d, 0x1f9e, 0x1f9f, 0x1fa0, 0x1fa1, 0x1fa2, 0x1fa3,
    0x1fa4, 0x1fa5, 0x1fa6, 0x1fa7, 0x1fa8, 0x1fa9, 0x1faa, 0x1fab, 0x1fac, 0x1fad, 0x1fae, 0x1faf, 0x1fb2,
    0x1fb3, 0x1fb4, 0x1fb6, 0x1fb7, 0x1fbc, 0x1fc2, 0x1fc3, 0x1fc4, 0x1fc6, 0x1fc7, 0x1fcc, 0x1fd2, 0x1fd3,
    0x1fd6, 0x1fd7, 0x1fe2, 0x1fe3, 0x1fe4, 0x1fe6, 0x1fe7, 0x1ff2, 0x1ff3, 0x1ff4, 0x1ff6, 0x1ff7, 0x1ffc,
    0xfb00, 0xfb01, 0xfb02, 0xfb03, 0xfb04, 0xfb05, 0xfb06, 0xfb13, 0xfb14, 0xfb15, 0xfb16, 0xfb17};

enum class Case { Upper, Lower, Title };

static char32_t map_case(char32_t c, Case how) {
    if (c < 0x80) {
        if (how == Case::Lower) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
        return (c >= 'a' && c <= 'z') ? c - 32 : c;
    }
    if (std::binary_search(std::begin(kSpecialCasing), std::end(kSpecialCasing), c))
        value_unsupported("case mapping of U+" + [&] {
            char buf[16];
            std::snprintf(buf, sizeof buf, "%04X", static_cast<unsigned>(c));
            return std::string(buf);
        }() + " (Python maps it to several characters)");
    const auto cp = static_cast<utf8proc_int32_t>(c);
    switch (how) {
    case Case::Upper: return static_cast<char32_t>(utf8proc_toupper(cp));
    case Case::Lower: return static_cast<char32_t>(utf8proc_tolower(cp));
    case Case::Title: return static_cast<char32_t>(utf8proc_totitle(cp));
    }
    return c;
}

static bool is_cased(char32_t c) {
    if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
    return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

static std::string map_all(std::string_view s, Case how) {
    if (is_ascii(s)) {
        std::string out(s);
        for (auto& ch : out) ch = static_cast<char>(map_case(static_cast<unsigned char>(ch), how));
        return out;
    }
    auto cps = decode(s);
    for (auto& c : cps) c = map_case(c, how);
    return encode(cps);
}

std::string upper(std::string_view s) { return map_all(s, Case::Upper); }
std::string lower(std::string_view s) { return map_all(s, Case::Lower); }

std::string capitalize(std::string_view s) {
    auto cps = decode(s);
    for (size_t i = 0; i < cps.size(); ++i) cps[i] = map_case(cps[i], i == 0 ? Case::Title : Case::Lower);
    return encode(cps);
}

std::string title(std::string_view s) {
    auto cps = decode(s);
    bool prev_cased = false;
    for (auto& c : cps) {
        const bool cased = is_cased(c);
        if (cased) c = map_case(c, prev_cased ? Case::Lower : Case::Title);
        prev_cased = cased;
    }
    return encode(cps);
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
    std::vector<std::string> out;
    if (sep) {
        if (sep->empty()) value_error("empty separator");
        size_t start = 0;
        while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
            const size_t at = s.find(*sep, start);
            if (at == std::string_view::npos) break;
            out.emplace_back(s.substr(start, at - start));
            start = at + sep->size();
        }
        out.emplace_back(s.substr(start));
        return out;
    }
    const auto cps = decode(s);
    size_t i = 0;
    while (true) {
        while (i < cps.size() && is_space(cps[i])) ++i;
        if (i == cps.size()) break;
        if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
            // Python keeps the remainder as is (trailing whitespace included).
            out.push_back(encode({cps.begin() + static_cast<ptrdiff_t>(i), cps.end()}));
            break;
        }
        size_t j = i;
        while (j < cps.size() && !is_space(cps[j])) ++j;
        out.push_back(encode({cps.begin() + static_cast<ptrdiff_t>(i), cps.begin() + static_cast<ptrdiff_t>(j)}));
        i = j;
    }
    return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
    if (maxsplit < 0) return split(s, sep, maxsplit);
    std::vector<std::string> out;
    if (sep) {
        if (sep->empty()) value_error("empty separator");
        size_t end = s.size();
        while (static_cast<int64_t>(out.size()) < maxsplit) {
            if (end < sep->size()) break;
            const size_t at = s.rfind(*sep, end - sep->size());
            if (at == std::string_view::npos) break;
            out.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
            end = at;
        }
        out.emplace_back(s.substr(0, end));
        std::reverse(out.begin(), out.end());
        return out;
    }
    const auto cps = decode(s);
    size_t e = cps.size();
    while (true) {
        while (e > 0 && is_space(cps[e - 1])) --e;
        if (e == 0) break;
        if (static_cast<int64_t>(out.size()) == maxsplit) {
            out.push_back(encode({cps.begin(), cps.begin() + static_cast<ptrdiff_t>(e)}));
            break;
        }
        size_t b = e;
        while (b > 0 && !is_space(cps[b - 1])) --b;
        out.push_back(encode({cps.begin() + static_cast<ptrdiff_t>(b), cps.begin() + static_cast<ptrdiff_t>(e)}));
        e = b;
    }
    std::reverse(out.begin(), out.end());
    return out;
}

static bool is_line_break(char32_t c) {
    return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
           c == 0x85 || c == 0x2028 || c == 0x2029;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
    const auto cps = decode(s);
    std::vector<std::string> out;
    size_t i = 0, start = 0;
    while (i < cps.size()) {
        if (!is_line_break(cps[i])) {
            ++i;
            continue;
        }
        size_t eol = i + 1;
        if (cps[i] == '\r' && eol < cps.size() && cps[eol] == '\n') ++eol;
        const size_t e = keepends ? eol : i;
        out.push_back(encode({cps.begin() + static_cast<ptrdiff_t>(start), cps.begin() + static_cast<ptrdiff_t>(e)}));
        i = start = eol;
    }
    if (start < cps.size())
        out.push_back(encode({cps.begin() + static_cast<ptrdiff_t>(start), cps.end()}));
    return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view with, int64_t count) {
    std::string out;
    if (old.empty()) {
        // Python inserts `with` before every code point and at the end.
        const auto cps = decode(s);
        int64_t n = 0;
        for (size_t i = 0; i <= cps.size(); ++i) {
            if (count < 0 || n < count) {
                out += with;
                ++n;
            }
            if (i < cps.size()) utf8::append(out, cps[i]);
        }
        return out;
    }
    size_t start = 0;
    int64_t n = 0;
    while (count < 0 || n < count) {
        const size_t at = s.find(old, start);
        if (at == std::string_view::npos) break;
        out.append(s.substr(start, at - start));
        out.append(with);
        start = at + old.size();
        ++n;
    }
    out.append(s.substr(start));
    return out;
}

int64_t find(std::string_view s, std::string_view sub, bool reverse) {
    const size_t at = reverse ? s.rfind(sub) : s.find(sub);
    if (at == std::string_view::npos) return -1;
    return static_cast<int64_t>(length(s.substr(0, at)));
}

int64_t count(std::string_view s, std::string_view sub) {
    if (sub.empty()) return static_cast<int64_t>(length(s)) + 1;
    int64_t n = 0;
    size_t start = 0;
    while (true) {
        const size_t at = s.find(sub, start);
        if (at == std::string_view::npos) break;
        ++n;
        start = at + sub.size();
    }
    return n;
}

std::string escape_html(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
        }
    }
    return out;
}

}  // namespace str

// ---------------------------------------------------------------------------------------------------------------
// Python semantics

bool truthy(const Value& v) {
    switch (v.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return false;
    case Value::Kind::Bool:
    case Value::Kind::Int: return v.as_int() != 0;
    case Value::Kind::Float: return v.as_double() != 0.0;
    case Value::Kind::String: return !v.as_string().empty();
    case Value::Kind::List: return !v.as_list().empty();
    case Value::Kind::Dict: return !v.as_dict().items.empty();
    case Value::Kind::Object: return true;  // namespaces, functions and generators are always true in Python
    }
    return false;
}

std::string type_name(const Value& v) {
    switch (v.kind()) {
    case Value::Kind::Undefined: return "Undefined";
    case Value::Kind::None: return "NoneType";
    case Value::Kind::Bool: return "bool";
    case Value::Kind::Int: return "int";
    case Value::Kind::Float: return "float";
    case Value::Kind::String: return "str";
    case Value::Kind::List:
        switch (v.flavor()) {
        case Value::Flavor::List: return "list";
        case Value::Flavor::Tuple: return "tuple";
        case Value::Flavor::DictItems: return "dict_items";
        case Value::Flavor::DictKeys: return "dict_keys";
        case Value::Flavor::DictValues: return "dict_values";
        case Value::Flavor::Range: return "range";
        }
        return "list";
    case Value::Kind::Dict: return "dict";
    case Value::Kind::Object:
        switch (v.object_kind()) {
        case Value::ObjectKind::Namespace: return "Namespace";
        case Value::ObjectKind::Loop: return "LoopContext";
        case Value::ObjectKind::Callable: return "function";
        case Value::ObjectKind::Iterator: return "generator";
        }
    }
    return "object";
}

std::string format_float(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
    if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
    char buf[64];
    const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
    std::string sci(buf, res.ptr);
    std::string out;
    if (sci[0] == '-') {
        out = "-";
        sci.erase(0, 1);
    }
    const size_t epos = sci.find('e');
    std::string digits = sci.substr(0, epos);
    digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
    const int exp = std::stoi(sci.substr(epos + 1));
    const int n = static_cast<int>(digits.size());
    if (exp >= -4 && exp < 16) {  // Python repr: fixed notation when -4 <= exp < 16
        if (exp >= 0) {
            if (n <= exp + 1) {
                out += digits + std::string(static_cast<size_t>(exp + 1 - n), '0') + ".0";
            } else {
                out += digits.substr(0, static_cast<size_t>(exp + 1)) + "." + digits.substr(static_cast<size_t>(exp + 1));
            }
        } else {
            out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
        }
        return out;
    }
    out += digits.substr(0, 1);
    if (n > 1) out += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return out + ebuf;
}

static void append_hex(std::string& out, const char* prefix, unsigned value, int width) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%s%0*x", prefix, width, value);
    out += buf;
}

static bool python_printable(char32_t c) {
    if (c < 0x80) return c >= 0x20 && c < 0x7F;
    switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return false;
    default: return true;
    }
}

static std::string repr_string(const std::string& s) {
    const bool has_single = s.find('\'') != std::string::npos;
    const bool has_double = s.find('"') != std::string::npos;
    const char quote = (has_single && !has_double) ? '"' : '\'';
    std::string out(1, quote);
    for (char32_t c : str::decode(s)) {
        if (c == static_cast<char32_t>(quote) || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (python_printable(c)) {
            utf8::append(out, c);
        } else if (c < 0x100) {
            append_hex(out, "\\x", c, 2);
        } else if (c < 0x10000) {
            append_hex(out, "\\u", c, 4);
        } else {
            append_hex(out, "\\U", c, 8);
        }
    }
    out += quote;
    return out;
}

std::string repr(const Value& v) {
    switch (v.kind()) {
    case Value::Kind::String: return repr_string(v.as_string());
    case Value::Kind::Undefined: return "Undefined";
    case Value::Kind::List: {
        const auto& items = v.as_list();
        std::string open = "[", close = "]";
        switch (v.flavor()) {
        case Value::Flavor::List: break;
        case Value::Flavor::Tuple:
            open = "(";
            close = items.size() == 1 ? ",)" : ")";
            break;
        case Value::Flavor::DictItems: open = "dict_items(["; close = "])"; break;
        case Value::Flavor::DictKeys: open = "dict_keys(["; close = "])"; break;
        case Value::Flavor::DictValues: open = "dict_values(["; close = "])"; break;
        case Value::Flavor::Range: value_unsupported("printing a range object");
        }
        std::string out = open;
        for (size_t i = 0; i < items.size(); ++i) {
            if (i) out += ", ";
            out += repr(items[i]);
        }
        return out + close;
    }
    case Value::Kind::Dict: {
        std::string out = "{";
        bool first = true;
        for (const auto& [k, val] : v.as_dict().items) {
            if (!first) out += ", ";
            first = false;
            out += repr(k) + ": " + repr(val);
        }
        return out + "}";
    }
    default: return to_str(v);
    }
}

std::string to_str(const Value& v) {
    switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.as_bool() ? "True" : "False";
    case Value::Kind::Int: return std::to_string(v.as_int());
    case Value::Kind::Float: return format_float(v.as_double());
    case Value::Kind::String: return v.as_string();
    case Value::Kind::List:
    case Value::Kind::Dict: return repr(v);
    case Value::Kind::Object:
        if (v.is_object(Value::ObjectKind::Namespace)) {
            Dict d;
            for (const auto& [k, val] : static_cast<const Namespace*>(v.as_object())->attrs)
                d.items.emplace_back(Value::string(k), val);
            return "<Namespace " + repr(Value::dict(std::move(d))) + ">";
        }
        value_unsupported("printing a " + type_name(v) + " object (Python prints its memory address)");
    }
    return {};
}

bool equals(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
        return a.as_int() == b.as_int();
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return true;
    case Value::Kind::String: return a.as_string() == b.as_string();
    case Value::Kind::List: {
        const auto fa = a.flavor(), fb = b.flavor();
        const bool seq_a = fa == Value::Flavor::List || fa == Value::Flavor::Tuple;
        const bool seq_b = fb == Value::Flavor::List || fb == Value::Flavor::Tuple;
        if (!seq_a || !seq_b) value_unsupported("comparing " + type_name(a) + " with " + type_name(b));
        if (fa != fb) return false;
        const auto& x = a.as_list();
        const auto& y = b.as_list();
        if (x.size() != y.size()) return false;
        for (size_t i = 0; i < x.size(); ++i)
            if (!equals(x[i], y[i])) return false;
        return true;
    }
    case Value::Kind::Dict: {
        const auto& x = a.as_dict().items;
        const auto& y = b.as_dict();
        if (x.size() != y.items.size()) return false;
        for (const auto& [k, v] : x) {
            const Value* other = y.find(k);
            if (!other || !equals(v, *other)) return false;
        }
        return true;
    }
    case Value::Kind::Object: return a.as_object() == b.as_object();
    default: return false;
    }
}

int compare(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) {
            const double x = a.as_double(), y = b.as_double();
            if (std::isnan(x) || std::isnan(y)) value_unsupported("ordering NaN");
            return x < y ? -1 : (x > y ? 1 : 0);
        }
        return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
    }
    if (a.is_string() && b.is_string()) {
        // UTF-8 byte order is code point order, which is Python's string order.
        const int c = a.as_string().compare(b.as_string());
        return c < 0 ? -1 : (c > 0 ? 1 : 0);
    }
    if (a.is_list() && b.is_list() && a.flavor() == b.flavor() &&
        (a.flavor() == Value::Flavor::List || a.flavor() == Value::Flavor::Tuple)) {
        const auto& x = a.as_list();
        const auto& y = b.as_list();
        for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
            if (equals(x[i], y[i])) continue;
            return compare(x[i], y[i]);
        }
        return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
    }
    if (a.is_undefined() || b.is_undefined()) {
        const std::string hint = (a.is_undefined() ? a : b).undefined_hint();
        value_error(hint.empty() ? "a value is undefined" : hint);
    }
    value_error("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

List iterate(const Value& v) {
    switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List: return v.as_list();
    case Value::Kind::Dict: {
        List keys;
        keys.reserve(v.as_dict().items.size());
        for (const auto& kv : v.as_dict().items) keys.push_back(kv.first);
        return keys;
    }
    case Value::Kind::String: {
        List chars;
        const std::string& s = v.as_string();
        size_t i = 0;
        while (i < s.size()) {
            const size_t n = utf8::sequence_length(static_cast<unsigned char>(s[i]));
            chars.push_back(Value::string(s.substr(i, n)));
            i += n;
        }
        return chars;
    }
    case Value::Kind::Object:
        if (v.is_object(Value::ObjectKind::Iterator)) {
            auto* it = static_cast<Iterator*>(v.as_object());
            if (it->consumed) return {};
            it->consumed = true;
            return it->items;
        }
        break;
    default: break;
    }
    value_error("'" + type_name(v) + "' object is not iterable");
}

int64_t length(const Value& v) {
    switch (v.kind()) {
    case Value::Kind::Undefined: return 0;
    case Value::Kind::String: return static_cast<int64_t>(str::length(v.as_string()));
    case Value::Kind::List: return static_cast<int64_t>(v.as_list().size());
    case Value::Kind::Dict: return static_cast<int64_t>(v.as_dict().items.size());
    default: break;
    }
    value_error("object of type '" + type_name(v) + "' has no len()");
}

// ---------------------------------------------------------------------------------------------------------------
// json.dumps

static void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
    out += '"';
    for (char32_t c : str::decode(s)) {
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
            if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
                if (c >= 0x10000) {
                    const unsigned v = static_cast<unsigned>(c) - 0x10000;
                    append_hex(out, "\\u", 0xD800 + (v >> 10), 4);
                    append_hex(out, "\\u", 0xDC00 + (v & 0x3FF), 4);
                } else {
                    append_hex(out, "\\u", c, 4);
                }
            } else {
                utf8::append(out, c);
            }
        }
    }
    out += '"';
}

static std::string json_float(double d) {
    if (std::isnan(d)) return "NaN";
    if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
    return format_float(d);
}

static std::string json_key(const Value& k) {
    switch (k.kind()) {
    case Value::Kind::String: return k.as_string();
    case Value::Kind::Bool: return k.as_bool() ? "true" : "false";
    case Value::Kind::Int: return std::to_string(k.as_int());
    case Value::Kind::Float: return json_float(k.as_double());
    case Value::Kind::None: return "null";
    default: value_error("keys must be str, int, float, bool or None, not " + type_name(k));
    }
}

static void json_value(std::string& out, const Value& v, const JsonOptions& o, int level, int depth) {
    if (depth > 512) value_error("tojson: value nested too deeply");
    auto newline = [&](int lvl) {
        if (!o.indent) return;
        out += '\n';
        for (int i = 0; i < lvl; ++i) out += *o.indent;
    };
    switch (v.kind()) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.as_int()); return;
    case Value::Kind::Float: out += json_float(v.as_double()); return;
    case Value::Kind::String: json_string(out, v.as_string(), o.ensure_ascii); return;
    case Value::Kind::List:
        if (v.flavor() == Value::Flavor::List || v.flavor() == Value::Flavor::Tuple) {
            const auto& items = v.as_list();
            if (items.empty()) {
                out += "[]";
                return;
            }
            out += '[';
            for (size_t i = 0; i < items.size(); ++i) {
                if (i) out += o.item_separator;
                newline(level + 1);
                json_value(out, items[i], o, level + 1, depth + 1);
            }
            newline(level);
            out += ']';
            return;
        }
        break;
    case Value::Kind::Dict: {
        const auto& items = v.as_dict().items;
        if (items.empty()) {
            out += "{}";
            return;
        }
        std::vector<std::pair<std::string, const Value*>> entries;
        entries.reserve(items.size());
        for (const auto& [k, val] : items) entries.emplace_back(json_key(k), &val);
        if (o.sort_keys) {
            for (const auto& [k, val] : items)
                if (!k.is_string()) value_unsupported("tojson(sort_keys=true) with non-string keys");
            std::stable_sort(entries.begin(), entries.end(),
                             [](const auto& a, const auto& b) { return a.first < b.first; });
        }
        out += '{';
        for (size_t i = 0; i < entries.size(); ++i) {
            if (i) out += o.item_separator;
            newline(level + 1);
            json_string(out, entries[i].first, o.ensure_ascii);
            out += o.key_separator;
            json_value(out, *entries[i].second, o, level + 1, depth + 1);
        }
        newline(level);
        out += '}';
        return;
    }
    default: break;
    }
    value_error("Object of type " + type_name(v) + " is not JSON serializable");
}

std::string to_json(const Value& v, const JsonOptions& options) {
    std::string out;
    json_value(out, v, options, 0, 0);
    return out;
}

template <class Json>
static Value from_json_impl(const Json& j, int depth) {
    if (depth > 512) value_error("JSON value nested too deeply");
    switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::boolean(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::integer(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
        const auto u = j.template get<uint64_t>();
        if (u > static_cast<uint64_t>(INT64_MAX)) value_unsupported("integer " + std::to_string(u) + " is too large");
        return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float: return Value::floating(j.template get<double>());
    case nlohmann::json::value_t::string: {
        const auto& s = j.template get_ref<const std::string&>();
        if (!utf8::is_valid(s)) value_error("a string in the input is not valid UTF-8");
        return Value::string(s);
    }
    case nlohmann::json::value_t::array: {
        List items;
        items.reserve(j.size());
        for (const auto& e : j) items.push_back(from_json_impl(e, depth + 1));
        return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
        Dict d;
        d.items.reserve(j.size());
        for (auto it = j.begin(); it != j.end(); ++it) {
            if (!utf8::is_valid(it.key())) value_error("a key in the input is not valid UTF-8");
            d.items.emplace_back(Value::string(it.key()), from_json_impl(it.value(), depth + 1));
        }
        return Value::dict(std::move(d));
    }
    default: value_unsupported("binary JSON values");
    }
}

Value from_json(const nlohmann::json& j) { return from_json_impl(j, 0); }
Value from_json(const nlohmann::ordered_json& j) { return from_json_impl(j, 0); }

}  // namespace tandem::jinja
