// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Jinja lexer (see jinja_lexer.h). The structure follows jinja2's lexer state machine so that the whitespace
// rules come out identical: text runs to the first `{{`, `{%` or `{#`; a `-` after the opening delimiter
// strips all whitespace before it, otherwise lstrip_blocks strips a whitespace-only line prefix before `{%`
// and `{#` (not `{{`); `-%}`/`-}}`/`-#}` strip all whitespace after, and trim_blocks drops one newline after
// `%}` and `#}`. Inside a tag, an end delimiter only counts while brackets are balanced (so `{{ {'a': 1}}}`
// works).
#include "tokenizer/jinja_lexer.h"

#include <cstdlib>

#include "core/utf8.h"
#include "tokenizer/jinja_value.h"

namespace tandem::jinja {

namespace {

[[noreturn]] void fail(size_t pos, std::string message) { throw SyntaxError{pos, std::move(message)}; }

// Python's \s for one code point at s[i]; returns its byte length or 0.
size_t space_at(const std::string& s, size_t i) {
    if (i >= s.size()) return 0;
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) return str::is_space(c) ? 1 : 0;
    size_t j = i;
    const int32_t cp = utf8::decode(s, j);
    if (cp < 0) return 0;
    return str::is_space(static_cast<char32_t>(cp)) ? j - i : 0;
}

size_t skip_spaces(const std::string& s, size_t i) {
    while (size_t n = space_at(s, i)) i += n;
    return i;
}

// text.rstrip() in Python terms.
std::string_view rstrip_py(std::string_view text) {
    std::string t(text);
    // Walk forward remembering the end of the last non-space code point.
    size_t i = 0, keep = 0;
    while (i < t.size()) {
        const size_t n = space_at(t, i);
        if (n) {
            i += n;
        } else {
            i += utf8::sequence_length(static_cast<unsigned char>(t[i]));
            keep = i;
        }
    }
    return text.substr(0, keep);
}

bool all_spaces(std::string_view text) {
    std::string t(text);
    size_t i = 0;
    while (i < t.size()) {
        const size_t n = space_at(t, i);
        if (!n) return false;
        i += n;
    }
    return true;
}

// jinja2's OptionalLStrip: the text before a tag, given the tag's whitespace sign.
std::string_view strip_before_tag(std::string_view text, char sign, bool lstrip_applies, bool line_starting) {
    if (sign == '-') return rstrip_py(text);
    if (sign != '+' && lstrip_applies) {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size() && all_spaces(text.substr(l_pos)))
            return text.substr(0, l_pos);
    }
    return text;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Matches `(\d+_)*\d+` at i; returns the end or npos.
size_t match_digits(const std::string& s, size_t i) {
    if (i >= s.size() || !is_digit(s[i])) return std::string::npos;
    while (true) {
        while (i < s.size() && is_digit(s[i])) ++i;
        if (i + 1 < s.size() && s[i] == '_' && is_digit(s[i + 1])) {
            ++i;
            continue;
        }
        return i;
    }
}

// jinja2's float_re: (?<!\.)(\d+_)*\d+((\.(\d+_)*\d+)?e[+\-]?(\d+_)*\d+|\.(\d+_)*\d+), case-insensitive.
size_t match_float(const std::string& s, size_t i) {
    if (i > 0 && s[i - 1] == '.') return std::string::npos;
    size_t j = match_digits(s, i);
    if (j == std::string::npos) return j;
    size_t frac_end = std::string::npos;
    if (j < s.size() && s[j] == '.') frac_end = match_digits(s, j + 1);
    auto match_exp = [&](size_t k) -> size_t {
        if (k >= s.size() || (s[k] != 'e' && s[k] != 'E')) return std::string::npos;
        ++k;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        return match_digits(s, k);
    };
    if (frac_end != std::string::npos) {
        const size_t e = match_exp(frac_end);
        return e != std::string::npos ? e : frac_end;
    }
    return match_exp(j);
}

std::string without_underscores(std::string_view s) {
    std::string out;
    for (char c : s)
        if (c != '_') out += c;
    return out;
}

// jinja2's integer_re: 0b.., 0o.., 0x.., [1-9](_?\d)*, 0(_?0)*. Returns the end or npos.
size_t match_int(const std::string& s, size_t i, int& base) {
    if (i >= s.size() || !is_digit(s[i])) return std::string::npos;
    base = 10;
    if (s[i] == '0' && i + 1 < s.size()) {
        const char p = static_cast<char>(s[i + 1] | 0x20);
        auto digit_ok = [&](char c) {
            if (p == 'b') return c == '0' || c == '1';
            if (p == 'o') return c >= '0' && c <= '7';
            return is_hex(c);
        };
        if (p == 'b' || p == 'o' || p == 'x') {
            size_t j = i + 2;
            size_t end = std::string::npos;
            while (true) {
                size_t k = j;
                if (k < s.size() && s[k] == '_') ++k;
                if (k < s.size() && digit_ok(s[k])) {
                    j = end = k + 1;
                } else {
                    break;
                }
            }
            if (end != std::string::npos) {
                base = p == 'b' ? 2 : (p == 'o' ? 8 : 16);
                return end;
            }
        }
    }
    size_t j = i + 1;
    const bool zero = s[i] == '0';
    while (true) {
        size_t k = j;
        if (k < s.size() && s[k] == '_') ++k;
        if (k < s.size() && (zero ? s[k] == '0' : is_digit(s[k]))) {
            j = k + 1;
        } else {
            break;
        }
    }
    return j;
}

// Python's unicode-escape decoding of a string literal body (what jinja2 applies to string tokens).
std::string unescape(const std::string& body, size_t pos) {
    std::string out;
    for (size_t i = 0; i < body.size(); ++i) {
        const char c = body[i];
        if (c != '\\' || i + 1 >= body.size()) {
            out += c;
            continue;
        }
        const char e = body[++i];
        auto hex = [&](size_t n) {
            uint32_t v = 0;
            for (size_t k = 1; k <= n; ++k) {
                if (i + k >= body.size() || !is_hex(body[i + k])) fail(pos, "truncated \\x/\\u escape in a string");
                const char h = body[i + k];
                v = v * 16 + static_cast<uint32_t>(is_digit(h) ? h - '0' : (h | 0x20) - 'a' + 10);
            }
            i += n;
            if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) fail(pos, "invalid code point escape in a string");
            utf8::append(out, static_cast<char32_t>(v));
        };
        switch (e) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x': hex(2); break;
        case 'u': hex(4); break;
        case 'U': hex(8); break;
        case 'N': throw SyntaxError{pos, "\\N{...} escapes are not supported", ErrorCategory::Unsupported};
        default:
            if (e >= '0' && e <= '7') {
                uint32_t v = static_cast<uint32_t>(e - '0');
                for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k)
                    v = v * 8 + static_cast<uint32_t>(body[++i] - '0');
                utf8::append(out, static_cast<char32_t>(v));
            } else if (static_cast<unsigned char>(e) >= 0x80) {
                // jinja2 turns the non-ASCII character into an escape first, which changes its meaning.
                throw SyntaxError{pos, "a backslash before a non-ASCII character in a string",
                                  ErrorCategory::Unsupported};
            } else {
                out += '\\';
                out += e;
            }
        }
    }
    return out;
}

class Lexer {
public:
    explicit Lexer(const std::string& s) : s_(s) {}

    std::vector<Token> run() {
        size_t pos = 0;
        bool line_starting = true;
        while (pos < s_.size()) {
            size_t q = pos;
            while (true) {
                q = s_.find('{', q);
                if (q == std::string::npos || q + 1 >= s_.size()) {
                    q = std::string::npos;
                    break;
                }
                const char k = s_[q + 1];
                if (k == '{' || k == '%' || k == '#') break;
                ++q;
            }
            if (q == std::string::npos) {
                emit_data(s_.substr(pos), pos);
                break;
            }
            const char kind = s_[q + 1];
            const char sign = (q + 2 < s_.size() && (s_[q + 2] == '-' || s_[q + 2] == '+')) ? s_[q + 2] : 0;
            const std::string_view text(s_.data() + pos, q - pos);
            emit_data(std::string(strip_before_tag(text, sign, kind != '{', line_starting)), pos);
            size_t after = q + 2 + (sign ? 1 : 0);
            if (kind == '#') {
                pos = lex_comment(after, q);
            } else if (kind == '%' && try_raw(after, q, pos)) {
                // pos set by try_raw
            } else {
                pos = lex_tag(after, q, kind == '%');
            }
            line_starting = pos > 0 && s_[pos - 1] == '\n';
        }
        tokens_.push_back(Token{Tok::Eof, {}, s_.size()});
        return std::move(tokens_);
    }

private:
    void emit_data(std::string text, size_t pos) {
        if (!text.empty()) tokens_.push_back(Token{Tok::Data, std::move(text), pos});
    }

    // After `%}` / `#}` at i (pointing past the delimiter): trim_blocks eats one newline.
    size_t end_of_block_delim(size_t i, char sign) const {
        if (sign == '-') return skip_spaces(s_, i);
        if (sign == '+') return i;
        return (i < s_.size() && s_[i] == '\n') ? i + 1 : i;
    }

    size_t lex_comment(size_t start, size_t open) {
        const size_t r = s_.find("#}", start);
        if (r == std::string::npos) fail(open, "missing end of comment tag");
        char sign = 0;
        if (r > start && (s_[r - 1] == '-' || s_[r - 1] == '+')) sign = s_[r - 1];
        return end_of_block_delim(r + 2, sign);
    }

    // {% raw %} ... {% endraw %}: returns false when the tag at `open` is not a raw tag.
    bool try_raw(size_t start, size_t open, size_t& pos_out) {
        size_t i = skip_spaces(s_, start);
        if (s_.compare(i, 3, "raw") != 0) return false;
        i = skip_spaces(s_, i + 3);
        if (s_.compare(i, 3, "-%}") == 0) {
            i = skip_spaces(s_, i + 3);
        } else if (s_.compare(i, 2, "%}") == 0) {
            i += 2;
        } else {
            return false;
        }
        const bool line_starting = i > 0 && s_[i - 1] == '\n';
        // Find `{%[-+]?\s*endraw\s*(+%}|-%}\s*|%}\n?)`.
        size_t p = i;
        while (true) {
            p = s_.find("{%", p);
            if (p == std::string::npos) fail(open, "missing end of raw directive");
            size_t k = p + 2;
            char sign = 0;
            if (k < s_.size() && (s_[k] == '-' || s_[k] == '+')) sign = s_[k++];
            k = skip_spaces(s_, k);
            if (s_.compare(k, 6, "endraw") == 0) {
                k = skip_spaces(s_, k + 6);
                char end_sign = 0;
                if (k < s_.size() && (s_[k] == '-' || s_[k] == '+')) end_sign = s_[k++];
                if (s_.compare(k, 2, "%}") == 0) {
                    const std::string_view text(s_.data() + i, p - i);
                    emit_data(std::string(strip_before_tag(text, sign, true, line_starting)), i);
                    pos_out = end_of_block_delim(k + 2, end_sign);
                    return true;
                }
            }
            ++p;
        }
    }

    // The inside of {{ }} or {% %} starting at i; returns the position after the end delimiter.
    size_t lex_tag(size_t i, size_t open, bool block) {
        tokens_.push_back(Token{block ? Tok::BlockBegin : Tok::VarBegin, {}, open});
        std::vector<char> balance;
        const char* close = block ? "%}" : "}}";
        while (true) {
            if (i >= s_.size())
                fail(open, std::string("unexpected end of template: the tag opened here is never closed with '") +
                               close + "'");
            if (balance.empty()) {
                if (block && s_.compare(i, 3, "+%}") == 0) {
                    tokens_.push_back(Token{Tok::BlockEnd, {}, i});
                    return i + 3;
                }
                if (s_[i] == '-' && s_.compare(i + 1, 2, close) == 0) {
                    tokens_.push_back(Token{block ? Tok::BlockEnd : Tok::VarEnd, {}, i});
                    return skip_spaces(s_, i + 3);
                }
                if (s_.compare(i, 2, close) == 0) {
                    tokens_.push_back(Token{block ? Tok::BlockEnd : Tok::VarEnd, {}, i});
                    return block ? end_of_block_delim(i + 2, 0) : i + 2;
                }
            }
            if (size_t n = space_at(s_, i)) {
                i += n;
                continue;
            }
            const char c = s_[i];
            if (size_t e = match_float(s_, i); e != std::string::npos) {
                const std::string text = without_underscores(std::string_view(s_).substr(i, e - i));
                Token t{Tok::Float, text, i};
                t.float_value = std::strtod(text.c_str(), nullptr);
                tokens_.push_back(std::move(t));
                i = e;
                continue;
            }
            int base = 10;
            if (size_t e = match_int(s_, i, base); e != std::string::npos) {
                std::string text = without_underscores(std::string_view(s_).substr(i, e - i));
                const std::string digits = base == 10 ? text : text.substr(2);
                errno = 0;
                char* endp = nullptr;
                const long long v = std::strtoll(digits.c_str(), &endp, base);
                if (errno == ERANGE)
                    throw SyntaxError{i, "integer literal " + text + " is too large", ErrorCategory::Unsupported};
                Token t{Tok::Int, text, i};
                t.int_value = v;
                tokens_.push_back(std::move(t));
                i = e;
                continue;
            }
            if (is_name_start(c)) {
                size_t e = i;
                while (e < s_.size() && is_name_char(s_[e])) ++e;
                tokens_.push_back(Token{Tok::Name, s_.substr(i, e - i), i});
                i = e;
                continue;
            }
            if (static_cast<unsigned char>(c) >= 0x80)
                throw SyntaxError{i, "non-ASCII names are not supported", ErrorCategory::Unsupported};
            if (c == '\'' || c == '"') {
                size_t e = i + 1;
                while (e < s_.size() && s_[e] != c) e += (s_[e] == '\\') ? 2 : 1;
                if (e >= s_.size()) fail(i, "unterminated string literal");
                tokens_.push_back(Token{Tok::String, unescape(s_.substr(i + 1, e - i - 1), i), i});
                i = e + 1;
                continue;
            }
            static const char* const two_char[] = {"//", "**", "==", "!=", ">=", "<="};
            std::string op;
            for (const char* t : two_char)
                if (s_.compare(i, 2, t) == 0) op = t;
            if (op.empty() && std::string_view("+-/*%~[](){}><=.:|,;").find(c) != std::string_view::npos) op = c;
            if (op.empty()) fail(i, std::string("unexpected char '") + c + "'");
            if (op == "(" || op == "[" || op == "{") {
                balance.push_back(op == "(" ? ')' : (op == "[" ? ']' : '}'));
            } else if (op == ")" || op == "]" || op == "}") {
                if (balance.empty()) fail(i, "unexpected '" + op + "'");
                if (balance.back() != op[0])
                    fail(i, "unexpected '" + op + "', expected '" + std::string(1, balance.back()) + "'");
                balance.pop_back();
            }
            tokens_.push_back(Token{Tok::Op, op, i});
            i += op.size();
        }
    }

    const std::string& s_;
    std::vector<Token> tokens_;
};

}  // namespace

std::string normalize_source(std::string_view source) {
    std::string out;
    out.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
        if (source[i] == '\r') {
            out += '\n';
            if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
        } else {
            out += source[i];
        }
    }
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

std::vector<Token> tokenize(const std::string& source) { return Lexer(source).run(); }

}  // namespace tandem::jinja
