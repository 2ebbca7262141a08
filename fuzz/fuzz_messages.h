// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The conversation the chat-template targets render: every role, a tool call and tools, so template
// branches on message.tool_calls, tools and the roles are reachable.
#pragma once

#include <nlohmann/json.hpp>

namespace tandem::fuzz {

inline const nlohmann::ordered_json& messages() {
    static const auto m = nlohmann::ordered_json::parse(R"([
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "Weather in Paris? caf\u00e9 \ud83d\udc4d"},
      {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function":
        {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}]},
      {"role": "tool", "content": "{\"temp\": 21}"},
      {"role": "assistant", "content": "<think>\nsunny\n</think>\n\n21 degrees."},
      {"role": "user", "content": ""}
    ])");
    return m;
}

inline const nlohmann::ordered_json& template_vars() {
    static const auto v = nlohmann::ordered_json::parse(R"({
      "enable_thinking": false,
      "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    })");
    return v;
}

}  // namespace tandem::fuzz
