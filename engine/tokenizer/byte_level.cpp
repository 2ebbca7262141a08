// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Byte-level character map and lossy UTF-8 (see byte_level.h).
#include "tokenizer/byte_level.h"

#include "core/utf8.h"

namespace tandem::tok {

ByteLevelMap::ByteLevelMap() {
    char_to_byte_.fill(-1);
    int next = 0;
    for (int b = 0; b < 256; ++b) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        char32_t c = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + next++);
        byte_to_char[b] = c;
        utf8::append(byte_to_utf8[b], c);
        char_to_byte_[c] = static_cast<int16_t>(b);
    }
}

const ByteLevelMap& ByteLevelMap::get() {
    static const ByteLevelMap map;
    return map;
}

void append_byte_level(std::string& out, std::string_view s) {
    const ByteLevelMap& m = ByteLevelMap::get();
    for (unsigned char b : s) out += m.byte_to_utf8[b];
}

std::string utf8_lossy(std::string_view v) {
    std::string out;
    out.reserve(v.size());
    const auto* p = reinterpret_cast<const unsigned char*>(v.data());
    size_t n = v.size(), i = 0;
    auto cont = [&](size_t k) { return k < n && (p[k] & 0xC0) == 0x80; };
    while (i < n) {
        unsigned char b = p[i];
        if (b < 0x80) {
            out.push_back(static_cast<char>(b));
            ++i;
            continue;
        }
        size_t len = 0;  // length of the valid sequence starting here, 0 when invalid
        size_t bad = 1;  // bytes to replace with one U+FFFD when invalid
        if (b >= 0xC2 && b <= 0xDF) {
            if (cont(i + 1)) len = 2;
        } else if (b >= 0xE0 && b <= 0xEF) {
            bool second_ok = i + 1 < n && ((b == 0xE0 && p[i + 1] >= 0xA0 && p[i + 1] <= 0xBF) ||
                                           (b == 0xED && p[i + 1] >= 0x80 && p[i + 1] <= 0x9F) ||
                                           (b != 0xE0 && b != 0xED && cont(i + 1)));
            if (second_ok) {
                if (cont(i + 2))
                    len = 3;
                else
                    bad = 2;
            }
        } else if (b >= 0xF0 && b <= 0xF4) {
            bool second_ok = i + 1 < n && ((b == 0xF0 && p[i + 1] >= 0x90 && p[i + 1] <= 0xBF) ||
                                           (b == 0xF4 && p[i + 1] >= 0x80 && p[i + 1] <= 0x8F) ||
                                           (b != 0xF0 && b != 0xF4 && cont(i + 1)));
            if (second_ok) {
                if (!cont(i + 2))
                    bad = 2;
                else if (!cont(i + 3))
                    bad = 3;
                else
                    len = 4;
            }
        }
        if (len) {
            out.append(v.substr(i, len));
            i += len;
        } else {
            out += "\xEF\xBF\xBD";
            i += bad;
        }
    }
    return out;
}

}  // namespace tandem::tok
