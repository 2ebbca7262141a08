// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// TextCodec for a real model: the Tokenizer's encode and its chat template (or a built-in one).
// Kept apart from render.cpp so that the rendering logic links and is testable with a fake codec alone.
// The codec holds a reference to the tokenizer: the tokenizer must outlive it.
#include <memory>

#include "tandem/chat_template.h"
#include "tandem/data.h"
#include "tandem/error.h"
#include "tandem/tokenizer.h"

namespace tandem {

TextCodec make_text_codec(const Tokenizer& tokenizer, const RenderOptions& options) {
    const TokenizerConfig& cfg = tokenizer.config();
    TextCodec codec;
    std::shared_ptr<const ChatTemplate> tpl;
    if (options.chat_template == "auto" && !cfg.chat_template.empty()) {
        tpl = std::make_shared<const ChatTemplate>(
            ChatTemplate::compile(cfg.chat_template, cfg.bos_token, cfg.eos_token,
                                  (tokenizer.path().parent_path() / "tokenizer_config.json").string()));
        codec.template_name = "model";
    } else {
        const std::string name = options.chat_template == "auto" ? options.fallback_template : options.chat_template;
        tpl = std::make_shared<const ChatTemplate>(ChatTemplate::builtin(name, cfg.bos_token, cfg.eos_token));
        codec.template_name = "builtin:" + name;
    }
    codec.encode = [&tokenizer](std::string_view text) { return tokenizer.encode(text, false); };
    codec.render = [tpl](const nlohmann::ordered_json& messages, bool add_generation_prompt,
                        const nlohmann::ordered_json& extra) {
        return tpl->render_ordered(messages, add_generation_prompt, extra);
    };
    codec.bos_id = tokenizer.bos_id();
    codec.eos_id = tokenizer.eos_id();
    codec.eos_token = cfg.eos_token;
    // Does the post-processor add BOS (Llama) or not (Qwen)? Ask it rather than trust add_bos_token.
    const auto with = tokenizer.encode("a", true);
    const auto without = tokenizer.encode("a", false);
    codec.adds_bos = codec.bos_id && with.size() > without.size() && with.front() == *codec.bos_id;
    const std::string& source = tpl->source();
    codec.template_has_tool_calls = source.find("tool_calls") != std::string::npos;
    codec.template_has_tools = source.find("tools") != std::string::npos;
    return codec;
}

TokenizedDataset tokenize_dataset(const Dataset& dataset, const Tokenizer& tokenizer, const RenderOptions& options) {
    return tokenize_dataset(dataset, make_text_codec(tokenizer, options), options);
}

}  // namespace tandem

namespace tandem {

PreparedData prepare_data(const DataOptions& options, const Tokenizer& tokenizer) {
    return prepare_data(options, make_text_codec(tokenizer, options.render));
}

}  // namespace tandem
