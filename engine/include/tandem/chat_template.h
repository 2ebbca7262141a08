// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::ChatTemplate — renders a Hugging Face chat template (Jinja2) exactly as transformers'
// `apply_chat_template(messages, tokenize=False, add_generation_prompt=...)` does, character for character.
// The Jinja subset is implemented in engine/tokenizer/jinja.*; anything outside it is an Error{Unsupported}
// naming the template line, never a wrong rendering.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tandem {

class ChatTemplate {
public:
    // Compiles a template. `source_name` is used in error messages (e.g. ".../tokenizer_config.json").
    // bos_token / eos_token are exposed to the template as in transformers.
    static ChatTemplate compile(std::string_view source, std::string bos_token, std::string eos_token,
                                std::string source_name = "chat_template");

    // Built-in templates for models without one: "chatml", "alpaca", "llama3". Throws Error{InvalidInput}
    // listing the names for anything else.
    static ChatTemplate builtin(std::string_view name, std::string bos_token = {}, std::string eos_token = {});

    ChatTemplate(ChatTemplate&&) noexcept;
    ChatTemplate& operator=(ChatTemplate&&) noexcept;
    ~ChatTemplate();

    // messages: JSON array of {"role": ..., "content": ...} objects (extra keys such as tool_calls are passed
    // through to the template). `extra` holds additional template variables (e.g. {"enable_thinking": false},
    // {"tools": [...]}). Throws Error{InvalidInput} for malformed messages and for templates that call
    // raise_exception (the message names the reason the template gave).
    std::string render(const nlohmann::json& messages, bool add_generation_prompt,
                       const nlohmann::json& extra = nlohmann::json::object()) const;

    // The same with ordered JSON: dict key order reaches the template as given (nlohmann::json sorts object
    // keys, so `| tojson` of e.g. a tool schema would print keys alphabetically, unlike transformers). Prefer
    // this when the messages/tools come from a file.
    std::string render_ordered(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                               const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

    const std::string& source() const;

    struct Impl;

private:
    explicit ChatTemplate(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace tandem
