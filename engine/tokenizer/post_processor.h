// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Post-processors of tokenizer.json ("post_processor"), applied when encode(add_special_tokens=true):
// TemplateProcessing (the "single" template), RobertaProcessing, BertProcessing, ByteLevel (ids unchanged)
// and Sequence. Only single sequences are encoded, so "pair" templates are read but not used.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_util.h"

namespace tandem::tok {

class PostProcessor {
public:
    virtual ~PostProcessor() = default;
    virtual void process(std::vector<int32_t>& ids) const = 0;
};

std::unique_ptr<PostProcessor> make_post_processor(const Json& j, const Source& src, const std::string& where);

}  // namespace tandem::tok
