// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Built-in chat templates for models that ship without one (ChatTemplate::builtin). The sources are the files
// in resources/chat_templates/, embedded at compile time as string literals (no build plumbing).
#pragma once

#include <string_view>
#include <vector>

namespace tandem {

struct BuiltinTemplate {
    std::string_view name;    // "chatml", "llama3", "alpaca"
    std::string_view source;  // exactly the .jinja file's bytes
};

// In name order.
const std::vector<BuiltinTemplate>& builtin_chat_templates();

}  // namespace tandem
