// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// GPT-2's reversible byte <-> character map used by byte-level BPE (every byte becomes one printable
// character: printable Latin-1 maps to itself, the rest to U+0100.. in order), and Rust's
// String::from_utf8_lossy, which HF applies after mapping decoded characters back to bytes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tandem::tok {

struct ByteLevelMap {
    std::array<char32_t, 256> byte_to_char{};
    std::array<std::string, 256> byte_to_utf8{};  // byte_to_char, UTF-8 encoded
    // Maps a character back to its byte; -1 when the character is not one of the 256.
    int char_to_byte(char32_t c) const { return c < 0x200 ? char_to_byte_[c] : -1; }

    static const ByteLevelMap& get();

private:
    ByteLevelMap();
    std::array<int16_t, 0x200> char_to_byte_{};
};

// Appends the byte-level form of s (each byte -> its mapped character) to out.
void append_byte_level(std::string& out, std::string_view s);

// Rust's String::from_utf8_lossy: each maximal invalid subsequence becomes one U+FFFD.
std::string utf8_lossy(std::string_view bytes);

}  // namespace tandem::tok
