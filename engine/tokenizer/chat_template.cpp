// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// ChatTemplate: compiles a Hugging Face chat template with tandem::jinja and renders it with the variables
// transformers' apply_chat_template passes: messages, add_generation_prompt, bos_token / eos_token (only when
// set, as transformers passes only the special tokens a tokenizer has), tools=None and documents=None unless
// given, then every key of `extra` (which may override any of them).
#include "tandem/chat_template.h"

#include "tandem/error.h"
#include "tokenizer/builtin_templates.h"
#include "tokenizer/jinja.h"

namespace tandem {

struct ChatTemplate::Impl {
    std::string source;
    std::string bos_token;
    std::string eos_token;
    std::string source_name;
    std::shared_ptr<const jinja::Program> program;

    template <class Json>
    std::string render(const Json& messages, bool add_generation_prompt, const Json& extra) const {
        if (!messages.is_array())
            throw_invalid(source_name + ": chat messages must be a JSON array of {\"role\", \"content\"} objects, got " +
                          std::string(messages.type_name()));
        for (size_t i = 0; i < messages.size(); ++i) {
            const auto& m = messages[i];
            if (!m.is_object())
                throw_invalid(source_name + ": chat message " + std::to_string(i) + " must be a JSON object, got " +
                              std::string(m.type_name()));
            const auto role = m.find("role");
            if (role == m.end() || !role->is_string())
                throw_invalid(source_name + ": chat message " + std::to_string(i) +
                              " has no \"role\" string (expected e.g. \"system\", \"user\" or \"assistant\")");
        }
        if (!extra.is_null() && !extra.is_object())
            throw_invalid(source_name + ": extra template variables must be a JSON object");

        jinja::Variables vars;
        auto put = [&](const std::string& k, jinja::Value v) {
            for (auto& kv : vars)
                if (kv.first == k) {
                    kv.second = std::move(v);
                    return;
                }
            vars.emplace_back(k, std::move(v));
        };
        try {
            put("messages", jinja::from_json(messages));
            put("tools", jinja::Value::none());
            put("documents", jinja::Value::none());
            put("add_generation_prompt", jinja::Value::boolean(add_generation_prompt));
            if (!bos_token.empty()) put("bos_token", jinja::Value::string(bos_token));
            if (!eos_token.empty()) put("eos_token", jinja::Value::string(eos_token));
            if (extra.is_object())
                for (auto it = extra.begin(); it != extra.end(); ++it) put(it.key(), jinja::from_json(it.value()));
        } catch (const jinja::ValueError& e) {
            throw Error(e.category, source_name + ": " + e.message);
        }
        return jinja::render(*program, vars);
    }
};

ChatTemplate::ChatTemplate(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

ChatTemplate ChatTemplate::compile(std::string_view source, std::string bos_token, std::string eos_token,
                                   std::string source_name) {
    auto impl = std::make_unique<Impl>();
    impl->source = std::string(source);
    impl->bos_token = std::move(bos_token);
    impl->eos_token = std::move(eos_token);
    impl->source_name = source_name;
    impl->program = jinja::parse_program(source, std::move(source_name));
    return ChatTemplate(std::move(impl));
}

ChatTemplate ChatTemplate::builtin(std::string_view name, std::string bos_token, std::string eos_token) {
    std::string names;
    for (const auto& t : builtin_chat_templates()) {
        if (t.name == name)
            return compile(t.source, std::move(bos_token), std::move(eos_token),
                           "builtin chat template '" + std::string(name) + "'");
        names += (names.empty() ? "" : ", ") + std::string(t.name);
    }
    throw_invalid("unknown built-in chat template '" + std::string(name) + "' (available: " + names + ")");
}

std::string ChatTemplate::render(const nlohmann::json& messages, bool add_generation_prompt,
                                 const nlohmann::json& extra) const {
    return impl_->render(messages, add_generation_prompt, extra);
}

std::string ChatTemplate::render_ordered(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                         const nlohmann::ordered_json& extra) const {
    return impl_->render(messages, add_generation_prompt, extra);
}

const std::string& ChatTemplate::source() const { return impl_->source; }

}  // namespace tandem
