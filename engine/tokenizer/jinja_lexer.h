// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Jinja lexer: splits a template into text and the tokens of its {{ }} / {% %} tags, applying jinja2's
// whitespace rules exactly as transformers configures them (trim_blocks, lstrip_blocks, `-`/`+` markers,
// keep_trailing_newline=False, newlines normalised to \n). Comments are dropped here and {% raw %} becomes text.
// Positions are byte offsets into the normalised source (same line numbers as the original).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/error.h"

namespace tandem::jinja {

// A template syntax error at a byte offset; the parser adds the source name and line/column.
struct SyntaxError {
    size_t pos;
    std::string message;
    ErrorCategory category = ErrorCategory::InvalidInput;
};

enum class Tok : uint8_t {
    Data,        // template text (after whitespace control)
    VarBegin,    // {{
    VarEnd,      // }}
    BlockBegin,  // {%
    BlockEnd,    // %}
    Name,
    String,      // text holds the unescaped value
    Int,
    Float,
    Op,          // text holds the operator: + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { } ;
    Eof,
};

struct Token {
    Tok type = Tok::Eof;
    std::string text;
    size_t pos = 0;
    int64_t int_value = 0;
    double float_value = 0;
};

// \r\n and \r -> \n, then one trailing \n removed (jinja2's keep_trailing_newline=False).
std::string normalize_source(std::string_view source);

// Tokenizes a normalised source. Throws SyntaxError.
std::vector<Token> tokenize(const std::string& source);

}  // namespace tandem::jinja
