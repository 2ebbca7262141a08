// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Recursive-descent parser from jinja_lexer tokens to the AST in jinja_parser.h, mirroring jinja2's
// parser.py function by function (parse_tuple, parse_condexpr, ..., parse_unary, parse_postfix,
// parse_filter_expr) so that precedence quirks match. Nesting depth is capped so a hostile template gives an
// error instead of overflowing the stack.
#include "tokenizer/jinja_parser.h"

#include <algorithm>
#include <set>

#include "core/utf8.h"
#include "tokenizer/jinja_lexer.h"

namespace tandem::jinja {

namespace {

constexpr int kMaxNesting = 200;

// jinja2's built-in tags we do not implement (a template using them is valid, just not for us).
const std::set<std::string> kUnsupportedTags = {"include", "import", "from", "extends", "block", "call",
                                                "autoescape", "trans", "pluralize", "endcall", "do"};

class Parser {
public:
    Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

    Body parse_template() {
        Body body = subparse({});
        if (cur().type != Tok::Eof) fail("unexpected '" + describe(cur()) + "'");
        return body;
    }

private:
    // --- token stream -------------------------------------------------------------------------------------
    const Token& cur() const { return t_[i_]; }
    const Token& peek(size_t n = 1) const { return t_[std::min(i_ + n, t_.size() - 1)]; }
    const Token& next() {
        const Token& t = t_[i_];
        if (i_ + 1 < t_.size()) ++i_;
        return t;
    }
    bool is_op(const char* op) const { return cur().type == Tok::Op && cur().text == op; }
    bool is_name(const char* n) const { return cur().type == Tok::Name && cur().text == n; }
    bool skip_op(const char* op) {
        if (!is_op(op)) return false;
        next();
        return true;
    }
    bool skip_name(const char* n) {
        if (!is_name(n)) return false;
        next();
        return true;
    }
    static std::string describe(const Token& t) {
        switch (t.type) {
        case Tok::Data: return "template data";
        case Tok::VarBegin: return "{{";
        case Tok::VarEnd: return "end of print statement";
        case Tok::BlockBegin: return "{%";
        case Tok::BlockEnd: return "end of statement block";
        case Tok::Eof: return "end of template";
        case Tok::String: return "string";
        default: return t.text;
        }
    }
    [[noreturn]] void fail(std::string msg) const { throw SyntaxError{cur().pos, std::move(msg)}; }
    [[noreturn]] void unsupported(std::string msg, size_t pos) const {
        throw SyntaxError{pos, std::move(msg), ErrorCategory::Unsupported};
    }
    void expect_op(const char* op) {
        if (!skip_op(op)) fail(std::string("expected '") + op + "', got '" + describe(cur()) + "'");
    }
    void expect_block_end() {
        if (cur().type != Tok::BlockEnd) fail("expected end of statement block, got '" + describe(cur()) + "'");
        next();
    }
    std::string expect_name() {
        if (cur().type != Tok::Name) fail("expected a name, got '" + describe(cur()) + "'");
        return next().text;
    }

    struct DepthGuard {
        Parser& p;
        explicit DepthGuard(Parser& parser) : p(parser) {
            if (++p.depth_ > kMaxNesting) p.fail("template nested too deeply");
        }
        ~DepthGuard() { --p.depth_; }
    };

    static ExprPtr make(ExprKind kind, size_t pos) {
        auto e = std::make_unique<Expr>();
        e->kind = kind;
        e->pos = pos;
        return e;
    }
    static ExprPtr make(ExprKind kind, size_t pos, ExprPtr a, ExprPtr b = nullptr) {
        auto e = make(kind, pos);
        e->args.push_back(std::move(a));
        if (b) e->args.push_back(std::move(b));
        return e;
    }

    // --- statements ---------------------------------------------------------------------------------------
    // Parses until a {% tag %} whose name is in `end` (left as the current token) or the end of input.
    Body subparse(const std::vector<std::string>& end) {
        DepthGuard guard(*this);
        Body body;
        while (true) {
            const Token& t = cur();
            if (t.type == Tok::Eof) {
                if (!end.empty()) fail_unclosed(end);
                return body;
            }
            if (t.type == Tok::Data) {
                auto n = std::make_unique<Node>();
                n->kind = NodeKind::Text;
                n->pos = t.pos;
                n->text = t.text;
                body.push_back(std::move(n));
                next();
            } else if (t.type == Tok::VarBegin) {
                auto n = std::make_unique<Node>();
                n->kind = NodeKind::Output;
                n->pos = t.pos;
                next();
                n->expr = parse_tuple(false, true, {}, false);
                if (cur().type != Tok::VarEnd) fail("expected end of print statement, got '" + describe(cur()) + "'");
                next();
                body.push_back(std::move(n));
            } else if (t.type == Tok::BlockBegin) {
                block_pos_ = t.pos;
                next();
                if (cur().type == Tok::Name && std::find(end.begin(), end.end(), cur().text) != end.end())
                    return body;
                body.push_back(parse_statement());
            } else {
                fail("unexpected '" + describe(t) + "'");
            }
        }
    }

    [[noreturn]] void fail_unclosed(const std::vector<std::string>& end) const {
        std::string names;
        for (const auto& e : end) names += (names.empty() ? "'" : " or '") + e + "'";
        const size_t open = open_tags_.empty() ? cur().pos : open_tags_.back().second;
        const std::string tag = open_tags_.empty() ? std::string("a") : "the '" + open_tags_.back().first + "'";
        throw SyntaxError{open, "unexpected end of template: " + tag + " tag opened here was never closed (expected " +
                                    names + ")"};
    }

    // Body of a block tag, up to one of `end`; consumes the end tag name only (caller handles the rest).
    Body block_body(const std::string& tag, size_t pos, const std::vector<std::string>& end) {
        open_tags_.emplace_back(tag, pos);
        Body body = subparse(end);
        open_tags_.pop_back();
        return body;
    }

    NodePtr parse_statement() {
        const Token& t = cur();
        if (t.type != Tok::Name) fail("tag name expected");
        const std::string tag = t.text;
        const size_t pos = block_pos_;  // the tag's `{%`
        if (tag == "if") return parse_if();
        if (tag == "for") return parse_for();
        if (tag == "set") return parse_set();
        if (tag == "macro") return parse_macro();
        if (tag == "filter") return parse_filter_block();
        if (tag == "with") return parse_with();
        if (tag == "generation") {
            next();
            expect_block_end();
            auto n = node(NodeKind::Generation, pos);
            n->body = block_body("generation", pos, {"endgeneration"});
            next();
            expect_block_end();
            return n;
        }
        if (tag == "break" || tag == "continue") {
            next();
            if (loop_depth_ == 0) throw SyntaxError{pos, "'" + tag + "' outside of a loop"};
            expect_block_end();
            return node(tag == "break" ? NodeKind::Break : NodeKind::Continue, pos);
        }
        if (kUnsupportedTags.count(tag)) unsupported("the '" + tag + "' tag is not supported", pos);
        fail("encountered unknown tag '" + tag + "'");
    }

    NodePtr node(NodeKind kind, size_t pos) {
        auto n = std::make_unique<Node>();
        n->kind = kind;
        n->pos = pos;
        return n;
    }

    NodePtr parse_if() {
        auto n = node(NodeKind::If, block_pos_);
        next();
        while (true) {
            ExprPtr cond = parse_tuple(false, true, {}, false);
            expect_block_end();
            Body body = block_body("if", n->pos, {"elif", "else", "endif"});
            n->branches.emplace_back(std::move(cond), std::move(body));
            const std::string which = next().text;
            if (which == "elif") continue;
            if (which == "else") {
                expect_block_end();
                n->else_body = block_body("if", n->pos, {"endif"});
                next();
            }
            break;
        }
        expect_block_end();
        return n;
    }

    NodePtr parse_for() {
        auto n = node(NodeKind::For, block_pos_);
        next();
        n->target = parse_assign_target(true, false, {"in"});
        if (!skip_name("in")) fail("expected 'in', got '" + describe(cur()) + "'");
        n->expr = parse_tuple(false, false, {"recursive"}, false);
        if (skip_name("if")) n->cond = parse_expression(true);
        if (is_name("recursive")) unsupported("recursive loops are not supported", cur().pos);
        expect_block_end();
        ++loop_depth_;
        n->body = block_body("for", n->pos, {"endfor", "else"});
        --loop_depth_;
        if (next().text == "else") {
            expect_block_end();
            n->else_body = block_body("for", n->pos, {"endfor"});
            next();
        }
        expect_block_end();
        return n;
    }

    NodePtr parse_set() {
        const size_t pos = block_pos_;
        next();
        ExprPtr target = parse_assign_target(true, true, {});
        if (skip_op("=")) {
            auto n = node(NodeKind::Set, pos);
            n->target = std::move(target);
            n->expr = parse_tuple(false, true, {}, false);
            expect_block_end();
            return n;
        }
        auto n = node(NodeKind::SetBlock, pos);
        n->target = std::move(target);
        if (is_op("|")) n->expr = parse_filter_chain(nullptr);
        expect_block_end();
        n->body = block_body("set", pos, {"endset"});
        next();
        expect_block_end();
        return n;
    }

    NodePtr parse_macro() {
        auto n = node(NodeKind::Macro, block_pos_);
        next();
        n->name = expect_name();
        expect_op("(");
        while (!is_op(")")) {
            if (!n->params.empty()) expect_op(",");
            if (is_op(")")) break;
            const size_t ppos = cur().pos;
            n->params.push_back(expect_name());
            if (skip_op("=")) {
                n->defaults.push_back(parse_expression(true));
            } else {
                if (!n->defaults.empty() && n->defaults.back())
                    throw SyntaxError{ppos, "non-default argument follows default argument"};
                n->defaults.push_back(nullptr);
            }
        }
        next();
        expect_block_end();
        const int saved = loop_depth_;
        loop_depth_ = 0;  // break/continue cannot cross a macro boundary
        n->body = block_body("macro", n->pos, {"endmacro"});
        loop_depth_ = saved;
        next();
        if (cur().type == Tok::Name) next();  // {% endmacro name %}
        expect_block_end();
        return n;
    }

    NodePtr parse_filter_block() {
        auto n = node(NodeKind::FilterBlock, block_pos_);
        next();
        n->expr = parse_filter_chain(nullptr, true);
        expect_block_end();
        n->body = block_body("filter", n->pos, {"endfilter"});
        next();
        expect_block_end();
        return n;
    }

    NodePtr parse_with() {
        auto n = node(NodeKind::With, block_pos_);
        next();
        while (cur().type != Tok::BlockEnd) {
            if (!n->assigns.empty()) expect_op(",");
            ExprPtr target = parse_assign_target(true, false, {});
            expect_op("=");
            n->assigns.emplace_back(std::move(target), parse_expression(true));
        }
        expect_block_end();
        n->body = block_body("with", n->pos, {"endwith"});
        next();
        expect_block_end();
        return n;
    }

    // Name, tuple of names, or (for set) name.attr.
    ExprPtr parse_assign_target(bool with_tuple, bool with_namespace, const std::vector<std::string>& extra_end) {
        if (with_namespace && cur().type == Tok::Name && peek().type == Tok::Op && peek().text == ".") {
            auto e = make(ExprKind::NsRef, cur().pos);
            e->name = next().text;
            next();
            e->attr = expect_name();
            return e;
        }
        ExprPtr target = with_tuple ? parse_tuple(true, true, extra_end, false) : parse_primary();
        check_assignable(*target);
        return target;
    }

    void check_assignable(const Expr& e) const {
        if (e.kind == ExprKind::Name) {
            if (e.name == "true" || e.name == "false" || e.name == "none" || e.name == "True" || e.name == "False" ||
                e.name == "None")
                throw SyntaxError{e.pos, "cannot assign to '" + e.name + "'"};
            return;
        }
        if (e.kind == ExprKind::Tuple) {
            for (const auto& a : e.args) check_assignable(*a);
            return;
        }
        throw SyntaxError{e.pos, "cannot assign to this expression"};
    }

    // --- expressions --------------------------------------------------------------------------------------
    bool is_tuple_end(const std::vector<std::string>& extra_end) const {
        const Token& t = cur();
        if (t.type == Tok::VarEnd || t.type == Tok::BlockEnd || t.type == Tok::Eof) return true;
        if (t.type == Tok::Op && t.text == ")") return true;
        if (t.type == Tok::Name && std::find(extra_end.begin(), extra_end.end(), t.text) != extra_end.end())
            return true;
        return false;
    }

    ExprPtr parse_tuple(bool simplified, bool with_condexpr, const std::vector<std::string>& extra_end,
                        bool explicit_parentheses) {
        const size_t pos = cur().pos;
        std::vector<ExprPtr> items;
        bool is_tuple = false;
        while (true) {
            if (!items.empty()) expect_op(",");
            if (is_tuple_end(extra_end)) break;
            if (simplified)
                items.push_back(parse_primary());
            else
                items.push_back(parse_expression(with_condexpr));
            if (is_op(","))
                is_tuple = true;
            else
                break;
        }
        if (!is_tuple) {
            if (!items.empty()) return std::move(items[0]);
            if (!explicit_parentheses) fail("expected an expression, got '" + describe(cur()) + "'");
        }
        auto e = make(ExprKind::Tuple, pos);
        e->args = std::move(items);
        return e;
    }

    ExprPtr parse_expression(bool with_condexpr) {
        DepthGuard guard(*this);
        return with_condexpr ? parse_condexpr() : parse_or();
    }

    ExprPtr parse_condexpr() {
        const size_t pos = cur().pos;
        ExprPtr expr1 = parse_or();
        while (skip_name("if")) {
            ExprPtr expr2 = parse_or();
            ExprPtr expr3;
            if (skip_name("else")) expr3 = parse_condexpr();
            auto e = make(ExprKind::CondExpr, pos);
            e->args.push_back(std::move(expr2));
            e->args.push_back(std::move(expr1));
            e->args.push_back(std::move(expr3));
            expr1 = std::move(e);
        }
        return expr1;
    }

    ExprPtr parse_or() {
        const size_t pos = cur().pos;
        ExprPtr left = parse_and();
        while (skip_name("or")) left = make(ExprKind::Or, pos, std::move(left), parse_and());
        return left;
    }

    ExprPtr parse_and() {
        const size_t pos = cur().pos;
        ExprPtr left = parse_not();
        while (skip_name("and")) left = make(ExprKind::And, pos, std::move(left), parse_not());
        return left;
    }

    ExprPtr parse_not() {
        if (is_name("not")) {
            const size_t pos = next().pos;
            DepthGuard guard(*this);
            return make(ExprKind::Not, pos, parse_not());
        }
        return parse_compare();
    }

    ExprPtr parse_compare() {
        const size_t pos = cur().pos;
        ExprPtr expr = parse_math1();
        std::vector<std::string> ops;
        std::vector<ExprPtr> operands;
        while (true) {
            std::string op;
            const Token& t = cur();
            if (t.type == Tok::Op) {
                if (t.text == "==") op = "eq";
                else if (t.text == "!=") op = "ne";
                else if (t.text == "<") op = "lt";
                else if (t.text == "<=") op = "lteq";
                else if (t.text == ">") op = "gt";
                else if (t.text == ">=") op = "gteq";
                if (!op.empty()) next();
            } else if (t.type == Tok::Name && t.text == "in") {
                op = "in";
                next();
            } else if (t.type == Tok::Name && t.text == "not" && peek().type == Tok::Name && peek().text == "in") {
                op = "notin";
                next();
                next();
            }
            if (op.empty()) break;
            ops.push_back(op);
            operands.push_back(parse_math1());
        }
        if (ops.empty()) return expr;
        auto e = make(ExprKind::Compare, pos);
        e->args.push_back(std::move(expr));
        for (auto& o : operands) e->args.push_back(std::move(o));
        e->ops = std::move(ops);
        return e;
    }

    ExprPtr binary(const std::string& op, size_t pos, ExprPtr a, ExprPtr b) {
        auto e = make(ExprKind::Binary, pos, std::move(a), std::move(b));
        e->name = op;
        return e;
    }

    ExprPtr parse_math1() {
        const size_t pos = cur().pos;
        ExprPtr left = parse_concat();
        while (is_op("+") || is_op("-")) {
            const std::string op = next().text;
            left = binary(op, pos, std::move(left), parse_concat());
        }
        return left;
    }

    ExprPtr parse_concat() {
        const size_t pos = cur().pos;
        ExprPtr first = parse_math2();
        if (!is_op("~")) return first;
        auto e = make(ExprKind::Concat, pos);
        e->args.push_back(std::move(first));
        while (skip_op("~")) e->args.push_back(parse_math2());
        return e;
    }

    ExprPtr parse_math2() {
        const size_t pos = cur().pos;
        ExprPtr left = parse_pow();
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            const std::string op = next().text;
            left = binary(op, pos, std::move(left), parse_pow());
        }
        return left;
    }

    ExprPtr parse_pow() {
        const size_t pos = cur().pos;
        ExprPtr left = parse_unary(true);
        while (skip_op("**")) left = binary("**", pos, std::move(left), parse_unary(true));
        return left;
    }

    ExprPtr parse_unary(bool with_filter) {
        DepthGuard guard(*this);
        const size_t pos = cur().pos;
        ExprPtr node;
        if (skip_op("-"))
            node = make(ExprKind::Neg, pos, parse_unary(false));
        else if (skip_op("+"))
            node = make(ExprKind::Pos, pos, parse_unary(false));
        else
            node = parse_primary();
        node = parse_postfix(std::move(node));
        if (with_filter) node = parse_filter_expr(std::move(node));
        return node;
    }

    ExprPtr parse_primary() {
        DepthGuard guard(*this);
        const Token& t = cur();
        const size_t pos = t.pos;
        if (t.type == Tok::Name) {
            next();
            auto e = make(ExprKind::Const, pos);
            if (t.text == "true" || t.text == "True") {
                e->value = Value::boolean(true);
            } else if (t.text == "false" || t.text == "False") {
                e->value = Value::boolean(false);
            } else if (t.text == "none" || t.text == "None") {
                e->value = Value::none();
            } else {
                e->kind = ExprKind::Name;
                e->name = t.text;
            }
            return e;
        }
        if (t.type == Tok::String) {
            std::string s;
            while (cur().type == Tok::String) s += next().text;
            if (!utf8::is_valid(s)) throw SyntaxError{pos, "string literal is not valid UTF-8"};
            auto e = make(ExprKind::Const, pos);
            e->value = Value::string(std::move(s));
            return e;
        }
        if (t.type == Tok::Int || t.type == Tok::Float) {
            auto e = make(ExprKind::Const, pos);
            e->value = t.type == Tok::Int ? Value::integer(t.int_value) : Value::floating(t.float_value);
            next();
            return e;
        }
        if (skip_op("(")) {
            ExprPtr e = parse_tuple(false, true, {}, true);
            expect_op(")");
            return e;
        }
        if (skip_op("[")) {
            auto e = make(ExprKind::List, pos);
            while (!is_op("]")) {
                if (!e->args.empty()) expect_op(",");
                if (is_op("]")) break;
                e->args.push_back(parse_expression(true));
            }
            expect_op("]");
            return e;
        }
        if (skip_op("{")) {
            auto e = make(ExprKind::Dict, pos);
            while (!is_op("}")) {
                if (!e->args.empty()) expect_op(",");
                if (is_op("}")) break;
                e->args.push_back(parse_expression(true));
                expect_op(":");
                e->args.push_back(parse_expression(true));
            }
            expect_op("}");
            return e;
        }
        fail("unexpected '" + describe(t) + "'");
    }

    ExprPtr parse_postfix(ExprPtr node) {
        while (true) {
            if (is_op(".") || is_op("["))
                node = parse_subscript(std::move(node));
            else if (is_op("("))
                node = parse_call(std::move(node));
            else
                return node;
        }
    }

    ExprPtr parse_filter_expr(ExprPtr node) {
        while (true) {
            if (is_op("|"))
                node = parse_filter_chain(std::move(node), false, true);
            else if (is_name("is"))
                node = parse_test(std::move(node));
            else if (is_op("("))
                node = parse_call(std::move(node));
            else
                return node;
        }
    }

    ExprPtr parse_subscript(ExprPtr node) {
        DepthGuard guard(*this);
        const Token& t = next();
        const size_t pos = t.pos;
        if (t.text == ".") {
            const Token& a = cur();
            if (a.type == Tok::Name) {
                auto e = make(ExprKind::Getattr, pos, std::move(node));
                e->name = next().text;
                return e;
            }
            if (a.type == Tok::Int) {
                auto idx = make(ExprKind::Const, a.pos);
                idx->value = Value::integer(a.int_value);
                next();
                return make(ExprKind::Getitem, pos, std::move(node), std::move(idx));
            }
            fail("expected name or number after '.'");
        }
        std::vector<ExprPtr> args;
        while (!is_op("]")) {
            if (!args.empty()) expect_op(",");
            args.push_back(parse_subscribed());
        }
        expect_op("]");
        ExprPtr index;
        if (args.size() == 1) {
            index = std::move(args[0]);
        } else {
            index = make(ExprKind::Tuple, pos);
            index->args = std::move(args);
        }
        return make(ExprKind::Getitem, pos, std::move(node), std::move(index));
    }

    ExprPtr parse_subscribed() {
        const size_t pos = cur().pos;
        auto slice = make(ExprKind::Slice, pos);
        if (is_op(":")) {
            next();
            slice->args.push_back(nullptr);
        } else {
            ExprPtr e = parse_expression(true);
            if (!is_op(":")) return e;
            next();
            slice->args.push_back(std::move(e));
        }
        if (is_op(":") || is_op("]") || is_op(","))
            slice->args.push_back(nullptr);
        else
            slice->args.push_back(parse_expression(true));
        if (skip_op(":")) {
            if (is_op("]") || is_op(","))
                slice->args.push_back(nullptr);
            else
                slice->args.push_back(parse_expression(true));
        } else {
            slice->args.push_back(nullptr);
        }
        return slice;
    }

    void parse_call_args(Expr& e) {
        expect_op("(");
        const size_t before = e.args.size();
        while (!is_op(")")) {
            if (e.args.size() > before || !e.kwargs.empty()) {
                expect_op(",");
                if (is_op(")")) break;
            }
            if (is_op("*") || is_op("**")) unsupported("*args / **kwargs in calls are not supported", cur().pos);
            if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
                std::string key = next().text;
                next();
                e.kwargs.emplace_back(std::move(key), parse_expression(true));
            } else {
                if (!e.kwargs.empty()) fail("positional argument after keyword argument");
                e.args.push_back(parse_expression(true));
            }
        }
        next();
    }

    ExprPtr parse_call(ExprPtr node) {
        DepthGuard guard(*this);
        auto e = make(ExprKind::Call, cur().pos, std::move(node));
        parse_call_args(*e);
        return e;
    }

    std::string dotted_name() {
        std::string name = expect_name();
        while (is_op(".")) {
            next();
            name += "." + expect_name();
        }
        return name;
    }

    // `| f(args) | g ...` (start_inline: the first filter has no leading `|`, as in {% filter f %}).
    ExprPtr parse_filter_chain(ExprPtr node, bool start_inline = false, bool single = false) {
        DepthGuard guard(*this);
        do {
            if (!start_inline) expect_op("|");
            start_inline = false;
            const size_t pos = cur().pos;
            auto e = make(ExprKind::Filter, pos);
            e->name = dotted_name();
            if (!is_supported_filter(e->name)) unsupported("no filter named '" + e->name + "' is supported", pos);
            e->args.push_back(std::move(node));
            if (is_op("(")) {
                std::vector<ExprPtr> first;
                first.swap(e->args);  // keep the filtered value first
                parse_call_args(*e);
                first.insert(first.end(), std::make_move_iterator(e->args.begin()),
                             std::make_move_iterator(e->args.end()));
                e->args = std::move(first);
            }
            node = std::move(e);
        } while (!single && is_op("|"));
        return node;
    }

    ExprPtr parse_test(ExprPtr node) {
        DepthGuard guard(*this);
        const size_t pos = next().pos;  // 'is'
        const bool negated = skip_name("not");
        auto e = make(ExprKind::Test, cur().pos);
        e->name = dotted_name();
        if (!is_supported_test(e->name)) unsupported("no test named '" + e->name + "' is supported", e->pos);
        e->args.push_back(std::move(node));
        const Token& t = cur();
        if (is_op("(")) {
            std::vector<ExprPtr> first;
            first.swap(e->args);
            parse_call_args(*e);
            first.insert(first.end(), std::make_move_iterator(e->args.begin()),
                         std::make_move_iterator(e->args.end()));
            e->args = std::move(first);
        } else if ((t.type == Tok::Name || t.type == Tok::String || t.type == Tok::Int || t.type == Tok::Float ||
                    (t.type == Tok::Op && (t.text == "[" || t.text == "{"))) &&
                   !(t.type == Tok::Name && (t.text == "else" || t.text == "or" || t.text == "and"))) {
            if (t.type == Tok::Name && t.text == "is") fail("you cannot chain multiple tests with is");
            e->args.push_back(parse_postfix(parse_primary()));
        }
        if (negated) return make(ExprKind::Not, pos, std::move(e));
        return e;
    }

    std::vector<Token> t_;
    size_t i_ = 0;
    int depth_ = 0;
    int loop_depth_ = 0;
    size_t block_pos_ = 0;  // position of the `{%` of the statement being parsed
    std::vector<std::pair<std::string, size_t>> open_tags_;
};

}  // namespace

std::string location(const Program& program, size_t pos) {
    size_t line = 0, col = 0;
    utf8::line_col(program.source, std::min(pos, program.source.size()), line, col);
    return program.source_name + ":" + std::to_string(line) + ":" + std::to_string(col);
}

std::shared_ptr<const Program> parse_program(std::string_view source, std::string source_name) {
    auto program = std::make_shared<Program>();
    program->source_name = std::move(source_name);
    program->source = normalize_source(source);
    size_t bad = 0;
    if (!utf8::is_valid(program->source, &bad))
        throw Error(ErrorCategory::InvalidInput, location(*program, bad) + ": the template is not valid UTF-8");
    try {
        Parser parser(tokenize(program->source));
        program->body = parser.parse_template();
    } catch (const SyntaxError& e) {
        const char* what = e.category == ErrorCategory::Unsupported ? ": unsupported template feature: "
                                                                    : ": template syntax error: ";
        throw Error(e.category, location(*program, e.pos) + what + e.message);
    }
    return program;
}

}  // namespace tandem::jinja
