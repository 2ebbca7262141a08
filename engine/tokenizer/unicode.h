// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Unicode character predicates with the meaning Rust's `char` methods have, because HF `tokenizers` (Rust)
// decides added-token word boundaries, Strip, WhitespaceSplit, Digits and Punctuation with them.
// Backed by utf8proc's general categories; White_Space is an explicit list (it is not a category).
// Known limit: is_alphabetic is L* + Nl; Rust also counts Other_Alphabetic (some combining marks), which
// only matters for added tokens marked single_word.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tandem::tok {

bool is_whitespace(char32_t c);  // Unicode White_Space (Rust char::is_whitespace)
bool is_alphabetic(char32_t c);
bool is_numeric(char32_t c);  // Nd, Nl, No (Rust char::is_numeric)
bool is_alphanumeric(char32_t c);
bool is_punctuation(char32_t c);  // ASCII punctuation or any P* category (HF Punctuation pre-tokenizer)

// Decodes the code point starting at s[i] (s must be valid UTF-8) and advances i.
char32_t next_char(std::string_view s, size_t& i);
// Decodes the code point ending at s[i) and moves i back to its start (i > 0).
char32_t prev_char(std::string_view s, size_t& i);

// Appends the lower-case form of c as Rust's char::to_lowercase does (full mapping: U+0130 -> "i\u0307").
void append_lowercase(std::string& out, char32_t c);

// Unicode normalization forms via utf8proc. NUL characters are kept (no NUL termination is assumed).
enum class NormForm { NFC, NFD, NFKC, NFKD };
std::string normalize_unicode(std::string_view s, NormForm form);
// True when s is certainly already in the form (a cheap byte scan; false means "maybe not").
bool is_normalized_quick(std::string_view s, NormForm form);

}  // namespace tandem::tok
