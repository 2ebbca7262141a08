// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Jinja AST and parser. The grammar and operator precedence follow jinja2's parser.py (filters bind tighter
// than arithmetic: `messages|length - 1` is `(messages|length) - 1`; `**` is left-associative; `x if c`
// without else is undefined when c is false). Filters, tests and tags outside the supported subset are
// rejected here, at compile time, as Error{Unsupported} naming the line, so a template we cannot render
// exactly is refused when it is loaded rather than when some message happens to reach the unsupported branch.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace tandem::jinja {

enum class ExprKind {
    Const,     // value
    Name,      // name
    List,      // args = items
    Tuple,     // args = items
    Dict,      // args = key0, value0, key1, value1, ...
    Getattr,   // args[0].name
    Getitem,   // args[0][args[1]]
    Slice,     // args[0]:args[1]:args[2], each may be null
    Call,      // args[0](args[1..], kwargs)
    Filter,    // args[0] | name(args[1..], kwargs); args[0] is null inside {% filter %} / {% set x | f %}
    Test,      // args[0] is name(args[1..], kwargs)
    Neg,       // -args[0]
    Pos,       // +args[0]
    Not,       // not args[0]
    Binary,    // args[0] <name> args[1] for + - * / // % **
    Compare,   // args[0] ops[0] args[1] ops[1] args[2] ... (eq ne lt lteq gt gteq in notin)
    And,       // args[0] and args[1]
    Or,        // args[0] or args[1]
    CondExpr,  // args[1] if args[0] else args[2] (args[2] may be null)
    Concat,    // args joined with ~
    NsRef,     // name.attr as an assignment target ({% set ns.attr = ... %}); name in `name`, attr in `attr`
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
    ExprKind kind;
    size_t pos = 0;
    Value value;
    std::string name;
    std::string attr;
    std::vector<ExprPtr> args;
    std::vector<std::pair<std::string, ExprPtr>> kwargs;
    std::vector<std::string> ops;
};

enum class NodeKind {
    Text,         // text
    Output,       // {{ expr }}
    If,           // branches: (cond, body)...; else_body
    For,          // for target in expr [if cond]: body [else else_body]
    Set,          // set target = expr
    SetBlock,     // set target [| filter] %} body {% endset; filter in `expr` (may be null)
    Macro,        // macro name(params=defaults) body
    Break,
    Continue,
    FilterBlock,  // filter expr(chain with null innermost value) body
    With,         // with assigns: body
    Generation,   // {% generation %} body {% endgeneration %}: rendered as-is (transformers' AssistantTracker)
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
    NodeKind kind;
    size_t pos = 0;
    std::string text;
    ExprPtr expr;
    ExprPtr target;
    ExprPtr cond;
    std::vector<std::pair<ExprPtr, Body>> branches;
    Body body;
    Body else_body;
    std::string name;                      // Macro
    std::vector<std::string> params;       // Macro
    std::vector<ExprPtr> defaults;         // Macro: one per param, null when none
    std::vector<std::pair<ExprPtr, ExprPtr>> assigns;  // With
};

struct Program {
    std::string source;       // normalised source (positions refer to it)
    std::string source_name;  // for error messages
    Body body;
};

// "NAME:LINE:COL" for a position in a program's source.
std::string location(const Program& program, size_t pos);

// Parses a template. Throws tandem::Error: InvalidInput for syntax errors, Unsupported for constructs
// outside the subset, both naming source_name, line and column.
std::shared_ptr<const Program> parse_program(std::string_view source, std::string source_name);

// The filters and tests the evaluator implements (the parser rejects others).
bool is_supported_filter(const std::string& name);
bool is_supported_test(const std::string& name);

}  // namespace tandem::jinja
