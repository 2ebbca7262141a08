// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// UTF-8 helpers shared by the tokenizer, the chat-template renderer and the dataset readers.
// Decoding is strict (no overlongs, no surrogates, nothing above U+10FFFF) so invalid input is reported with
// its byte offset instead of being silently mangled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tandem::utf8 {

// Decodes one code point at s[i]; on success returns it and advances i. On invalid UTF-8 returns -1 and
// leaves i unchanged.
int32_t decode(std::string_view s, size_t& i) noexcept;

// Appends the UTF-8 encoding of cp (cp must be a valid scalar value).
void append(std::string& out, char32_t cp);

// True when s is valid UTF-8; otherwise sets *bad_offset (if given) to the first invalid byte.
bool is_valid(std::string_view s, size_t* bad_offset = nullptr) noexcept;

// Length in bytes of the UTF-8 sequence that starts with lead byte c (1 for invalid lead bytes).
inline size_t sequence_length(unsigned char c) noexcept {
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) return 2;
    if ((c & 0xF0) == 0xE0) return 3;
    if ((c & 0xF8) == 0xF0) return 4;
    return 1;
}

// Line (1-based) and column (1-based, in bytes) of byte offset off in text: for error messages.
void line_col(std::string_view text, size_t off, size_t& line, size_t& col) noexcept;

}  // namespace tandem::utf8
