// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Normalizers of tokenizer.json ("normalizer"): NFC/NFD/NFKC/NFKD, Replace (string or regex), Prepend,
// Lowercase, Strip, StripAccents, ByteLevel and Sequence. They rewrite one piece of text in place; HF runs
// them on each span between added tokens separately, and so does Tandem.
#pragma once

#include <memory>
#include <string>

#include "tokenizer/json_util.h"

namespace tandem::tok {

class Normalizer {
public:
    virtual ~Normalizer() = default;
    virtual void normalize(std::string& s) const = 0;
};

// Builds the normalizer described by j (which must not be null). Throws Error{Unsupported} for unknown types.
std::unique_ptr<Normalizer> make_normalizer(const Json& j, const Source& src, const std::string& where);

}  // namespace tandem::tok
