// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// `tandem-cli chat --tokenizer PATH [--add-generation-prompt] [--ids] [--template NAME] [--vars JSON]`
// Each stdin line is a JSON array of messages; prints the rendered chat template as a JSON string (or the
// token ids of the rendering with --ids). The template is the model's own (tokenizer_config.json); a model
// without one needs --template chatml|alpaca|llama3.
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "commands.h"
#include "stdin_lines.h"
#include "tandem/chat_template.h"
#include "tandem/error.h"
#include "tandem/tokenizer.h"

namespace tandem::cli {

Run add_chat_command(CLI::App& app) {
    struct Opts {
        std::string tokenizer;
        bool generation_prompt = false;
        bool ids = false;
        std::string builtin;
        std::string vars = "{}";
    };
    auto o = std::make_shared<Opts>();
    auto* sub = app.add_subcommand("chat", "Render JSON message arrays from stdin with the model's chat template");
    sub->add_option("--tokenizer", o->tokenizer, "tokenizer.json or a model folder")->required();
    sub->add_flag("--add-generation-prompt", o->generation_prompt, "end with the assistant header");
    sub->add_flag("--ids", o->ids, "print token ids instead of text");
    sub->add_option("--template", o->builtin, "use a built-in template instead of the model's: chatml, alpaca, llama3");
    sub->add_option("--vars", o->vars, "extra template variables as a JSON object, e.g. '{\"enable_thinking\": false}'");
    return [o]() {
        const Tokenizer tok = Tokenizer::load(o->tokenizer);
        const auto& cfg = tok.config();
        nlohmann::ordered_json vars;
        try {
            vars = nlohmann::ordered_json::parse(o->vars);
        } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for 1e309
            throw_invalid(std::string("--vars: not valid JSON: ") + e.what());
        }
        if (!vars.is_object()) throw_invalid("--vars: expected a JSON object such as '{\"enable_thinking\": false}'");
        std::optional<ChatTemplate> tmpl;
        if (!o->builtin.empty()) {
            tmpl.emplace(ChatTemplate::builtin(o->builtin, cfg.bos_token, cfg.eos_token));
        } else if (!cfg.chat_template.empty()) {
            tmpl.emplace(ChatTemplate::compile(cfg.chat_template, cfg.bos_token, cfg.eos_token,
                                               tok.path().parent_path().string() + "/tokenizer_config.json"));
        } else {
            throw_invalid(tok.path().parent_path().string() +
                          ": this model has no chat_template in tokenizer_config.json; choose a built-in one with "
                          "--template chatml|alpaca|llama3");
        }
        for_each_json_line([&](const nlohmann::ordered_json& messages, size_t line) {
            std::string text;
            try {
                text = tmpl->render_ordered(messages, o->generation_prompt, vars);
            } catch (const Error& e) {
                throw Error(e.category(), "stdin:" + std::to_string(line) + ": " + e.what());
            }
            if (o->ids) std::cout << nlohmann::json(tok.encode(text, false)).dump() << "\n";
            else std::cout << json_string(text) << "\n";
        });
        return 0;
    };
}

}  // namespace tandem::cli
