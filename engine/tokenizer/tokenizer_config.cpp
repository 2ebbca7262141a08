// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tokenizer_config.json reader. Special tokens may be plain strings or AddedToken objects
// ({"content": ..., "__type": "AddedToken"}); chat_template may be a string or a list of {name, template}
// (the one named "default" is used, else the first). Newer transformers versions write the template to
// chat_template.jinja beside the config instead; that file is read when the config has none.
#include <fstream>

#include "core/files.h"
#include "tokenizer/tokenizer_impl.h"

namespace tandem::tok {

namespace {

std::string token_string(const Json& cfg, const char* key, const Source& src) {
    const Json* v = find(cfg, key);
    if (!v || v->is_null()) return {};
    if (v->is_string()) return v->get<std::string>();
    if (v->is_object()) return get_string(*v, "content", src, key);
    throw_bad_field(src, key, "must be a string or an object with \"content\"");
}

std::optional<bool> optional_bool(const Json& cfg, const char* key, const Source& src) {
    const Json* v = find(cfg, key);
    if (!v || v->is_null()) return std::nullopt;
    if (!v->is_boolean()) throw_bad_field(src, key, "must be true or false");
    return v->get<bool>();
}

}  // namespace

TokenizerConfig read_tokenizer_config(const std::filesystem::path& path) {
    Source src{path};
    Json cfg = read_json_file(path);
    if (!cfg.is_object()) throw_bad_field(src, "top level", "expected a JSON object");
    TokenizerConfig c;
    c.bos_token = token_string(cfg, "bos_token", src);
    c.eos_token = token_string(cfg, "eos_token", src);
    c.pad_token = token_string(cfg, "pad_token", src);
    c.unk_token = token_string(cfg, "unk_token", src);
    c.add_bos_token = optional_bool(cfg, "add_bos_token", src);
    c.add_eos_token = optional_bool(cfg, "add_eos_token", src);
    c.tokenizer_class = get_string_or(cfg, "tokenizer_class", "", src, "tokenizer_class");
    if (const Json* t = find(cfg, "chat_template"); t && !t->is_null()) {
        if (t->is_string()) {
            c.chat_template = t->get<std::string>();
        } else if (t->is_array()) {
            for (size_t i = 0; i < t->size(); ++i) {
                const Json& e = (*t)[i];
                std::string where = "chat_template[" + std::to_string(i) + "]";
                std::string name = get_string(e, "name", src, where);
                std::string body = get_string(e, "template", src, where);
                if (name == "default" || (i == 0)) c.chat_template = body;
                if (name == "default") break;
            }
        } else {
            throw_bad_field(src, "chat_template", "must be a string or a list of {name, template}");
        }
    }
    if (c.chat_template.empty()) {
        auto jinja = path.parent_path() / "chat_template.jinja";
        if (std::filesystem::is_regular_file(jinja)) c.chat_template = read_file(jinja);
    }
    return c;
}

}  // namespace tandem::tok
