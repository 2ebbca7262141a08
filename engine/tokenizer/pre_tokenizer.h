// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): Split (regex or string, every delimiter behavior,
// invert), ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit, Punctuation, BertPreTokenizer and
// Sequence. Each cuts the pieces that are not added tokens into smaller pieces (and may rewrite them);
// empty pieces are dropped after every step, as HF does.
#pragma once

#include <memory>
#include <string>

#include "tokenizer/json_util.h"
#include "tokenizer/piece.h"

namespace tandem::tok {

class PreTokenizer {
public:
    virtual ~PreTokenizer() = default;
    virtual void pre_tokenize(Pieces& pieces) const = 0;
    // True when this step maps text to GPT-2 byte-level characters (for Tokenizer::kind()).
    virtual bool is_byte_level() const { return false; }
};

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& j, const Source& src, const std::string& where);

}  // namespace tandem::tok
