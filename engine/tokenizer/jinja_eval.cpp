// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Jinja evaluator: walks the AST of jinja_parser.h with Python semantics from jinja_value.h. Holds the
// built-in filters, tests, global functions and the str/dict/list methods templates call.
// Decisions: scopes are a chain of shared frames (a for-loop iteration, macro call, {% with %}, {% filter %}
// and set-block each get a child frame, matching jinja2's observable scoping); attribute lookup follows
// jinja2's sandboxed getattr (Python attribute first, so `d.items` is the method, then the item), item
// lookup the reverse. Mutating methods (list.append, dict.update...) are refused as transformers' immutable
// sandbox refuses them. Errors carry the position of the innermost expression being evaluated.
#include "tokenizer/jinja.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <set>

#include <utf8proc.h>

#include "core/utf8.h"

namespace tandem::jinja {

namespace {

// ---------------------------------------------------------------------------------------------------------------
// Runtime objects

struct Scope {
    std::vector<std::pair<std::string, Value>> vars;
    std::shared_ptr<Scope> parent;

    const Value* find(std::string_view name) const {
        for (const Scope* s = this; s; s = s->parent.get())
            for (const auto& [k, v] : s->vars)
                if (k == name) return &v;
        return nullptr;
    }
    void set(const std::string& name, Value v) {
        for (auto& [k, old] : vars)
            if (k == name) {
                old = std::move(v);
                return;
            }
        vars.emplace_back(name, std::move(v));
    }
};
using ScopePtr = std::shared_ptr<Scope>;

ScopePtr child_of(const ScopePtr& parent) {
    auto s = std::make_shared<Scope>();
    s->parent = parent;
    return s;
}

struct LoopState : Object {
    std::shared_ptr<const List> items;
    size_t index = 0;
    std::optional<List> last_changed;
};

struct Function : Object {
    enum class Type { Builtin, Macro, Method };
    Type type = Type::Builtin;
    std::string name;
    Value self;                   // Method: the receiver
    const Node* macro = nullptr;  // Macro
    ScopePtr closure;             // Macro: the scope it was defined in
};

Value make_function(Function::Type type, std::string name, Value self = {}) {
    auto f = std::make_shared<Function>();
    f->type = type;
    f->name = std::move(name);
    f->self = std::move(self);
    return Value::object(f, Value::ObjectKind::Callable);
}

Value make_iterator(List items) {
    auto it = std::make_shared<Iterator>();
    it->items = std::move(items);
    return Value::object(it, Value::ObjectKind::Iterator);
}

std::string undefined_message(const Value& v) {
    const std::string h = v.undefined_hint();
    return h.empty() ? "a value is undefined" : h;
}

[[noreturn]] void undefined_error(const Value& v) { value_error(undefined_message(v)); }

// ---------------------------------------------------------------------------------------------------------------
// Arguments

using Kwargs = std::vector<std::pair<std::string, Value>>;

// Binds positional + keyword arguments to named parameters like a Python signature.
class Bound {
public:
    Bound(const std::string& what, const List& pos, const Kwargs& kw, std::vector<std::string_view> names,
          size_t required = 0)
        : vals_(names.size()), present_(names.size(), false) {
        if (pos.size() > names.size())
            value_error(what + " takes at most " + std::to_string(names.size()) + " argument(s), " +
                        std::to_string(pos.size()) + " given");
        for (size_t i = 0; i < pos.size(); ++i) {
            vals_[i] = pos[i];
            present_[i] = true;
        }
        for (const auto& [k, v] : kw) {
            auto it = std::find(names.begin(), names.end(), k);
            if (it == names.end()) value_error(what + " got an unexpected keyword argument '" + k + "'");
            const size_t i = static_cast<size_t>(it - names.begin());
            if (present_[i]) value_error(what + " got multiple values for argument '" + k + "'");
            vals_[i] = v;
            present_[i] = true;
        }
        for (size_t i = 0; i < required; ++i)
            if (!present_[i]) value_error(what + " is missing the argument '" + std::string(names[i]) + "'");
    }
    bool has(size_t i) const { return present_[i]; }
    const Value& get(size_t i) const { return vals_[i]; }
    Value get_or(size_t i, Value def) const { return present_[i] ? vals_[i] : def; }

private:
    List vals_;
    std::vector<bool> present_;
};

int64_t expect_int(const Value& v, const std::string& what) {
    if (v.is_int() || v.is_bool()) return v.as_int();
    if (v.is_undefined()) undefined_error(v);
    value_error(what + " must be an integer, not " + type_name(v));
}

const std::string& expect_str(const Value& v, const std::string& what) {
    if (v.is_string()) return v.as_string();
    if (v.is_undefined()) undefined_error(v);
    value_error(what + " must be a string, not " + type_name(v));
}

std::optional<std::string> opt_str(const Value& v, const std::string& what) {
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    return expect_str(v, what);
}

// ---------------------------------------------------------------------------------------------------------------
// Arithmetic with Python semantics (ints are 64-bit here; overflow is refused rather than wrapped).

[[noreturn]] void int_overflow() { value_unsupported("integer overflow (Python would use a big integer)"); }

int64_t floor_div(int64_t a, int64_t b) {
    if (b == -1 && a == INT64_MIN) int_overflow();
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
}

int64_t py_mod(int64_t a, int64_t b) {
    if (b == -1) return 0;
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}

double py_fmod(double a, double b) {
    double r = std::fmod(a, b);
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}

// Python's "%" formatting for the specifiers chat templates use: %s %r %d %i %f %% with flags/width/precision.
std::string percent_format(const std::string& fmt, const Value& args_value) {
    List args;
    if (args_value.is_list() && args_value.flavor() == Value::Flavor::Tuple)
        args = args_value.as_list();
    else if (args_value.is_dict())
        value_unsupported("'%' formatting with a mapping");
    else
        args.push_back(args_value);
    std::string out;
    size_t next = 0;
    for (size_t i = 0; i < fmt.size(); ++i) {
        if (fmt[i] != '%') {
            out += fmt[i];
            continue;
        }
        if (++i >= fmt.size()) value_error("incomplete format");
        if (fmt[i] == '%') {
            out += '%';
            continue;
        }
        std::string spec = "%";
        while (i < fmt.size() && std::string_view("-+ 0#").find(fmt[i]) != std::string_view::npos) spec += fmt[i++];
        while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') spec += fmt[i++];
        if (i < fmt.size() && fmt[i] == '.') {
            spec += fmt[i++];
            while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') spec += fmt[i++];
        }
        if (i >= fmt.size()) value_error("incomplete format");
        const char conv = fmt[i];
        if (next >= args.size()) value_error("not enough arguments for format string");
        const Value& a = args[next++];
        char buf[512];
        if (conv == 's' || conv == 'r') {
            if (spec.find('.') != std::string::npos || spec.size() > 1)
                value_unsupported("'%' formatting with width or precision on %s");
            out += conv == 's' ? to_str(a) : repr(a);
        } else if (conv == 'd' || conv == 'i') {
            if (!a.is_number()) value_error("%d format: a real number is required, not " + type_name(a));
            const long long v = a.is_float() ? static_cast<long long>(std::trunc(a.as_double())) : a.as_int();
            std::snprintf(buf, sizeof buf, (spec + "lld").c_str(), v);
            out += buf;
        } else if (conv == 'f' || conv == 'F' || conv == 'e' || conv == 'g') {
            if (!a.is_number()) value_error("%f format: a real number is required, not " + type_name(a));
            if (conv == 'g') value_unsupported("'%g' formatting");
            std::snprintf(buf, sizeof buf, (spec + conv).c_str(), a.as_double());
            out += buf;
        } else {
            value_unsupported(std::string("'%") + conv + "' formatting");
        }
    }
    if (next < args.size()) value_error("not all arguments converted during string formatting");
    return out;
}

// Python int(str, base) / float(str) parsing (what jinja2's int and float filters call).
std::optional<int64_t> parse_py_int(std::string s, int base) {
    s = str::strip(s, std::nullopt, true, true);
    std::string digits;
    size_t i = 0;
    bool neg = false;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    if ((base == 16 || base == 8 || base == 2) && i + 1 < s.size() && s[i] == '0') {
        const char p = static_cast<char>(s[i + 1] | 0x20);
        if ((base == 16 && p == 'x') || (base == 8 && p == 'o') || (base == 2 && p == 'b')) i += 2;
    }
    bool prev_digit = false;
    for (; i < s.size(); ++i) {
        const char c = s[i];
        if (c == '_') {
            if (!prev_digit || i + 1 >= s.size()) return std::nullopt;
            prev_digit = false;
            continue;
        }
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') d = (c | 0x20) - 'a' + 10;
        else return std::nullopt;
        if (d >= base) return std::nullopt;
        digits += c;
        prev_digit = true;
    }
    if (digits.empty() || !prev_digit) return std::nullopt;
    errno = 0;
    const long long v = std::strtoll(digits.c_str(), nullptr, base);
    if (errno == ERANGE) int_overflow();
    return neg ? -v : v;
}

std::optional<double> parse_py_float(std::string s) {
    s = str::strip(s, std::nullopt, true, true);
    std::string t;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '_') {
            if (i == 0 || i + 1 >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i - 1])) ||
                !std::isdigit(static_cast<unsigned char>(s[i + 1])))
                return std::nullopt;
            continue;
        }
        t += s[i];
    }
    if (t.empty()) return std::nullopt;
    std::string lower = str::lower(t);
    std::string body = lower;
    if (!body.empty() && (body[0] == '+' || body[0] == '-')) body = body.substr(1);
    if (body == "inf" || body == "infinity" || body == "nan") return std::strtod(lower.c_str(), nullptr);
    for (char c : body)
        if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == '+' || c == '-'))
            return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(t.c_str(), &end);
    if (end != t.c_str() + t.size()) return std::nullopt;
    return v;
}

bool is_seq_list(const Value& v) {
    return v.is_list() && (v.flavor() == Value::Flavor::List || v.flavor() == Value::Flavor::Tuple ||
                           v.flavor() == Value::Flavor::Range);
}

// ---------------------------------------------------------------------------------------------------------------
// Method names (for attribute lookup): implemented ones and the rest of Python's, so an attribute of a str
// named like a method we lack is refused instead of silently treated as undefined.

const std::set<std::string> kStrMethods = {
    "startswith", "endswith", "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "upper", "lower",
    "title", "capitalize", "replace", "find", "rfind", "index", "rindex", "count", "join", "isdigit",
    "isalpha", "isalnum", "isspace", "islower", "isupper", "removeprefix", "removesuffix", "format",
    "casefold", "center", "encode", "expandtabs", "format_map", "isascii", "isdecimal", "isidentifier",
    "isnumeric", "isprintable", "istitle", "ljust", "maketrans", "partition", "rjust", "rpartition",
    "swapcase", "translate", "zfill"};
const std::set<std::string> kDictMethods = {"get",   "items", "keys", "values", "copy",    "clear",
                                            "fromkeys", "pop", "popitem", "setdefault", "update"};
const std::set<std::string> kListMethods = {"count",  "index", "copy",   "append", "clear", "extend",
                                            "insert", "pop",   "remove", "reverse", "sort"};
const std::set<std::string> kUnsafeMethods = {"clear",  "pop",    "popitem", "setdefault", "update", "append",
                                              "extend", "insert", "remove",  "reverse",    "sort"};
const std::set<std::string> kNumberAttrs = {"real", "imag", "numerator", "denominator", "conjugate",
                                            "bit_length", "bit_count", "to_bytes", "from_bytes",
                                            "as_integer_ratio", "is_integer", "hex", "fromhex"};

const std::set<std::string> kFilters = {
    "abs",   "capitalize", "center",  "count", "d",        "default",   "dictsort", "e",       "escape",
    "first", "float",      "format",  "indent", "int",     "items",     "join",     "last",    "length",
    "list",  "lower",      "map",     "max",   "min",      "reject",    "rejectattr", "replace", "reverse",
    "round", "safe",       "select",  "selectattr", "sort", "string",   "sum",      "title",   "tojson",
    "trim",  "unique",     "upper"};
const std::set<std::string> kTests = {
    "defined", "undefined", "none",  "boolean", "true",  "false", "string", "number", "integer",
    "float",   "mapping",   "iterable", "sequence", "callable", "sameas", "eq", "equalto", "==",
    "ne",      "!=",        "lt",    "lessthan", "<",    "le",    "<=",     "gt",     "greaterthan",
    ">",       "ge",        ">=",    "in",      "odd",   "even",  "divisibleby", "lower", "upper",
    "escaped"};

// ---------------------------------------------------------------------------------------------------------------
// The evaluator

enum class Flow { Normal, Break, Continue };

class Evaluator {
public:
    Evaluator(const Program& program, const RenderLimits& limits) : program_(program), limits_(limits) {}

    // Macros point to their defining scope, which holds the macro; namespaces and loops can hold themselves
    // ({% set ns.me = ns %}). Nothing of a render outlives it (the result is a string), so the links of every
    // mutable object it created are cut here instead of using weak pointers everywhere.
    ~Evaluator() {
        for (const auto& o : created_) {
            if (auto* f = dynamic_cast<Function*>(o.get())) f->closure.reset();
            if (auto* n = dynamic_cast<Namespace*>(o.get())) n->attrs.clear();
            if (auto* l = dynamic_cast<LoopState*>(o.get())) {
                l->items.reset();
                l->last_changed.reset();
            }
        }
    }

    std::string run(const Variables& variables) {
        auto globals = std::make_shared<Scope>();
        for (const char* name : {"range", "namespace", "dict", "raise_exception", "strftime_now", "cycler",
                                 "joiner", "lipsum"})
            globals->set(name, make_function(Function::Type::Builtin, name));
        for (const auto& [k, v] : variables) globals->set(k, v);
        auto top = child_of(globals);
        std::string out;
        out_ = &out;
        exec_body(program_.body, top);
        return out;
    }

private:
    // --- errors and limits --------------------------------------------------------------------------------
    [[noreturn]] void fail_at(size_t pos, ErrorCategory cat, const std::string& message) const {
        throw Error(cat, location(program_, pos) + ": " + message);
    }

    void step(size_t pos) {
        if (++steps_ > limits_.max_steps)
            fail_at(pos, ErrorCategory::InvalidInput,
                    "the template did too much work (more than " + std::to_string(limits_.max_steps) +
                        " evaluation steps); is it looping over a huge range?");
    }

    struct DepthGuard {
        Evaluator& ev;
        DepthGuard(Evaluator& e, size_t pos) : ev(e) {
            if (++ev.depth_ > ev.limits_.max_depth) {
                --ev.depth_;
                ev.fail_at(pos, ErrorCategory::InvalidInput,
                           "the template nests or recurses too deeply (more than " +
                               std::to_string(ev.limits_.max_depth) + " levels)");
            }
        }
        ~DepthGuard() { --ev.depth_; }
    };

    void check_string_size(size_t n) const {
        if (n > limits_.max_output)
            value_error("the template built a string larger than " + std::to_string(limits_.max_output) + " bytes");
    }
    void check_list_size(size_t n) const {
        if (n > limits_.max_items)
            value_error("the template built a list longer than " + std::to_string(limits_.max_items) + " items");
    }

    void write(const std::string& s, size_t pos) {
        if (out_->size() + s.size() > limits_.max_output)
            fail_at(pos, ErrorCategory::InvalidInput,
                    "the rendered text exceeds " + std::to_string(limits_.max_output) + " bytes");
        out_->append(s);
    }

    // Renders a body into a fresh string (set blocks, filter blocks, macro calls).
    std::string capture(const Body& body, const ScopePtr& scope) {
        std::string buf;
        std::string* saved = out_;
        out_ = &buf;
        try {
            exec_body(body, scope);
        } catch (...) {
            out_ = saved;
            throw;
        }
        out_ = saved;
        return buf;
    }

    // --- statements ---------------------------------------------------------------------------------------
    Flow exec_body(const Body& body, const ScopePtr& scope) {
        for (const auto& n : body) {
            const Flow f = exec(*n, scope);
            if (f != Flow::Normal) return f;
        }
        return Flow::Normal;
    }

    Flow exec(const Node& n, const ScopePtr& scope) {
        step(n.pos);
        DepthGuard guard(*this, n.pos);
        try {
            return exec_node(n, scope);
        } catch (const ValueError& e) {
            fail_at(n.pos, e.category, e.message);
        }
    }

    Flow exec_node(const Node& n, const ScopePtr& scope) {
        switch (n.kind) {
        case NodeKind::Text: write(n.text, n.pos); return Flow::Normal;
        case NodeKind::Output: {
            const Value v = eval(*n.expr, scope);
            if (!v.is_undefined()) write(to_str(v), n.pos);
            return Flow::Normal;
        }
        case NodeKind::If:
            for (const auto& [cond, body] : n.branches)
                if (truthy(eval(*cond, scope))) return exec_body(body, scope);
            return exec_body(n.else_body, scope);
        case NodeKind::For: return exec_for(n, scope);
        case NodeKind::Set: assign(*n.target, eval(*n.expr, scope), scope); return Flow::Normal;
        case NodeKind::SetBlock: {
            Value v = Value::string(capture(n.body, child_of(scope)));
            if (n.expr) v = apply_filter_chain(*n.expr, v, scope);
            assign(*n.target, v, scope);
            return Flow::Normal;
        }
        case NodeKind::Macro: {
            auto f = std::make_shared<Function>();
            f->type = Function::Type::Macro;
            f->name = n.name;
            f->macro = &n;
            f->closure = scope;
            created_.push_back(f);
            scope->set(n.name, Value::object(f, Value::ObjectKind::Callable));
            return Flow::Normal;
        }
        case NodeKind::Break: return Flow::Break;
        case NodeKind::Continue: return Flow::Continue;
        case NodeKind::FilterBlock: {
            const Value body = Value::string(capture(n.body, child_of(scope)));
            write(to_str(apply_filter_chain(*n.expr, body, scope)), n.pos);
            return Flow::Normal;
        }
        case NodeKind::With: {
            List values;
            for (const auto& a : n.assigns) values.push_back(eval(*a.second, scope));
            auto inner = child_of(scope);
            for (size_t i = 0; i < n.assigns.size(); ++i) assign(*n.assigns[i].first, values[i], inner);
            return exec_body(n.body, inner);
        }
        case NodeKind::Generation: return exec_body(n.body, scope);
        }
        return Flow::Normal;
    }

    Flow exec_for(const Node& n, const ScopePtr& scope) {
        List items = iterate(eval(*n.expr, scope));
        if (n.cond) {
            List kept;
            for (auto& item : items) {
                step(n.pos);
                auto s = child_of(scope);
                assign(*n.target, item, s);
                if (truthy(eval(*n.cond, s))) kept.push_back(std::move(item));
            }
            items = std::move(kept);
        }
        if (items.empty()) {
            exec_body(n.else_body, child_of(scope));
            return Flow::Normal;
        }
        auto loop = std::make_shared<LoopState>();
        created_.push_back(loop);
        loop->items = std::make_shared<const List>(std::move(items));
        const Value loop_value = Value::object(loop, Value::ObjectKind::Loop);
        for (size_t i = 0; i < loop->items->size(); ++i) {
            step(n.pos);
            loop->index = i;
            auto s = child_of(scope);
            s->set("loop", loop_value);
            assign(*n.target, (*loop->items)[i], s);
            if (exec_body(n.body, s) == Flow::Break) break;
        }
        return Flow::Normal;
    }

    void assign(const Expr& target, const Value& v, const ScopePtr& scope) {
        switch (target.kind) {
        case ExprKind::Name: scope->set(target.name, v); return;
        case ExprKind::Tuple: {
            const List items = iterate(v);
            if (items.size() != target.args.size())
                value_error(items.size() > target.args.size()
                                ? "too many values to unpack (expected " + std::to_string(target.args.size()) + ")"
                                : "not enough values to unpack (expected " + std::to_string(target.args.size()) +
                                      ", got " + std::to_string(items.size()) + ")");
            for (size_t i = 0; i < items.size(); ++i) assign(*target.args[i], items[i], scope);
            return;
        }
        case ExprKind::NsRef: {
            const Value* ns = scope->find(target.name);
            if (!ns || !ns->is_object(Value::ObjectKind::Namespace))
                value_error("cannot assign attribute on non-namespace object '" + target.name + "'");
            static_cast<Namespace*>(ns->as_object())->set(target.attr, v);
            return;
        }
        default: value_error("cannot assign to this expression");
        }
    }

    // --- expressions --------------------------------------------------------------------------------------
    Value eval(const Expr& e, const ScopePtr& scope) {
        step(e.pos);
        DepthGuard guard(*this, e.pos);
        try {
            return eval_expr(e, scope);
        } catch (const ValueError& err) {
            fail_at(e.pos, err.category, err.message);
        }
    }

    Value eval_expr(const Expr& e, const ScopePtr& scope) {
        switch (e.kind) {
        case ExprKind::Const: return e.value;
        case ExprKind::Name: {
            const Value* v = scope->find(e.name);
            return v ? *v : Value::undefined("'" + e.name + "' is undefined");
        }
        case ExprKind::List:
        case ExprKind::Tuple: {
            List items;
            items.reserve(e.args.size());
            for (const auto& a : e.args) items.push_back(eval(*a, scope));
            return Value::list(std::move(items), e.kind == ExprKind::Tuple ? Value::Flavor::Tuple : Value::Flavor::List);
        }
        case ExprKind::Dict: {
            Dict d;
            for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
                Value k = eval(*e.args[i], scope);
                Value v = eval(*e.args[i + 1], scope);
                if (k.is_list() && k.flavor() != Value::Flavor::Tuple) value_error("unhashable type: 'list'");
                if (k.is_dict()) value_error("unhashable type: 'dict'");
                if (k.is_undefined()) value_unsupported("an undefined value as a dict key");
                bool replaced = false;
                for (auto& kv : d.items)
                    if (equals(kv.first, k)) {
                        kv.second = v;
                        replaced = true;
                    }
                if (!replaced) d.items.emplace_back(std::move(k), std::move(v));
            }
            return Value::dict(std::move(d));
        }
        case ExprKind::Getattr: return get_attr(eval(*e.args[0], scope), e.name);
        case ExprKind::Getitem: {
            Value obj = eval(*e.args[0], scope);
            if (e.args[1]->kind == ExprKind::Slice) {
                const Expr& s = *e.args[1];
                Value parts[3];
                for (int i = 0; i < 3; ++i)
                    if (s.args[static_cast<size_t>(i)]) parts[i] = eval(*s.args[static_cast<size_t>(i)], scope);
                    else parts[i] = Value::none();
                return slice(obj, parts[0], parts[1], parts[2]);
            }
            return get_item(obj, eval(*e.args[1], scope));
        }
        case ExprKind::Slice: value_error("slice outside of a subscript");
        case ExprKind::Call: return eval_call(e, scope);
        case ExprKind::Filter: {
            Value input = e.args[0] ? eval(*e.args[0], scope) : filter_input_;
            List pos;
            Kwargs kw;
            eval_args(e, 1, scope, pos, kw);
            return apply_filter(e.name, input, pos, kw, scope);
        }
        case ExprKind::Test: {
            Value v = eval(*e.args[0], scope);
            List pos;
            Kwargs kw;
            eval_args(e, 1, scope, pos, kw);
            return Value::boolean(apply_test(e.name, v, pos, kw));
        }
        case ExprKind::Neg:
        case ExprKind::Pos: {
            const Value v = eval(*e.args[0], scope);
            if (v.is_undefined()) undefined_error(v);
            if (v.is_float()) return Value::floating(e.kind == ExprKind::Neg ? -v.as_double() : v.as_double());
            if (v.is_int() || v.is_bool()) {
                if (e.kind == ExprKind::Pos) return Value::integer(v.as_int());
                if (v.as_int() == INT64_MIN) int_overflow();
                return Value::integer(-v.as_int());
            }
            value_error(std::string("bad operand type for unary ") + (e.kind == ExprKind::Neg ? "-" : "+") + ": '" +
                        type_name(v) + "'");
        }
        case ExprKind::Not: return Value::boolean(!truthy(eval(*e.args[0], scope)));
        case ExprKind::Binary: return binary(e.name, eval(*e.args[0], scope), eval(*e.args[1], scope));
        case ExprKind::Compare: {
            Value left = eval(*e.args[0], scope);
            for (size_t i = 0; i < e.ops.size(); ++i) {
                Value right = eval(*e.args[i + 1], scope);
                if (!compare_op(e.ops[i], left, right)) return Value::boolean(false);
                left = std::move(right);
            }
            return Value::boolean(true);
        }
        case ExprKind::And: {
            Value a = eval(*e.args[0], scope);
            return truthy(a) ? eval(*e.args[1], scope) : a;
        }
        case ExprKind::Or: {
            Value a = eval(*e.args[0], scope);
            return truthy(a) ? a : eval(*e.args[1], scope);
        }
        case ExprKind::CondExpr:
            if (truthy(eval(*e.args[0], scope))) return eval(*e.args[1], scope);
            if (e.args[2]) return eval(*e.args[2], scope);
            return Value::undefined("the inline if-expression evaluated to false and no else section was defined");
        case ExprKind::Concat: {
            std::string s;
            for (const auto& a : e.args) {
                s += to_str(eval(*a, scope));
                check_string_size(s.size());
            }
            return Value::string(std::move(s));
        }
        case ExprKind::NsRef: value_error("namespace reference outside of an assignment");
        }
        value_error("unknown expression");
    }

    void eval_args(const Expr& e, size_t first, const ScopePtr& scope, List& pos, Kwargs& kw) {
        for (size_t i = first; i < e.args.size(); ++i) pos.push_back(eval(*e.args[i], scope));
        for (const auto& [k, v] : e.kwargs) kw.emplace_back(k, eval(*v, scope));
    }

    Value apply_filter_chain(const Expr& chain, const Value& input, const ScopePtr& scope) {
        const Value saved = filter_input_;
        filter_input_ = input;
        Value out;
        try {
            out = eval(chain, scope);
        } catch (...) {
            filter_input_ = saved;
            throw;
        }
        filter_input_ = saved;
        return out;
    }

    // --- operators ----------------------------------------------------------------------------------------
    Value binary(const std::string& op, const Value& a, const Value& b) {
        if (a.is_undefined()) undefined_error(a);
        if (b.is_undefined()) undefined_error(b);
        const bool nums = a.is_number() && b.is_number();
        const bool floats = nums && (a.is_float() || b.is_float());
        if (op == "+") {
            if (nums) {
                if (floats) return Value::floating(a.as_double() + b.as_double());
                int64_t r;
                if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) int_overflow();
                return Value::integer(r);
            }
            if (a.is_string() && b.is_string()) {
                check_string_size(a.as_string().size() + b.as_string().size());
                if (a.is_markup() || b.is_markup()) {
                    // markupsafe: Markup + str escapes the plain operand.
                    const std::string l = a.is_markup() ? a.as_string() : str::escape_html(a.as_string());
                    const std::string r = b.is_markup() ? b.as_string() : str::escape_html(b.as_string());
                    return Value::string(l + r, true);
                }
                return Value::string(a.as_string() + b.as_string());
            }
            if (a.is_list() && b.is_list() && a.flavor() == b.flavor() &&
                (a.flavor() == Value::Flavor::List || a.flavor() == Value::Flavor::Tuple)) {
                check_list_size(a.as_list().size() + b.as_list().size());
                List r = a.as_list();
                r.insert(r.end(), b.as_list().begin(), b.as_list().end());
                return Value::list(std::move(r), a.flavor());
            }
        } else if (op == "-") {
            if (nums) {
                if (floats) return Value::floating(a.as_double() - b.as_double());
                int64_t r;
                if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) int_overflow();
                return Value::integer(r);
            }
        } else if (op == "*") {
            if (nums) {
                if (floats) return Value::floating(a.as_double() * b.as_double());
                int64_t r;
                if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) int_overflow();
                return Value::integer(r);
            }
            const Value* seq = nullptr;
            const Value* count = nullptr;
            if ((a.is_string() || is_seq_list(a)) && (b.is_int() || b.is_bool())) {
                seq = &a;
                count = &b;
            } else if ((b.is_string() || is_seq_list(b)) && (a.is_int() || a.is_bool())) {
                seq = &b;
                count = &a;
            }
            if (seq && !(seq->is_list() && seq->flavor() == Value::Flavor::Range)) {
                const int64_t n = std::max<int64_t>(0, count->as_int());
                if (seq->is_string()) {
                    if (seq->is_markup()) value_unsupported("repeating a markup string");
                    check_string_size(seq->as_string().size() * static_cast<size_t>(std::min<int64_t>(n, INT32_MAX)));
                    std::string r;
                    for (int64_t i = 0; i < n; ++i) r += seq->as_string();
                    return Value::string(std::move(r));
                }
                check_list_size(seq->as_list().size() * static_cast<size_t>(std::min<int64_t>(n, INT32_MAX)));
                List r;
                for (int64_t i = 0; i < n; ++i) r.insert(r.end(), seq->as_list().begin(), seq->as_list().end());
                return Value::list(std::move(r), seq->flavor());
            }
        } else if (op == "/") {
            if (nums) {
                if (b.as_double() == 0) value_error("division by zero");
                return Value::floating(a.as_double() / b.as_double());
            }
        } else if (op == "//") {
            if (nums) {
                if (b.as_double() == 0) value_error("integer division or modulo by zero");
                if (floats) return Value::floating(std::floor(a.as_double() / b.as_double()));
                return Value::integer(floor_div(a.as_int(), b.as_int()));
            }
        } else if (op == "%") {
            if (a.is_string()) {
                if (a.is_markup()) value_unsupported("'%' formatting of a markup string");
                return Value::string(percent_format(a.as_string(), b));
            }
            if (nums) {
                if (b.as_double() == 0) value_error("integer division or modulo by zero");
                if (floats) return Value::floating(py_fmod(a.as_double(), b.as_double()));
                return Value::integer(py_mod(a.as_int(), b.as_int()));
            }
        } else if (op == "**") {
            if (nums) {
                if (!floats && b.as_int() >= 0) {
                    int64_t r = 1, base = a.as_int(), ex = b.as_int();
                    while (ex > 0) {
                        if (ex & 1)
                            if (__builtin_mul_overflow(r, base, &r)) int_overflow();
                        ex >>= 1;
                        if (ex > 0 && __builtin_mul_overflow(base, base, &base)) int_overflow();
                    }
                    return Value::integer(r);
                }
                if (a.as_double() == 0 && b.as_double() < 0) value_error("0.0 cannot be raised to a negative power");
                if (a.as_double() < 0 && std::floor(b.as_double()) != b.as_double())
                    value_unsupported("a negative number raised to a fractional power (complex result)");
                return Value::floating(std::pow(a.as_double(), b.as_double()));
            }
        }
        value_error("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
    }

    bool contains(const Value& container, const Value& item) {
        switch (container.kind()) {
        case Value::Kind::Undefined: return false;
        case Value::Kind::String:
            if (!item.is_string())
                value_error("'in <string>' requires string as left operand, not " + type_name(item));
            return container.as_string().find(item.as_string()) != std::string::npos;
        case Value::Kind::List:
            if (container.flavor() == Value::Flavor::DictKeys || container.flavor() == Value::Flavor::DictItems ||
                container.flavor() == Value::Flavor::List || container.flavor() == Value::Flavor::Tuple ||
                container.flavor() == Value::Flavor::DictValues || container.flavor() == Value::Flavor::Range) {
                for (const auto& x : container.as_list())
                    if (equals(x, item)) return true;
                return false;
            }
            break;
        case Value::Kind::Dict:
            if (item.is_list() && item.flavor() != Value::Flavor::Tuple) value_error("unhashable type: 'list'");
            if (item.is_dict()) value_error("unhashable type: 'dict'");
            return container.as_dict().find(item) != nullptr;
        case Value::Kind::Object:
            if (container.is_object(Value::ObjectKind::Iterator)) value_unsupported("'in' on a generator");
            break;
        default: break;
        }
        value_error("argument of type '" + type_name(container) + "' is not iterable");
    }

    bool compare_op(const std::string& op, const Value& a, const Value& b) {
        if (op == "eq") return equals(a, b);
        if (op == "ne") return !equals(a, b);
        if (op == "in") return contains(b, a);
        if (op == "notin") return !contains(b, a);
        const int c = compare(a, b);
        if (op == "lt") return c < 0;
        if (op == "lteq") return c <= 0;
        if (op == "gt") return c > 0;
        if (op == "gteq") return c >= 0;
        value_error("unknown comparison " + op);
    }

    // --- attribute and item access ------------------------------------------------------------------------
    Value get_attr(const Value& obj, const std::string& name) {
        if (obj.is_undefined()) undefined_error(obj);
        if (!name.empty() && name[0] == '_') value_unsupported("access to the attribute '" + name + "'");
        const std::string missing = "'" + type_name(obj) + " object' has no attribute '" + name + "'";
        switch (obj.kind()) {
        case Value::Kind::Dict:
            if (kDictMethods.count(name)) return method(obj, name);
            if (const Value* v = obj.as_dict().find(std::string_view(name))) return *v;
            return Value::undefined(missing);
        case Value::Kind::String:
            if (kStrMethods.count(name)) return method(obj, name);
            return Value::undefined(missing);
        case Value::Kind::List:
            if (is_seq_list(obj) && kListMethods.count(name)) return method(obj, name);
            if (!is_seq_list(obj) && (name == "mapping" || name == "isdisjoint"))
                value_unsupported("the attribute '" + name + "' of a " + type_name(obj));
            return Value::undefined(missing);
        case Value::Kind::Object:
            switch (obj.object_kind()) {
            case Value::ObjectKind::Namespace: return static_cast<Namespace*>(obj.as_object())->get(name);
            case Value::ObjectKind::Loop: return loop_attr(obj, name);
            default: value_unsupported("attributes of a " + type_name(obj));
            }
        case Value::Kind::Int:
        case Value::Kind::Float:
        case Value::Kind::Bool:
            if (kNumberAttrs.count(name)) value_unsupported("the attribute '" + name + "' of a number");
            return Value::undefined(missing);
        default: return Value::undefined(missing);
        }
    }

    Value method(const Value& self, const std::string& name) {
        if (kUnsafeMethods.count(name))
            value_error("the template tried to modify a " + type_name(self) + " with ." + name +
                        "(), which transformers' sandbox forbids");
        return make_function(Function::Type::Method, name, self);
    }

    Value loop_attr(const Value& loop_value, const std::string& name) {
        const auto* l = static_cast<const LoopState*>(loop_value.as_object());
        const auto n = static_cast<int64_t>(l->items->size());
        const auto i = static_cast<int64_t>(l->index);
        if (name == "index") return Value::integer(i + 1);
        if (name == "index0") return Value::integer(i);
        if (name == "revindex") return Value::integer(n - i);
        if (name == "revindex0") return Value::integer(n - i - 1);
        if (name == "first") return Value::boolean(i == 0);
        if (name == "last") return Value::boolean(i == n - 1);
        if (name == "length") return Value::integer(n);
        if (name == "depth") return Value::integer(1);
        if (name == "depth0") return Value::integer(0);
        if (name == "previtem")
            return i > 0 ? (*l->items)[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item");
        if (name == "nextitem")
            return i + 1 < n ? (*l->items)[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item");
        if (name == "cycle" || name == "changed") return make_function(Function::Type::Method, name, loop_value);
        return Value::undefined("'LoopContext object' has no attribute '" + name + "'");
    }

    static bool index_of(const Value& key, int64_t size, int64_t& idx) {
        if (!(key.is_int() || key.is_bool())) return false;
        idx = key.as_int();
        if (idx < 0) idx += size;
        return idx >= 0 && idx < size;
    }

    Value get_item(const Value& obj, const Value& key) {
        if (obj.is_undefined()) undefined_error(obj);
        const std::string missing = "'" + type_name(obj) + " object' has no item " + repr_or(key);
        switch (obj.kind()) {
        case Value::Kind::List:
            if (is_seq_list(obj)) {
                int64_t idx;
                if (index_of(key, static_cast<int64_t>(obj.as_list().size()), idx))
                    return obj.as_list()[static_cast<size_t>(idx)];
                if (key.is_int() || key.is_bool()) return Value::undefined(missing);
            }
            break;
        case Value::Kind::Dict:
            if (!(key.is_list() && key.flavor() != Value::Flavor::Tuple) && !key.is_dict())
                if (const Value* v = obj.as_dict().find(key)) return *v;
            break;
        case Value::Kind::String: {
            if (key.is_int() || key.is_bool()) {
                const auto cps = str::decode(obj.as_string());
                int64_t idx;
                if (index_of(key, static_cast<int64_t>(cps.size()), idx)) {
                    std::string c;
                    utf8::append(c, cps[static_cast<size_t>(idx)]);
                    return Value::string(std::move(c));
                }
                return Value::undefined(missing);
            }
            break;
        }
        case Value::Kind::Object:
            if (obj.is_object(Value::ObjectKind::Iterator)) break;
            value_unsupported("subscripting a " + type_name(obj));
        default: break;
        }
        // jinja2 falls back to the attribute for string keys.
        if (key.is_string()) return get_attr(obj, key.as_string());
        return Value::undefined(missing);
    }

    static std::string repr_or(const Value& key) {
        try {
            return repr(key);
        } catch (const ValueError&) {
            return "?";
        }
    }

    Value slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
        if (obj.is_undefined()) undefined_error(obj);
        auto opt = [](const Value& v, bool& ok) -> std::optional<int64_t> {
            if (v.is_none()) return std::nullopt;
            if (v.is_int() || v.is_bool()) return v.as_int();
            ok = false;
            return std::nullopt;
        };
        bool ok = true;
        const auto start = opt(start_v, ok), stop = opt(stop_v, ok), stepo = opt(step_v, ok);
        if (!ok) return Value::undefined("slice indices must be integers or None");
        const int64_t step = stepo.value_or(1);
        if (step == 0) value_error("slice step cannot be zero");
        std::vector<char32_t> cps;
        int64_t len;
        if (obj.is_string()) {
            cps = str::decode(obj.as_string());
            len = static_cast<int64_t>(cps.size());
        } else if (is_seq_list(obj)) {
            len = static_cast<int64_t>(obj.as_list().size());
        } else {
            return Value::undefined("'" + type_name(obj) + "' object is not subscriptable");
        }
        auto clamp = [&](std::optional<int64_t> v, int64_t def, bool is_start) {
            if (!v) return def;
            int64_t x = *v;
            if (x < 0) x += len;
            if (step > 0) return std::clamp<int64_t>(x, 0, len);
            (void)is_start;
            return std::clamp<int64_t>(x, -1, len - 1);
        };
        const int64_t b = clamp(start, step > 0 ? 0 : len - 1, true);
        const int64_t e = clamp(stop, step > 0 ? len : -1, false);
        std::vector<int64_t> idx;
        if (step > 0)
            for (int64_t i = b; i < e; i += step) idx.push_back(i);
        else
            for (int64_t i = b; i > e; i += step) idx.push_back(i);
        if (obj.is_string()) {
            std::vector<char32_t> r;
            for (int64_t i : idx) r.push_back(cps[static_cast<size_t>(i)]);
            return Value::string(str::encode(r));
        }
        List r;
        for (int64_t i : idx) r.push_back(obj.as_list()[static_cast<size_t>(i)]);
        return Value::list(std::move(r), obj.flavor() == Value::Flavor::Range ? Value::Flavor::List : obj.flavor());
    }

    // --- calls --------------------------------------------------------------------------------------------
    Value eval_call(const Expr& e, const ScopePtr& scope) {
        const Value callee = eval(*e.args[0], scope);
        List pos;
        Kwargs kw;
        eval_args(e, 1, scope, pos, kw);
        if (callee.is_undefined()) undefined_error(callee);
        if (!callee.is_object(Value::ObjectKind::Callable)) {
            if (callee.is_object(Value::ObjectKind::Loop)) value_unsupported("recursive loop calls");
            value_error("'" + type_name(callee) + "' object is not callable");
        }
        const auto* f = static_cast<const Function*>(callee.as_object());
        switch (f->type) {
        case Function::Type::Macro: return call_macro(*f, pos, kw, e.pos);
        case Function::Type::Builtin: return call_builtin(f->name, pos, kw, e.pos);
        case Function::Type::Method: return call_method(f->self, f->name, pos, kw);
        }
        value_error("not callable");
    }

    Value call_macro(const Function& f, const List& pos, const Kwargs& kw, size_t call_pos) {
        const Node& m = *f.macro;
        DepthGuard guard(*this, call_pos);
        auto s = child_of(f.closure);
        if (pos.size() > m.params.size())
            value_unsupported("macro '" + m.name + "' called with more positional arguments than it declares");
        std::vector<bool> given(m.params.size(), false);
        for (size_t i = 0; i < pos.size(); ++i) {
            s->set(m.params[i], pos[i]);
            given[i] = true;
        }
        for (const auto& [k, v] : kw) {
            auto it = std::find(m.params.begin(), m.params.end(), k);
            if (it == m.params.end())
                value_unsupported("macro '" + m.name + "' called with the unknown keyword argument '" + k + "'");
            const size_t i = static_cast<size_t>(it - m.params.begin());
            if (given[i]) value_error("macro '" + m.name + "' got multiple values for argument '" + k + "'");
            s->set(k, v);
            given[i] = true;
        }
        for (size_t i = 0; i < m.params.size(); ++i) {
            if (given[i]) continue;
            // Defaults are evaluated at call time, in the macro's scope (they may use earlier parameters).
            s->set(m.params[i], m.defaults[i] ? eval(*m.defaults[i], s)
                                              : Value::undefined("parameter '" + m.params[i] + "' was not provided"));
        }
        s->set("varargs", Value::list({}, Value::Flavor::Tuple));
        s->set("kwargs", Value::dict({}));
        return Value::string(capture(m.body, s));
    }

    Value call_builtin(const std::string& name, const List& pos, const Kwargs& kw, size_t call_pos) {
        if (name == "range") {
            if (!kw.empty()) value_error("range() takes no keyword arguments");
            if (pos.empty() || pos.size() > 3) value_error("range expected 1 to 3 arguments");
            int64_t start = 0, stop, stp = 1;
            if (pos.size() == 1) {
                stop = expect_int(pos[0], "range()");
            } else {
                start = expect_int(pos[0], "range()");
                stop = expect_int(pos[1], "range()");
                if (pos.size() == 3) stp = expect_int(pos[2], "range()");
            }
            if (stp == 0) value_error("range() arg 3 must not be zero");
            const double count = stp > 0 ? std::ceil((static_cast<double>(stop) - start) / stp)
                                         : std::ceil((static_cast<double>(start) - stop) / -stp);
            // jinja2's sandbox refuses ranges longer than MAX_RANGE = 100000.
            if (count > 100000) value_error("range too big, maximum size for range is 100000");
            List items;
            if (stp > 0)
                for (int64_t i = start; i < stop; i += stp) items.push_back(Value::integer(i));
            else
                for (int64_t i = start; i > stop; i += stp) items.push_back(Value::integer(i));
            return Value::list(std::move(items), Value::Flavor::Range);
        }
        if (name == "namespace" || name == "dict") {
            if (pos.size() > 1) value_error(name + " expected at most 1 positional argument");
            Dict d;
            auto put = [&](const Value& k, const Value& v) {
                for (auto& kv : d.items)
                    if (equals(kv.first, k)) {
                        kv.second = v;
                        return;
                    }
                d.items.emplace_back(k, v);
            };
            if (!pos.empty()) {
                if (pos[0].is_dict()) {
                    for (const auto& [k, v] : pos[0].as_dict().items) put(k, v);
                } else {
                    for (const auto& pair : iterate(pos[0])) {
                        const List kv = iterate(pair);
                        if (kv.size() != 2) value_error(name + "(): sequence elements must have length 2");
                        put(kv[0], kv[1]);
                    }
                }
            }
            for (const auto& [k, v] : kw) put(Value::string(k), v);
            if (name == "dict") return Value::dict(std::move(d));
            auto ns = std::make_shared<Namespace>();
            created_.push_back(ns);
            for (const auto& [k, v] : d.items) {
                if (!k.is_string()) value_unsupported("namespace() with non-string keys");
                ns->set(k.as_string(), v);
            }
            return Value::object(ns, Value::ObjectKind::Namespace);
        }
        if (name == "raise_exception") {
            Bound b("raise_exception()", pos, kw, {"message"}, 1);
            throw Error(ErrorCategory::InvalidInput, location(program_, call_pos) + ": " + to_str(b.get(0)));
        }
        if (name == "strftime_now") {
            Bound b("strftime_now()", pos, kw, {"format"}, 1);
            const std::string fmt = expect_str(b.get(0), "strftime_now() format");
            const std::time_t now = std::time(nullptr);
            std::tm tm{};
            localtime_r(&now, &tm);
            char buf[512];
            const size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
            if (n == 0 && !fmt.empty()) value_unsupported("strftime_now() with this format");
            return Value::string(std::string(buf, n));
        }
        value_unsupported("the global function '" + name + "'");
    }

    // --- str / dict / list methods ------------------------------------------------------------------------
    Value call_method(const Value& self, const std::string& name, const List& pos, const Kwargs& kw) {
        const std::string what = type_name(self) + "." + name + "()";
        if (self.is_object(Value::ObjectKind::Loop)) return loop_method(self, name, pos, kw);
        if (self.is_string()) {
            if (self.is_markup() && !pos.empty()) value_unsupported("methods with arguments on markup strings");
            const std::string& s = self.as_string();
            auto ret = [&](std::string r) { return Value::string(std::move(r), self.is_markup()); };
            if (name == "startswith" || name == "endswith") {
                Bound b(what, pos, kw, {"prefix", "start", "end"}, 1);
                if (b.has(1) || b.has(2)) value_unsupported(what + " with start/end");
                List cands;
                if (b.get(0).is_list() && b.get(0).flavor() == Value::Flavor::Tuple)
                    cands = b.get(0).as_list();
                else
                    cands.push_back(b.get(0));
                for (const auto& c : cands) {
                    const std::string p = expect_str(c, what + " argument");
                    if (name == "startswith" ? s.compare(0, p.size(), p) == 0 && s.size() >= p.size()
                                             : s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0)
                        return Value::boolean(true);
                }
                return Value::boolean(false);
            }
            if (name == "strip" || name == "lstrip" || name == "rstrip") {
                Bound b(what, pos, kw, {"chars"});
                return ret(str::strip(s, opt_str(b.get_or(0, Value::none()), what), name != "rstrip", name != "lstrip"));
            }
            if (name == "split" || name == "rsplit") {
                Bound b(what, pos, kw, {"sep", "maxsplit"});
                const auto sep = opt_str(b.get_or(0, Value::none()), what);
                const int64_t maxsplit = b.has(1) ? expect_int(b.get(1), what) : -1;
                const auto parts = name == "split" ? str::split(s, sep, maxsplit) : str::rsplit(s, sep, maxsplit);
                List r;
                for (const auto& p : parts) r.push_back(Value::string(p, self.is_markup()));
                return Value::list(std::move(r));
            }
            if (name == "splitlines") {
                Bound b(what, pos, kw, {"keepends"});
                List r;
                for (const auto& p : str::splitlines(s, truthy(b.get_or(0, Value::boolean(false)))))
                    r.push_back(Value::string(p, self.is_markup()));
                return Value::list(std::move(r));
            }
            if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
                Bound b(what, pos, kw, {});
                if (name == "upper") return ret(str::upper(s));
                if (name == "lower") return ret(str::lower(s));
                if (name == "title") return ret(str::title(s));
                return ret(str::capitalize(s));
            }
            if (name == "replace") {
                Bound b(what, pos, kw, {"old", "new", "count"}, 2);
                const int64_t count = b.has(2) ? expect_int(b.get(2), what) : -1;
                std::string r = str::replace(s, expect_str(b.get(0), what), expect_str(b.get(1), what), count);
                check_string_size(r.size());
                return Value::string(std::move(r));
            }
            if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
                Bound b(what, pos, kw, {"sub", "start", "end"}, 1);
                if (b.has(1) || b.has(2)) value_unsupported(what + " with start/end");
                const std::string& sub = expect_str(b.get(0), what);
                if (name == "count") return Value::integer(str::count(s, sub));
                const int64_t at = str::find(s, sub, name[0] == 'r');
                if (at < 0 && (name == "index" || name == "rindex")) value_error("substring not found");
                return Value::integer(at);
            }
            if (name == "join") {
                Bound b(what, pos, kw, {"iterable"}, 1);
                std::string r;
                bool first = true;
                for (const auto& item : iterate(b.get(0))) {
                    if (!first) r += s;
                    first = false;
                    r += expect_str(item, what + " item");
                    check_string_size(r.size());
                }
                return Value::string(std::move(r));
            }
            if (name == "removeprefix" || name == "removesuffix") {
                Bound b(what, pos, kw, {"affix"}, 1);
                const std::string& a = expect_str(b.get(0), what);
                if (name == "removeprefix")
                    return ret(s.compare(0, a.size(), a) == 0 && s.size() >= a.size() ? s.substr(a.size()) : s);
                return ret(s.size() >= a.size() && s.compare(s.size() - a.size(), a.size(), a) == 0
                               ? s.substr(0, s.size() - a.size())
                               : s);
            }
            if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" ||
                name == "islower" || name == "isupper") {
                Bound b(what, pos, kw, {});
                return Value::boolean(str_predicate(s, name));
            }
            value_unsupported("the string method '" + name + "'");
        }
        if (self.is_dict()) {
            const Dict& d = self.as_dict();
            if (name == "get") {
                Bound b(what, pos, kw, {"key", "default"}, 1);
                if (const Value* v = d.find(b.get(0))) return *v;
                return b.get_or(1, Value::none());
            }
            if (name == "items" || name == "keys" || name == "values") {
                Bound b(what, pos, kw, {});
                List r;
                for (const auto& [k, v] : d.items) {
                    if (name == "items") r.push_back(Value::list({k, v}, Value::Flavor::Tuple));
                    else r.push_back(name == "keys" ? k : v);
                }
                return Value::list(std::move(r), name == "items" ? Value::Flavor::DictItems
                                                 : name == "keys" ? Value::Flavor::DictKeys
                                                                  : Value::Flavor::DictValues);
            }
            if (name == "copy") return self;
            value_unsupported("the dict method '" + name + "'");
        }
        if (self.is_list()) {
            if (name == "copy") return Value::list(self.as_list(), self.flavor() == Value::Flavor::Range ? Value::Flavor::List : self.flavor());
            if (name == "count") {
                Bound b(what, pos, kw, {"value"}, 1);
                int64_t n = 0;
                for (const auto& x : self.as_list()) n += equals(x, b.get(0)) ? 1 : 0;
                return Value::integer(n);
            }
            if (name == "index") {
                Bound b(what, pos, kw, {"value"}, 1);
                for (size_t i = 0; i < self.as_list().size(); ++i)
                    if (equals(self.as_list()[i], b.get(0))) return Value::integer(static_cast<int64_t>(i));
                value_error(repr_or(b.get(0)) + " is not in list");
            }
        }
        value_unsupported("the method '" + name + "' of a " + type_name(self));
    }

    static bool str_predicate(const std::string& s, const std::string& name) {
        const auto cps = str::decode(s);
        if (name == "islower" || name == "isupper") {
            bool cased = false;
            for (char32_t c : cps) {
                const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
                if (cat == UTF8PROC_CATEGORY_LT) return false;
                if (cat == UTF8PROC_CATEGORY_LU) {
                    if (name == "islower") return false;
                    cased = true;
                } else if (cat == UTF8PROC_CATEGORY_LL) {
                    if (name == "isupper") return false;
                    cased = true;
                }
            }
            return cased;
        }
        if (cps.empty()) return false;
        for (char32_t c : cps) {
            if (c >= 0x80 && name != "isspace") value_unsupported("str." + name + "() on non-ASCII text");
            const bool digit = c >= '0' && c <= '9';
            const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
            bool ok = false;
            if (name == "isdigit") ok = digit;
            else if (name == "isalpha") ok = alpha;
            else if (name == "isalnum") ok = digit || alpha;
            else if (name == "isspace") ok = str::is_space(c);
            if (!ok) return false;
        }
        return true;
    }

    Value loop_method(const Value& self, const std::string& name, const List& pos, const Kwargs& kw) {
        auto* l = static_cast<LoopState*>(self.as_object());
        if (!kw.empty()) value_error("loop." + name + "() takes no keyword arguments");
        if (name == "cycle") {
            if (pos.empty()) value_error("no items for cycling given");
            return pos[l->index % pos.size()];
        }
        // changed(*values): true the first time and whenever the values differ from the last call's.
        if (l->last_changed && l->last_changed->size() == pos.size()) {
            bool same = true;
            for (size_t i = 0; i < pos.size() && same; ++i) same = equals((*l->last_changed)[i], pos[i]);
            if (same) return Value::boolean(false);
        }
        l->last_changed = pos;
        return Value::boolean(true);
    }

    // --- filters ------------------------------------------------------------------------------------------
    // jinja2's make_attrgetter: "a.b.0" -> getitem per part (integers for digit parts).
    Value get_path(const Value& v, const Value& attribute) {
        if (attribute.is_int()) return get_item(v, attribute);
        const std::string path = expect_str(attribute, "attribute");
        Value cur = v;
        for (const auto& part : str::split(path, std::string("."), -1)) {
            const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
            cur = get_item(cur, digits ? Value::integer(std::stoll(part)) : Value::string(part));
        }
        return cur;
    }

    static Value ignore_case(const Value& v) {
        if (v.is_string()) return Value::string(str::lower(v.as_string()));
        return v;
    }

    Value apply_filter(const std::string& name, const Value& v, const List& pos, const Kwargs& kw,
                       const ScopePtr& scope) {
        const std::string what = "filter '" + name + "'";
        if (name == "default" || name == "d") {
            Bound b(what, pos, kw, {"default_value", "boolean"});
            const bool boolean = truthy(b.get_or(1, Value::boolean(false)));
            if (v.is_undefined() || (boolean && !truthy(v))) return b.get_or(0, Value::string(""));
            return v;
        }
        if (name == "length" || name == "count") {
            Bound b(what, pos, kw, {});
            return Value::integer(length(v));
        }
        if (name == "tojson") {
            Bound b(what, pos, kw, {"ensure_ascii", "indent", "separators", "sort_keys"});
            JsonOptions o;
            o.ensure_ascii = truthy(b.get_or(0, Value::boolean(false)));
            const Value indent = b.get_or(1, Value::none());
            if (indent.is_int() || indent.is_bool()) {
                o.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, indent.as_int())), ' ');
            } else if (indent.is_string()) {
                o.indent = indent.as_string();
            } else if (!indent.is_none()) {
                value_error("tojson: indent must be an integer or a string");
            }
            if (o.indent) o.item_separator = ",";
            const Value seps = b.get_or(2, Value::none());
            if (!seps.is_none()) {
                const List parts = iterate(seps);
                if (parts.size() != 2) value_error("tojson: separators must be a pair of strings");
                o.item_separator = expect_str(parts[0], "tojson separator");
                o.key_separator = expect_str(parts[1], "tojson separator");
            }
            o.sort_keys = truthy(b.get_or(3, Value::boolean(false)));
            std::string r = to_json(v, o);
            check_string_size(r.size());
            return Value::string(std::move(r));
        }
        if (name == "trim") {
            Bound b(what, pos, kw, {"chars"});
            if (v.is_undefined()) return Value::string("");
            return Value::string(str::strip(to_str(v), opt_str(b.get_or(0, Value::none()), what), true, true),
                                 v.is_markup());
        }
        if (name == "string") {
            Bound b(what, pos, kw, {});
            if (v.is_string()) return v;
            return Value::string(to_str(v));
        }
        if (name == "upper" || name == "lower" || name == "capitalize" || name == "title") {
            Bound b(what, pos, kw, {});
            const std::string s = to_str(v);
            if (name == "upper") return Value::string(str::upper(s), v.is_markup());
            if (name == "lower") return Value::string(str::lower(s), v.is_markup());
            if (name == "capitalize") return Value::string(str::capitalize(s), v.is_markup());
            return Value::string(jinja_title(s), v.is_markup());
        }
        if (name == "safe") {
            Bound b(what, pos, kw, {});
            return Value::string(to_str(v), true);
        }
        if (name == "e" || name == "escape") {
            Bound b(what, pos, kw, {});
            if (v.is_markup()) return v;
            return Value::string(str::escape_html(to_str(v)), true);
        }
        if (name == "replace") {
            Bound b(what, pos, kw, {"old", "new", "count"}, 2);
            if (v.is_markup()) value_unsupported("replace on a markup string");
            const int64_t count = b.has(2) && !b.get(2).is_none() ? expect_int(b.get(2), what) : -1;
            std::string r = str::replace(to_str(v), to_str(b.get(0)), to_str(b.get(1)), count);
            check_string_size(r.size());
            return Value::string(std::move(r));
        }
        if (name == "first") {
            Bound b(what, pos, kw, {});
            const List items = iterate(v);
            return items.empty() ? Value::undefined("no first item, sequence was empty") : items.front();
        }
        if (name == "last") {
            Bound b(what, pos, kw, {});
            if (v.is_object(Value::ObjectKind::Iterator)) value_error("'generator' object is not reversible");
            const List items = iterate(v);
            return items.empty() ? Value::undefined("no last item, sequence was empty") : items.back();
        }
        if (name == "join") {
            Bound b(what, pos, kw, {"d", "attribute"});
            const std::string sep = to_str(b.get_or(0, Value::string("")));
            std::string r;
            bool first = true;
            for (const auto& item : iterate(v)) {
                if (!first) r += sep;
                first = false;
                r += to_str(b.has(1) && !b.get(1).is_none() ? get_path(item, b.get(1)) : item);
                check_string_size(r.size());
            }
            return Value::string(std::move(r));
        }
        if (name == "list") {
            Bound b(what, pos, kw, {});
            return Value::list(iterate(v));
        }
        if (name == "reverse") {
            Bound b(what, pos, kw, {});
            if (v.is_string()) {
                auto cps = str::decode(v.as_string());
                std::reverse(cps.begin(), cps.end());
                return Value::string(str::encode(cps), v.is_markup());
            }
            if (v.is_object(Value::ObjectKind::Iterator)) {
                List items = iterate(v);
                std::reverse(items.begin(), items.end());
                return Value::list(std::move(items));
            }
            List items = iterate(v);
            std::reverse(items.begin(), items.end());
            return make_iterator(std::move(items));
        }
        if (name == "items") {
            Bound b(what, pos, kw, {});
            if (v.is_undefined()) return make_iterator({});
            if (!v.is_dict()) value_error("Can only get item pairs from a mapping.");
            List r;
            for (const auto& [k, val] : v.as_dict().items) r.push_back(Value::list({k, val}, Value::Flavor::Tuple));
            return make_iterator(std::move(r));
        }
        if (name == "int") {
            Bound b(what, pos, kw, {"default", "base"});
            const Value def = b.get_or(0, Value::integer(0));
            const int64_t base = b.has(1) ? expect_int(b.get(1), what) : 10;
            if (v.is_undefined()) undefined_error(v);
            if (v.is_int() || v.is_bool()) return Value::integer(v.as_int());
            if (v.is_float()) return float_to_int(v.as_double(), def);
            if (v.is_string()) {
                if (base != 10 && base != 2 && base != 8 && base != 16) value_unsupported("int filter with base " + std::to_string(base));
                if (auto i = parse_py_int(v.as_string(), static_cast<int>(base))) return Value::integer(*i);
                if (auto f = parse_py_float(v.as_string())) return float_to_int(*f, def);
                return def;
            }
            return def;
        }
        if (name == "float") {
            Bound b(what, pos, kw, {"default"});
            const Value def = b.get_or(0, Value::floating(0.0));
            if (v.is_undefined()) undefined_error(v);
            if (v.is_number()) return Value::floating(v.as_double());
            if (v.is_string()) {
                if (auto f = parse_py_float(v.as_string())) return Value::floating(*f);
            }
            return def;
        }
        if (name == "abs") {
            Bound b(what, pos, kw, {});
            if (v.is_float()) return Value::floating(std::fabs(v.as_double()));
            if (v.is_int() || v.is_bool()) {
                if (v.as_int() == INT64_MIN) int_overflow();
                return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
            }
            if (v.is_undefined()) undefined_error(v);
            value_error("bad operand type for abs(): '" + type_name(v) + "'");
        }
        if (name == "round") {
            Bound b(what, pos, kw, {"precision", "method"});
            const int64_t precision = b.has(0) ? expect_int(b.get(0), what) : 0;
            const std::string method = b.has(1) ? expect_str(b.get(1), what) : "common";
            if (v.is_undefined()) undefined_error(v);
            if (!v.is_number()) value_error("round: a number is required, not " + type_name(v));
            if (precision < 0 || precision > 15) value_unsupported("round with precision " + std::to_string(precision));
            if (method == "common") {
                if (!v.is_float()) return Value::integer(v.as_int());
                char buf[64];
                std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(precision), v.as_double());
                return Value::floating(std::strtod(buf, nullptr));
            }
            if (method != "ceil" && method != "floor") value_error("method must be common, ceil or floor");
            const double scale = std::pow(10.0, static_cast<double>(precision));
            const double x = v.as_double() * scale;
            return Value::floating((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
        }
        if (name == "center") {
            Bound b(what, pos, kw, {"width"});
            const int64_t width = b.has(0) ? expect_int(b.get(0), what) : 80;
            const std::string s = to_str(v);
            const int64_t len = static_cast<int64_t>(str::length(s));
            if (width <= len) return Value::string(s);
            if (width > static_cast<int64_t>(limits_.max_output)) value_error("center: width too large");
            const int64_t marg = width - len;
            const int64_t left = marg / 2 + (marg & width & 1);
            return Value::string(std::string(static_cast<size_t>(left), ' ') + s +
                                 std::string(static_cast<size_t>(marg - left), ' '));
        }
        if (name == "indent") {
            Bound b(what, pos, kw, {"width", "first", "blank"});
            std::string indention;
            const Value width = b.get_or(0, Value::integer(4));
            if (width.is_string()) indention = width.as_string();
            else indention = std::string(static_cast<size_t>(std::clamp<int64_t>(expect_int(width, what), 0, 1 << 16)), ' ');
            const bool first = truthy(b.get_or(1, Value::boolean(false)));
            const bool blank = truthy(b.get_or(2, Value::boolean(false)));
            if (v.is_markup()) value_unsupported("indent on a markup string");
            const std::string s = to_str(v) + "\n";
            const auto lines = str::splitlines(s, false);
            std::string rv;
            if (blank) {
                for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + indention : "") + lines[i];
            } else {
                rv = lines.empty() ? "" : lines[0];
                for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : indention + lines[i]);
            }
            if (first) rv = indention + rv;
            check_string_size(rv.size());
            return Value::string(std::move(rv));
        }
        if (name == "format") {
            if (!kw.empty() && !pos.empty()) value_error("can't handle positional and keyword arguments at the same time");
            if (!kw.empty()) value_unsupported("format with keyword arguments");
            return Value::string(percent_format(to_str(v), Value::list(pos, Value::Flavor::Tuple)));
        }
        if (name == "map") return filter_map(v, pos, kw, scope);
        if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr")
            return filter_select(name, v, pos, kw);
        if (name == "sum") {
            Bound b(what, pos, kw, {"attribute", "start"});
            Value total = b.get_or(1, Value::integer(0));
            for (const auto& item : iterate(v))
                total = binary("+", total, b.has(0) && !b.get(0).is_none() ? get_path(item, b.get(0)) : item);
            return total;
        }
        if (name == "sort" || name == "min" || name == "max" || name == "unique") {
            const bool is_sort = name == "sort";
            std::vector<std::string_view> names;
            if (is_sort) names = {"reverse", "case_sensitive", "attribute"};
            else names = {"case_sensitive", "attribute"};
            Bound b(what, pos, kw, names);
            const size_t off = is_sort ? 1 : 0;
            const bool reverse = is_sort && truthy(b.get_or(0, Value::boolean(false)));
            const bool case_sensitive = truthy(b.get_or(off, Value::boolean(false)));
            const Value attribute = b.get_or(off + 1, Value::none());
            List items = iterate(v);
            if (attribute.is_string() && attribute.as_string().find(',') != std::string::npos)
                value_unsupported(what + " with several attributes");
            auto key = [&](const Value& item) {
                Value k = attribute.is_none() ? item : get_path(item, attribute);
                return case_sensitive ? k : ignore_case(k);
            };
            if (name == "unique") {
                List out, seen;
                for (const auto& item : items) {
                    const Value k = key(item);
                    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) {
                        seen.push_back(k);
                        out.push_back(item);
                    }
                }
                return make_iterator(std::move(out));
            }
            std::vector<std::pair<Value, Value>> keyed;
            for (const auto& item : items) keyed.emplace_back(key(item), item);
            if (is_sort) {
                std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& c) {
                    return reverse ? compare(c.first, a.first) < 0 : compare(a.first, c.first) < 0;
                });
                List out;
                for (auto& kv : keyed) out.push_back(std::move(kv.second));
                return Value::list(std::move(out));
            }
            if (keyed.empty()) return Value::undefined("no " + name + " item, sequence was empty");
            size_t best = 0;
            for (size_t i = 1; i < keyed.size(); ++i) {
                const int c = compare(keyed[i].first, keyed[best].first);
                if (name == "min" ? c < 0 : c > 0) best = i;
            }
            return keyed[best].second;
        }
        if (name == "dictsort") {
            Bound b(what, pos, kw, {"case_sensitive", "by", "reverse"});
            if (!v.is_dict()) value_error("dictsort: a mapping is required, not " + type_name(v));
            const bool case_sensitive = truthy(b.get_or(0, Value::boolean(false)));
            const std::string by = b.has(1) ? expect_str(b.get(1), what) : "key";
            if (by != "key" && by != "value") value_error("You can only sort by either \"key\" or \"value\"");
            const bool reverse = truthy(b.get_or(2, Value::boolean(false)));
            List items;
            for (const auto& [k, val] : v.as_dict().items) items.push_back(Value::list({k, val}, Value::Flavor::Tuple));
            const size_t idx = by == "key" ? 0 : 1;
            std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& c) {
                const Value x = case_sensitive ? a.as_list()[idx] : ignore_case(a.as_list()[idx]);
                const Value y = case_sensitive ? c.as_list()[idx] : ignore_case(c.as_list()[idx]);
                return reverse ? compare(y, x) < 0 : compare(x, y) < 0;
            });
            return Value::list(std::move(items));
        }
        value_unsupported("the filter '" + name + "'");
    }

    static Value float_to_int(double d, const Value& def) {
        if (std::isnan(d)) return def;
        if (std::isinf(d)) value_error("cannot convert float infinity to integer");
        if (d >= 9.2e18 || d <= -9.2e18) int_overflow();
        return Value::integer(static_cast<int64_t>(std::trunc(d)));
    }

    // jinja2's do_title: capitalise the first letter after runs of [-\s({\[<].
    static std::string jinja_title(const std::string& s) {
        const auto cps = str::decode(s);
        auto is_sep = [](char32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || str::is_space(c); };
        std::string out;
        size_t i = 0;
        while (i < cps.size()) {
            size_t j = i;
            const bool sep = is_sep(cps[i]);
            while (j < cps.size() && is_sep(cps[j]) == sep) ++j;
            const std::string item = str::encode({cps.begin() + static_cast<ptrdiff_t>(i), cps.begin() + static_cast<ptrdiff_t>(j)});
            const std::string head = str::encode({cps[i]});
            out += str::upper(head) + str::lower(item.substr(head.size()));
            i = j;
        }
        return out;
    }

    Value filter_map(const Value& v, const List& pos, const Kwargs& kw, const ScopePtr& scope) {
        List out;
        if (pos.empty()) {
            Bound b("filter 'map'", pos, kw, {"attribute", "default"});
            if (!b.has(0)) value_error("map requires a filter name or attribute=");
            for (const auto& item : iterate(v)) {
                Value x = get_path(item, b.get(0));
                if (x.is_undefined() && b.has(1)) x = b.get(1);
                out.push_back(std::move(x));
            }
            return make_iterator(std::move(out));
        }
        const std::string filter = expect_str(pos[0], "map filter name");
        if (!kFilters.count(filter) || filter == "map") value_unsupported("map with the filter '" + filter + "'");
        const List rest(pos.begin() + 1, pos.end());
        for (const auto& item : iterate(v)) {
            step(0);
            out.push_back(apply_filter(filter, item, rest, kw, scope));
        }
        return make_iterator(std::move(out));
    }

    Value filter_select(const std::string& name, const Value& v, const List& pos, const Kwargs& kw) {
        const bool by_attr = name == "selectattr" || name == "rejectattr";
        const bool keep_when = name == "select" || name == "selectattr";
        if (!kw.empty()) value_unsupported(name + " with keyword arguments");
        size_t i = 0;
        Value attribute;
        if (by_attr) {
            if (pos.empty()) value_error(name + " requires an attribute name");
            attribute = pos[i++];
        }
        std::optional<std::string> test;
        if (i < pos.size()) test = expect_str(pos[i++], name + " test name");
        if (test && !kTests.count(*test)) value_unsupported(name + " with the test '" + *test + "'");
        const List args(pos.begin() + static_cast<ptrdiff_t>(i), pos.end());
        List out;
        for (const auto& item : iterate(v)) {
            step(0);
            const Value x = by_attr ? get_path(item, attribute) : item;
            const bool ok = test ? apply_test(*test, x, args, {}) : truthy(x);
            if (ok == keep_when) out.push_back(item);
        }
        return make_iterator(std::move(out));
    }

    // --- tests --------------------------------------------------------------------------------------------
    bool apply_test(const std::string& name, const Value& v, const List& pos, const Kwargs& kw) {
        const std::string what = "test '" + name + "'";
        auto no_args = [&] { Bound b(what, pos, kw, {}); };
        auto one_arg = [&]() -> Value {
            Bound b(what, pos, kw, {"other"}, 1);
            return b.get(0);
        };
        if (name == "defined") return no_args(), !v.is_undefined();
        if (name == "undefined") return no_args(), v.is_undefined();
        if (name == "none") return no_args(), v.is_none();
        if (name == "boolean") return no_args(), v.is_bool();
        if (name == "true") return no_args(), v.is_bool() && v.as_bool();
        if (name == "false") return no_args(), v.is_bool() && !v.as_bool();
        if (name == "string") return no_args(), v.is_string();
        if (name == "number") return no_args(), v.is_number();
        if (name == "integer") return no_args(), v.is_int();
        if (name == "float") return no_args(), v.is_float();
        if (name == "mapping") return no_args(), v.is_dict();
        if (name == "iterable")
            return no_args(), v.is_undefined() || v.is_string() || v.is_list() || v.is_dict() ||
                                  v.is_object(Value::ObjectKind::Iterator);
        if (name == "sequence")
            return no_args(), v.is_undefined() || v.is_string() || v.is_dict() ||
                                  (v.is_list() && v.flavor() != Value::Flavor::DictKeys &&
                                   v.flavor() != Value::Flavor::DictItems && v.flavor() != Value::Flavor::DictValues);
        if (name == "callable")
            return no_args(), v.is_object(Value::ObjectKind::Callable) || v.is_object(Value::ObjectKind::Loop);
        if (name == "escaped") return no_args(), v.is_markup();
        if (name == "sameas") {
            const Value o = one_arg();
            if (v.is_none() || o.is_none()) return v.is_none() && o.is_none();
            if (v.is_bool() || o.is_bool()) return v.is_bool() && o.is_bool() && v.as_bool() == o.as_bool();
            if (v.is_undefined() && o.is_undefined()) value_unsupported("'sameas' on undefined values");
            if (v.kind() != o.kind()) return false;
            value_unsupported("'sameas' on values other than none, true and false (Python object identity)");
        }
        if (name == "eq" || name == "equalto" || name == "==") return equals(v, one_arg());
        if (name == "ne" || name == "!=") return !equals(v, one_arg());
        if (name == "lt" || name == "lessthan" || name == "<") return compare(v, one_arg()) < 0;
        if (name == "le" || name == "<=") return compare(v, one_arg()) <= 0;
        if (name == "gt" || name == "greaterthan" || name == ">") return compare(v, one_arg()) > 0;
        if (name == "ge" || name == ">=") return compare(v, one_arg()) >= 0;
        if (name == "in") {
            Bound b(what, pos, kw, {"seq"}, 1);
            return contains(b.get(0), v);
        }
        if (name == "odd" || name == "even") {
            no_args();
            const Value r = binary("%", v, Value::integer(2));
            return name == "odd" ? equals(r, Value::integer(1)) : equals(r, Value::integer(0));
        }
        if (name == "divisibleby") {
            Bound b(what, pos, kw, {"num"}, 1);
            return equals(binary("%", v, b.get(0)), Value::integer(0));
        }
        if (name == "lower" || name == "upper") {
            no_args();
            return str_predicate(to_str(v), name == "lower" ? "islower" : "isupper");
        }
        value_unsupported("the test '" + name + "'");
    }

    const Program& program_;
    const RenderLimits& limits_;
    std::string* out_ = nullptr;
    uint64_t steps_ = 0;
    int depth_ = 0;
    Value filter_input_;
    std::vector<std::shared_ptr<Object>> created_;  // macros, namespaces, loops: see ~Evaluator
};

}  // namespace

bool is_supported_filter(const std::string& name) { return kFilters.count(name) != 0; }
bool is_supported_test(const std::string& name) { return kTests.count(name) != 0; }

std::string render(const Program& program, const Variables& variables, const RenderLimits& limits) {
    Evaluator ev(program, limits);
    try {
        return ev.run(variables);
    } catch (const ValueError& e) {
        throw Error(e.category, program.source_name + ": " + e.message);
    }
}

}  // namespace tandem::jinja
