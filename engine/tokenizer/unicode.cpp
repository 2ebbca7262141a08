// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Unicode predicates and normalization (see unicode.h).
#include "tokenizer/unicode.h"

#include <cstdlib>
#include <memory>

#include <utf8proc.h>

#include "core/utf8.h"
#include "tandem/error.h"

namespace tandem::tok {

bool is_whitespace(char32_t c) {
    if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
    switch (c) {
        case 0x85:
        case 0xA0:
        case 0x1680:
        case 0x2028:
        case 0x2029:
        case 0x202F:
        case 0x205F:
        case 0x3000:
            return true;
        default:
            return c >= 0x2000 && c <= 0x200A;
    }
}

static utf8proc_category_t category(char32_t c) {
    return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

bool is_alphabetic(char32_t c) {
    if (c < 0x80) return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
    switch (category(c)) {
        case UTF8PROC_CATEGORY_LU:
        case UTF8PROC_CATEGORY_LL:
        case UTF8PROC_CATEGORY_LT:
        case UTF8PROC_CATEGORY_LM:
        case UTF8PROC_CATEGORY_LO:
        case UTF8PROC_CATEGORY_NL:
            return true;
        default:
            return false;
    }
}

bool is_numeric(char32_t c) {
    if (c < 0x80) return c >= '0' && c <= '9';
    auto cat = category(c);
    return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

bool is_alphanumeric(char32_t c) {
    return is_alphabetic(c) || is_numeric(c);
}

bool is_punctuation(char32_t c) {
    if (c < 0x80) return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
    switch (category(c)) {
        case UTF8PROC_CATEGORY_PC:
        case UTF8PROC_CATEGORY_PD:
        case UTF8PROC_CATEGORY_PS:
        case UTF8PROC_CATEGORY_PE:
        case UTF8PROC_CATEGORY_PI:
        case UTF8PROC_CATEGORY_PF:
        case UTF8PROC_CATEGORY_PO:
            return true;
        default:
            return false;
    }
}

char32_t next_char(std::string_view s, size_t& i) {
    int32_t cp = utf8::decode(s, i);
    if (cp < 0) {  // callers validate first; never loop forever on a bad byte
        return static_cast<unsigned char>(s[i++]);
    }
    return static_cast<char32_t>(cp);
}

char32_t prev_char(std::string_view s, size_t& i) {
    size_t start = i - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80 && i - start < 4) --start;
    size_t j = start;
    char32_t c = next_char(s, j);
    i = start;
    return c;
}

void append_lowercase(std::string& out, char32_t c) {
    if (c < 0x80) {
        out.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c));
        return;
    }
    if (c == 0x130) {  // the one unconditional multi-character lower-case mapping
        out.push_back('i');
        utf8::append(out, 0x307);
        return;
    }
    utf8::append(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
}

bool is_normalized_quick(std::string_view s, NormForm form) {
    // Every normal form of ASCII is itself. For NFC, so is any text below U+0300: the first combining
    // marks, and every character NFC changes, are at U+0300 or above (lead bytes 0xCC and up).
    unsigned char limit = form == NormForm::NFC ? 0xCC : 0x80;
    for (unsigned char ch : s)
        if (ch >= limit) return false;
    return true;
}

std::string normalize_unicode(std::string_view s, NormForm form) {
    if (is_normalized_quick(s, form)) return std::string(s);
    int options = UTF8PROC_STABLE;
    switch (form) {
        case NormForm::NFC:
            options |= UTF8PROC_COMPOSE;
            break;
        case NormForm::NFD:
            options |= UTF8PROC_DECOMPOSE;
            break;
        case NormForm::NFKC:
            options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
            break;
        case NormForm::NFKD:
            options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
            break;
    }
    utf8proc_uint8_t* result = nullptr;
    utf8proc_ssize_t n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()),
                     &result, static_cast<utf8proc_option_t>(options));
    std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(result, &std::free);
    if (n < 0) throw_invalid(std::string("Unicode normalization failed: ") + utf8proc_errmsg(n));
    return std::string(reinterpret_cast<const char*>(result), static_cast<size_t>(n));
}

}  // namespace tandem::tok
