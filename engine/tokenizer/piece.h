// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Piece: one span of text moving through the encode pipeline (added-token split -> normalizer ->
// pre-tokenizer -> model). HF tracks full offset alignments; Tandem only needs ids, so a piece carries its
// text, the id of an added token already matched, and whether it begins the original input (the one offset
// fact a component depends on: Metaspace's prepend_scheme "first").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::tok {

struct Piece {
    std::string text;
    int32_t id = -1;        // >= 0: an added token; never normalized, split or run through the model
    bool at_start = false;  // begins at offset 0 of the original text
};

using Pieces = std::vector<Piece>;

}  // namespace tandem::tok
