// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Post-processors (see post_processor.h).
#include "tokenizer/post_processor.h"

#include <cstdint>
#include <sstream>

namespace tandem::tok {

namespace {

// A template is a list of items: either the sequence itself or a run of fixed ids.
class TemplateProcessor final : public PostProcessor {
public:
    struct Item {
        bool is_sequence = false;
        std::vector<int32_t> ids;
    };
    std::vector<Item> items;
    void process(std::vector<int32_t>& ids) const override {
        std::vector<int32_t> out;
        out.reserve(ids.size() + 4);
        for (const Item& it : items) {
            if (it.is_sequence)
                out.insert(out.end(), ids.begin(), ids.end());
            else
                out.insert(out.end(), it.ids.begin(), it.ids.end());
        }
        ids = std::move(out);
    }
};

class NoopProcessor final : public PostProcessor {
public:
    void process(std::vector<int32_t>&) const override {}
};

class SequenceProcessor final : public PostProcessor {
public:
    std::vector<std::unique_ptr<PostProcessor>> steps;
    void process(std::vector<int32_t>& ids) const override {
        for (const auto& s : steps) s->process(ids);
    }
};

// A token id as written in the file: an integer in [0, 2^31), never truncated to int32.
int32_t token_id(const Json& v, const Source& src, const std::string& where, const char* what) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
        throw_bad_field(src, where, std::string(what) + " must be token ids (integers from 0), got " + v.dump());
    return static_cast<int32_t>(v.get<int64_t>());
}

// Resolves a SpecialToken id through the template's "special_tokens" table.
std::vector<int32_t> special_ids(const Json& j, const std::string& name, const Source& src, const std::string& where) {
    const Json* table = find(j, "special_tokens");
    const Json* entry = table ? find(*table, name.c_str()) : nullptr;
    if (!entry) throw_bad_field(src, where, "special token \"" + name + "\" is not in \"special_tokens\"");
    const Json& ids = require(*entry, "ids", src, where + ".special_tokens");
    if (!ids.is_array()) throw_bad_field(src, where, "\"ids\" must be a list");
    std::vector<int32_t> out;
    for (const Json& v : ids) out.push_back(token_id(v, src, where, "\"ids\""));
    return out;
}

std::unique_ptr<PostProcessor> make_template(const Json& j, const Source& src, const std::string& where) {
    auto t = std::make_unique<TemplateProcessor>();
    const Json& single = require(j, "single", src, where);
    if (single.is_string()) {
        // "[CLS] $A [SEP]" form: "$", "$A", "$0", "$A:0" name the sequence; "$B..." belongs to pairs.
        std::istringstream words(single.get<std::string>());
        std::string w;
        while (words >> w) {
            std::string name = w.substr(0, w.find(':'));
            if (name == "$" || name == "$A" || name == "$0")
                t->items.push_back({true, {}});
            else if (!name.empty() && name[0] == '$')
                continue;
            else
                t->items.push_back({false, special_ids(j, name, src, where)});
        }
        return t;
    }
    if (!single.is_array()) throw_bad_field(src, where, "\"single\" must be a list or a string");
    for (const Json& item : single) {
        if (const Json* seq = find(item, "Sequence")) {
            std::string id = get_string_or(*seq, "id", "A", src, where);
            if (id == "A") t->items.push_back({true, {}});
        } else if (const Json* sp = find(item, "SpecialToken")) {
            t->items.push_back({false, special_ids(j, get_string(*sp, "id", src, where), src, where)});
        } else {
            throw_bad_field(src, where, "template items must be {\"Sequence\": ...} or {\"SpecialToken\": ...}");
        }
    }
    return t;
}

// RobertaProcessing / BertProcessing: "cls": ["<s>", 0], "sep": ["</s>", 2] around the sequence.
std::unique_ptr<PostProcessor> make_cls_sep(const Json& j, const Source& src, const std::string& where) {
    auto read = [&](const char* key) {
        const Json& v = require(j, key, src, where);
        if (!v.is_array() || v.size() != 2 || !v[1].is_number_integer())
            throw_bad_field(src, where, std::string("\"") + key + "\" must be [token, id]");
        return token_id(v[1], src, where, key);
    };
    auto t = std::make_unique<TemplateProcessor>();
    t->items.push_back({false, {read("cls")}});
    t->items.push_back({true, {}});
    t->items.push_back({false, {read("sep")}});
    return t;
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const Json& j, const Source& src, const std::string& where) {
    std::string type = component_type(j, src, where);
    if (type == "TemplateProcessing") return make_template(j, src, where);
    if (type == "ByteLevel") return std::make_unique<NoopProcessor>();
    if (type == "RobertaProcessing" || type == "BertProcessing") return make_cls_sep(j, src, where);
    if (type == "Sequence") {
        auto seq = std::make_unique<SequenceProcessor>();
        const Json& list = require(j, "processors", src, where);
        if (!list.is_array()) throw_bad_field(src, where, "\"processors\" must be a list");
        for (size_t i = 0; i < list.size(); ++i)
            seq->steps.push_back(make_post_processor(list[i], src, where + ".processors[" + std::to_string(i) + "]"));
        return seq;
    }
    throw_unsupported_type(src, "post_processor", type,
                           "TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing, Sequence");
}

}  // namespace tandem::tok
