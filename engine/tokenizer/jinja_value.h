// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::jinja::Value — the dynamic value of the Jinja evaluator, modelled on the Python objects jinja2
// works with, because chat templates are rendered by Python's jinja2 in transformers and we must print
// exactly what Python prints: str() of lists/dicts is Python repr (single quotes, True/None), floats print as
// Python's shortest repr, strings are indexed and measured in code points.
// Decisions: values are immutable and share their payload (shared_ptr<const ...>), which matches
// transformers' ImmutableSandboxedEnvironment (lists and dicts cannot be mutated by a template); the only
// mutable objects are namespaces and iterators, which have reference semantics as in Python.
// Helpers here throw ValueError (no source position); the evaluator turns it into a tandem::Error that names
// the template line.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/error.h"

namespace tandem::jinja {

// An error raised while computing with values; carries no position (the evaluator adds it).
struct ValueError {
    ErrorCategory category;
    std::string message;
};
[[noreturn]] void value_error(std::string message);        // what Python/jinja2 would raise too
[[noreturn]] void value_unsupported(std::string message);  // what jinja2 would do but we do not implement

class Value;
using List = std::vector<Value>;

// Python dicts keep insertion order; lookups are linear (template dicts are small).
struct Dict {
    std::vector<std::pair<Value, Value>> items;
    const Value* find(const Value& key) const;
    const Value* find(std::string_view key) const;
};

// Mutable, reference-semantics objects: namespace(), loop, macros, builtin functions, bound methods, iterators.
struct Object {
    virtual ~Object() = default;
};

class Value {
public:
    enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Object };
    // What a List value is in Python terms: it decides repr, indexing and whether it can be printed.
    enum class Flavor : uint8_t { List, Tuple, DictItems, DictKeys, DictValues, Range };
    // What an Object is.
    enum class ObjectKind : uint8_t { Namespace, Loop, Callable, Iterator };

    Value() = default;  // Undefined
    static Value undefined(std::string hint = {});
    static Value none();
    static Value boolean(bool b);
    static Value integer(int64_t i);
    static Value floating(double f);
    static Value string(std::string s, bool markup = false);
    static Value list(List items, Flavor flavor = Flavor::List);
    static Value dict(Dict d);
    static Value object(std::shared_ptr<Object> obj, ObjectKind kind);

    Kind kind() const { return kind_; }
    bool is_undefined() const { return kind_ == Kind::Undefined; }
    bool is_none() const { return kind_ == Kind::None; }
    bool is_bool() const { return kind_ == Kind::Bool; }
    bool is_int() const { return kind_ == Kind::Int; }  // not bool
    bool is_float() const { return kind_ == Kind::Float; }
    bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
    bool is_string() const { return kind_ == Kind::String; }
    bool is_list() const { return kind_ == Kind::List; }
    bool is_dict() const { return kind_ == Kind::Dict; }
    bool is_object(ObjectKind k) const { return kind_ == Kind::Object && object_kind_ == k; }

    bool as_bool() const { return int_ != 0; }
    int64_t as_int() const { return int_; }       // Bool or Int
    double as_double() const { return kind_ == Kind::Float ? float_ : static_cast<double>(int_); }
    const std::string& as_string() const { return *str_; }  // String only
    bool is_markup() const { return kind_ == Kind::String && markup_; }
    const List& as_list() const { return *list_; }
    Flavor flavor() const { return flavor_; }
    const Dict& as_dict() const { return *dict_; }
    Object* as_object() const { return obj_.get(); }
    const std::shared_ptr<Object>& object_ptr() const { return obj_; }
    ObjectKind object_kind() const { return object_kind_; }
    // Undefined: the error message jinja2 would give on use ("'x' is undefined"), possibly empty.
    std::string undefined_hint() const { return str_ ? *str_ : std::string(); }

private:
    Kind kind_ = Kind::Undefined;
    Flavor flavor_ = Flavor::List;
    ObjectKind object_kind_ = ObjectKind::Namespace;
    bool markup_ = false;
    int64_t int_ = 0;
    double float_ = 0;
    std::shared_ptr<const std::string> str_;
    std::shared_ptr<const List> list_;
    std::shared_ptr<const Dict> dict_;
    std::shared_ptr<Object> obj_;
};

// namespace(a=1): attributes in insertion order.
struct Namespace : Object {
    std::vector<std::pair<std::string, Value>> attrs;
    Value get(std::string_view name) const;
    void set(const std::string& name, Value v);
};

// A one-shot iterator (what jinja2's map/select/reverse/items filters return: Python generators). A second
// iteration sees nothing, as in Python.
struct Iterator : Object {
    List items;
    bool consumed = false;
};

// Python semantics.
bool truthy(const Value& v);
std::string type_name(const Value& v);   // Python type name for error messages
std::string to_str(const Value& v);      // str(v); Undefined -> ""
std::string repr(const Value& v);        // repr(v)
bool equals(const Value& a, const Value& b);
// -1, 0, 1 for <, ==, > of orderable values; ValueError for unorderable ones (as Python's TypeError).
int compare(const Value& a, const Value& b);
// Items of an iterable in Python iteration order (dict -> keys, string -> characters, Undefined -> none).
// Consumes iterators.
List iterate(const Value& v);
// len(v), or ValueError.
int64_t length(const Value& v);

// Python float repr (shortest round-trip, exponent outside [1e-4, 1e16)).
std::string format_float(double d);

// json.dumps(x, ensure_ascii, indent, separators, sort_keys) — the tojson filter transformers installs.
struct JsonOptions {
    bool ensure_ascii = false;
    std::optional<std::string> indent;  // nullopt: single line
    std::string item_separator = ", ";
    std::string key_separator = ": ";
    bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonOptions& options);

// JSON -> Value (objects keep their key order when given an ordered_json).
Value from_json(const nlohmann::json& j);
Value from_json(const nlohmann::ordered_json& j);

// String helpers in Python (code point) terms. Strings are valid UTF-8 throughout.
namespace str {
std::vector<char32_t> decode(std::string_view s);
std::string encode(const std::vector<char32_t>& cps);
size_t length(std::string_view s);  // code points
bool is_space(char32_t c);          // str.isspace
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string capitalize(std::string_view s);
std::string title(std::string_view s);  // str.title()
bool is_ascii(std::string_view s);
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string replace(std::string_view s, std::string_view old, std::string_view with, int64_t count);
int64_t find(std::string_view s, std::string_view sub, bool reverse);  // code point index or -1
int64_t count(std::string_view s, std::string_view sub);
std::string escape_html(std::string_view s);  // markupsafe.escape
}  // namespace str

}  // namespace tandem::jinja
