// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Decoders of tokenizer.json ("decoder"): ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace,
// BPEDecoder and Sequence. Like HF's Decoder::decode_chain each step maps the list of token strings to a
// new list; Tokenizer::decode joins the final list.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_util.h"

namespace tandem::tok {

class Decoder {
public:
    virtual ~Decoder() = default;
    virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

std::unique_ptr<Decoder> make_decoder(const Json& j, const Source& src, const std::string& where);

}  // namespace tandem::tok
