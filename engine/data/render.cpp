// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Rendering records into token ids + labels (loss masks).
// Decisions:
//  * Chat-style records go through the chat template prefix by prefix: messages[:i] with
//    add_generation_prompt=true ends where assistant turn i's reply starts; messages[:i+1] ends after it.
//    Each rendering must be a prefix of the whole conversation's rendering; then the text is cut into
//    prompt / reply spans that are tokenized one by one and concatenated. This is what LLaMA-Factory-style
//    trainers do, and it needs no character->token offset mapping (which a tokenizer may not give exactly
//    at special tokens). The price: a BPE merge across a span boundary is not made; inference renders the
//    prompt the same way, so the model sees the same split it was trained on.
//  * The trained part of a reply ends with the last EOS/end-of-turn token string inside it (Qwen3
//    "<|im_end|>", Llama 3 "<|eot_id|>"); what the template writes after it (a "\n" separator) is masked.
//    When a reply holds no EOS (e.g. the ChatML built-in on a model whose EOS is "</s>"), trailing whitespace
//    is masked and EOS is appended (add_eos_if_missing), so the model learns to stop.
//  * Templates that are not prefix-stable (Qwen3 writes an empty <think></think> block only into the last
//    assistant turn) fall back to one sample per assistant turn: messages[:i+1], training only turn i, which is
//    exactly what the model sees at inference for that turn. If even that is not prefix-stable, or a reply's
//    text cannot be found in its span, the record is reported invalid — masks are never guessed.
#include <algorithm>

#include "tandem/data.h"
#include "tandem/error.h"

namespace tandem {

using json = nlohmann::ordered_json;  // keeps key order: tool schemas must print as written (tojson)

namespace {

constexpr int32_t kIgnore = -100;

struct SampleBuilder {
    std::vector<int32_t> tokens;  // [t]
    std::vector<int32_t> labels;  // [t]
    void add(const std::vector<int32_t>& ids, bool trained) {
        tokens.insert(tokens.end(), ids.begin(), ids.end());
        for (int32_t id : ids) labels.push_back(trained ? id : kIgnore);
    }
    void add(int32_t id, bool trained) {
        tokens.push_back(id);
        labels.push_back(trained ? id : kIgnore);
    }
};

struct Skip {
    InvalidReason reason;
    std::string message;
};

void emit(SampleBuilder& s, uint32_t record, const RenderOptions& options, TokenizedDataset& out) {
    if (options.train_on_all_tokens) s.labels = s.tokens;
    if (options.max_seq_len > 0 && s.tokens.size() > static_cast<size_t>(options.max_seq_len)) {
        s.tokens.resize(options.max_seq_len);  // keep the head: the prompt stays intact, the reply's end goes
        s.labels.resize(options.max_seq_len);
        ++out.truncated;
    }
    if (s.tokens.empty()) {
        ++out.dropped;
        return;
    }
    s.labels[0] = kIgnore;  // never the target of the previous sample's last token (see data.h)
    if (std::all_of(s.labels.begin(), s.labels.end(), [](int32_t l) { return l == kIgnore; })) {
        ++out.dropped;
        return;
    }
    out.tokens.insert(out.tokens.end(), s.tokens.begin(), s.tokens.end());
    out.labels.insert(out.labels.end(), s.labels.begin(), s.labels.end());
    out.offsets.push_back(static_cast<int64_t>(out.tokens.size()));
    out.record.push_back(record);
}

bool starts_with(std::string_view s, std::string_view prefix) {
    return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

std::string_view trim(std::string_view s) {
    const auto ws = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    while (!s.empty() && ws(s.front())) s.remove_prefix(1);
    while (!s.empty() && ws(s.back())) s.remove_suffix(1);
    return s;
}

// The messages as the template sees them. Tool calls become structured tool_calls for templates that read
// them (Qwen3), else stay as the call's JSON text in content, so every template trains on the call.
json template_messages(const Record& r, const TextCodec& codec) {
    json out = json::array();
    for (const Message& m : r.messages) {
        json j = {{"role", m.role}, {"content", m.content}};
        if (m.is_tool_call) {
            if (!m.tool_calls.is_null()) {
                if (codec.template_has_tool_calls)
                    j["tool_calls"] = m.tool_calls;
                else if (trim(m.content).empty())
                    j["content"] = m.tool_calls.dump();
            } else if (codec.template_has_tool_calls) {
                json call = json::parse(m.content, nullptr, false);
                if (!call.is_discarded() && call.is_object() && call.contains("name")) {
                    json fn = {{"name", call["name"]},
                               {"arguments", call.contains("arguments") ? call["arguments"] : json::object()}};
                    j["content"] = "";
                    j["tool_calls"] = json::array({{{"type", "function"}, {"function", fn}}});
                }
            }
        }
        out.push_back(std::move(j));
    }
    return out;
}

json prefix(const json& messages, size_t n) {
    return json(messages.begin(), messages.begin() + n);
}

std::string render(const TextCodec& codec, const json& messages, bool gen, const json& extra) {
    try {
        return codec.render(messages, gen, extra);
    } catch (const Error& e) {
        throw Skip{InvalidReason::TemplateError, std::string("the chat template refused it: ") + e.what()};
    }
}

// Adds one assistant reply span: trained up to its end-of-turn token, the separator after it masked.
void add_reply(SampleBuilder& s, std::string_view reply, const Message& m, size_t turn, const TextCodec& codec,
               const RenderOptions& options) {
    size_t cut = std::string_view::npos;
    if (!codec.eos_token.empty()) {
        const size_t p = reply.rfind(codec.eos_token);
        if (p != std::string_view::npos) cut = p + codec.eos_token.size();
    }
    const bool has_eos = cut != std::string_view::npos;
    if (!has_eos) {  // mask only the trailing separator whitespace
        cut = reply.size();
        while (cut > 0 &&
               (reply[cut - 1] == ' ' || reply[cut - 1] == '\n' || reply[cut - 1] == '\t' || reply[cut - 1] == '\r'))
            --cut;
    }
    std::string_view trained = reply.substr(0, cut), tail = reply.substr(cut);
    // The reply's own text must be inside its span; otherwise the spans were not where we think.
    // Templates may trim it or drop a leading <think> block (Qwen3), so only its end is compared.
    if (!m.is_tool_call) {
        std::string_view content = trim(m.content);
        if (content.size() > 64) content = content.substr(content.size() - 64);
        if (trained.find(content) == std::string_view::npos)
            throw Skip{InvalidReason::NotPrefixStable,
                       "assistant turn " + std::to_string(turn) +
                           ": its text is not where the chat template's prefix renderings put it"};
    }
    if (!trained.empty()) s.add(codec.encode(trained), true);
    if (!has_eos && options.add_eos_if_missing && codec.eos_id) s.add(*codec.eos_id, true);
    if (!tail.empty()) s.add(codec.encode(tail), false);
}

void tokenize_chat(const Record& r, uint32_t index, const TextCodec& codec, const RenderOptions& options,
                   TokenizedDataset& out) {
    const json messages = template_messages(r, codec);
    json extra = options.template_vars.is_object() ? options.template_vars : json::object();
    if (!r.tools.is_null() && codec.template_has_tools) extra["tools"] = r.tools;

    std::vector<size_t> turns;  // indices of assistant messages
    for (size_t i = 0; i < r.messages.size(); ++i)
        if (r.messages[i].role == "assistant") turns.push_back(i);

    // A template that ignores add_generation_prompt would put the assistant header into the trained span.
    if (render(codec, prefix(messages, turns[0]), true, extra) ==
        render(codec, prefix(messages, turns[0]), false, extra))
        throw Skip{InvalidReason::TemplateError,
                   "the chat template ignores add_generation_prompt, so replies cannot be told from their "
                   "headers; choose a built-in template"};

    const std::string full = render(codec, messages, false, extra);
    struct Cut {
        size_t prompt_end, reply_end;
    };
    std::vector<Cut> cuts;
    bool stable = true;
    size_t pos = 0;
    for (size_t i : turns) {
        const std::string p = render(codec, prefix(messages, i), true, extra);
        const std::string e = render(codec, prefix(messages, i + 1), false, extra);
        if (!starts_with(full, p) || !starts_with(full, e) || p.size() < pos || e.size() < p.size()) {
            stable = false;
            break;
        }
        cuts.push_back({p.size(), e.size()});
        pos = e.size();
    }

    if (stable) {
        SampleBuilder s;
        pos = 0;
        for (size_t k = 0; k < turns.size(); ++k) {
            const std::string_view f(full);
            if (cuts[k].prompt_end > pos) s.add(codec.encode(f.substr(pos, cuts[k].prompt_end - pos)), false);
            add_reply(s, f.substr(cuts[k].prompt_end, cuts[k].reply_end - cuts[k].prompt_end), r.messages[turns[k]],
                      turns[k], codec, options);
            pos = cuts[k].reply_end;
        }
        if (pos < full.size()) s.add(codec.encode(std::string_view(full).substr(pos)), false);
        emit(s, index, options, out);
        return;
    }

    // Not prefix-stable: one sample per assistant turn, each rendered as if that turn were the last.
    std::vector<SampleBuilder> samples;
    for (size_t i : turns) {
        const std::string p = render(codec, prefix(messages, i), true, extra);
        const std::string e = render(codec, prefix(messages, i + 1), false, extra);
        if (!starts_with(e, p))
            throw Skip{InvalidReason::NotPrefixStable,
                       "the chat template does not render assistant turn " + std::to_string(i) +
                           " as a continuation of its generation prompt, so its reply cannot be masked"};
        SampleBuilder s;
        s.add(codec.encode(p), false);
        add_reply(s, std::string_view(e).substr(p.size()), r.messages[i], i, codec, options);
        samples.push_back(std::move(s));
    }
    ++out.split_conversations;
    for (auto& s : samples) emit(s, index, options, out);
}

}  // namespace

void tokenize_record(const Record& r, uint32_t index, const TextCodec& codec, const RenderOptions& options,
                     TokenizedDataset& out) {
    if (out.offsets.empty()) out.offsets.push_back(0);
    if (!r.messages.empty()) {
        if (!codec.render) throw_invalid("no chat template to render conversations with");
        tokenize_chat(r, index, codec, options, out);
        return;
    }
    SampleBuilder s;
    if (codec.adds_bos && codec.bos_id) s.add(*codec.bos_id, false);
    if (!r.text.empty()) {
        s.add(codec.encode(r.text), true);
    } else {
        if (!r.prompt.empty()) s.add(codec.encode(r.prompt), false);
        s.add(codec.encode(r.completion), true);
    }
    if (codec.eos_id) s.add(*codec.eos_id, true);
    emit(s, index, options, out);
}

TokenizedDataset tokenize_dataset(const Dataset& dataset, const TextCodec& codec, const RenderOptions& options) {
    TokenizedDataset out;
    out.offsets.push_back(0);
    out.template_name = codec.template_name;
    out.invalid.max_kept = dataset.invalid.max_kept;
    for (size_t i = 0; i < dataset.records.size(); ++i) {
        try {
            tokenize_record(dataset.records[i], static_cast<uint32_t>(i), codec, options, out);
        } catch (const Skip& e) {
            out.invalid.add({dataset.location(dataset.records[i].location), e.reason, e.message});
        }
    }
    if (out.size() == 0) {
        std::string why;
        if (!out.invalid.first.empty())
            why = "; first problem: " + out.invalid.first[0].location + ": " + out.invalid.first[0].message;
        else if (out.dropped)
            why = "; all " + std::to_string(out.dropped) +
                  " samples were dropped: nothing trainable within "
                  "max_seq_len=" +
                  std::to_string(options.max_seq_len) + " tokens (raise it)";
        throw_invalid((dataset.files.empty() ? std::string("dataset") : dataset.files[0].string()) +
                      ": no trainable samples" + why);
    }
    return out;
}

std::span<const int32_t> TokenizedDataset::sample_tokens(size_t i) const {
    return {tokens.data() + offsets[i], static_cast<size_t>(offsets[i + 1] - offsets[i])};
}

std::span<const int32_t> TokenizedDataset::sample_labels(size_t i) const {
    return {labels.data() + offsets[i], static_cast<size_t>(offsets[i + 1] - offsets[i])};
}

int64_t TokenizedDataset::trained_tokens() const {
    return std::count_if(labels.begin(), labels.end(), [](int32_t l) { return l != kIgnore; });
}

}  // namespace tandem
