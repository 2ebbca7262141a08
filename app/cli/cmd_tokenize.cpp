// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// `tandem-cli tokenize --tokenizer PATH [--decode] [--add-special-tokens]`
// Encode: each stdin line is a JSON string; prints a JSON array of ids per line (no special tokens added
// unless asked). Decode: each line is a JSON array of ids; prints the text as a JSON string.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "stdin_lines.h"
#include "tandem/error.h"
#include "tandem/tokenizer.h"

namespace tandem::cli {

Run add_tokenize_command(CLI::App& app) {
    struct Opts {
        std::string tokenizer;
        bool decode = false;
        bool add_special = false;
        bool skip_special = false;
    };
    auto o = std::make_shared<Opts>();
    auto* sub = app.add_subcommand("tokenize", "Encode JSON strings from stdin to ids (one per line), or decode ids");
    sub->add_option("--tokenizer", o->tokenizer, "tokenizer.json or a model folder")->required();
    sub->add_flag("--decode", o->decode, "read JSON arrays of ids, print JSON strings");
    sub->add_flag("--add-special-tokens", o->add_special, "add the post-processor's tokens (e.g. BOS)");
    sub->add_flag("--skip-special-tokens", o->skip_special, "with --decode: drop special tokens");
    return [o]() {
        const Tokenizer tok = Tokenizer::load(o->tokenizer);
        const int32_t vocab = tok.vocab_size();
        for_each_json_line([&](const nlohmann::ordered_json& v, size_t line) {
            if (!o->decode) {
                if (!v.is_string())
                    throw_invalid("stdin:" + std::to_string(line) + ": expected a JSON string, got " +
                                  std::string(v.type_name()));
                std::cout << nlohmann::json(tok.encode(v.get<std::string>(), o->add_special)).dump() << "\n";
                return;
            }
            if (!v.is_array())
                throw_invalid("stdin:" + std::to_string(line) + ": expected a JSON array of token ids, got " +
                              std::string(v.type_name()));
            std::vector<int32_t> ids;
            ids.reserve(v.size());
            for (const auto& x : v) {
                if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= vocab)
                    throw_invalid("stdin:" + std::to_string(line) + ": " + x.dump() +
                                  " is not a token id of this tokenizer (0.." + std::to_string(vocab - 1) + ")");
                ids.push_back(x.get<int32_t>());
            }
            std::cout << json_string(tok.decode(ids, o->skip_special)) << "\n";
        });
        return 0;
    };
}

}  // namespace tandem::cli
