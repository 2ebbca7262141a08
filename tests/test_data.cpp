// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// engine/data: dataset readers (every format, auto-detection, every kind of bad input), rendering and loss
// masks (with a fake byte-level codec, and with the real Qwen3 / Llama 3 tokenizers), packing invariants,
// the summary, and the real datasets in ../shared/assets/datasets.
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "tandem/data.h"
#include "tandem/error.h"
#include "tandem/tokenizer.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::test;
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

std::optional<Error> error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e;
    }
    return std::nullopt;
}

bool contains(std::string_view hay, std::string_view needle) {
    return hay.find(needle) != std::string_view::npos;
}

#define EXPECT_ERROR(expr, cat, needle)                                                                            \
    do {                                                                                                           \
        const auto err_ = error_of([&] { (void)(expr); });                                                         \
        QVERIFY2(err_.has_value(), "no error thrown by " #expr);                                                   \
        QVERIFY2(err_->category() == (cat), err_->what());                                                         \
        QVERIFY2(contains(err_->what(), needle),                                                                   \
                 qPrintable(QString("message lacks '%1': %2").arg(QString::fromStdString(needle), err_->what()))); \
    } while (0)

// A byte-level fake tokenizer: every byte is its own id, a few special strings get ids from 256 on.
const std::vector<std::string> kSpecials = {"<|im_start|>", "<|im_end|>", "</s>", "<s>", "<think>", "</think>"};

std::vector<int32_t> fake_encode(std::string_view s) {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < s.size();) {
        bool special = false;
        for (size_t k = 0; k < kSpecials.size(); ++k)
            if (s.substr(i, kSpecials[k].size()) == kSpecials[k]) {
                ids.push_back(256 + static_cast<int32_t>(k));
                i += kSpecials[k].size();
                special = true;
                break;
            }
        if (!special) ids.push_back(static_cast<unsigned char>(s[i++]));
    }
    return ids;
}

std::string fake_decode(std::span<const int32_t> ids) {
    std::string s;
    for (int32_t id : ids) s += id >= 256 ? kSpecials[id - 256] : std::string(1, static_cast<char>(id));
    return s;
}

// ChatML, like the built-in template.
std::string render_chatml(const json& messages, bool gen, const json&) {
    std::string s;
    for (const auto& m : messages)
        s += "<|im_start|>" + m["role"].get<std::string>() + "\n" + m["content"].get<std::string>() + "<|im_end|>\n";
    if (gen) s += "<|im_start|>assistant\n";
    return s;
}

// Like Qwen3: the final assistant turn after the last user message gets an empty think block, earlier ones
// do not — so the conversation is not prefix-stable. enable_thinking=false puts the block in the prompt.
std::string render_qwen_like(const json& messages, bool gen, const json& extra) {
    size_t last_user = 0;
    for (size_t i = 0; i < messages.size(); ++i)
        if (messages[i]["role"] == "user") last_user = i;
    std::string s;
    for (size_t i = 0; i < messages.size(); ++i) {
        const auto& m = messages[i];
        s += "<|im_start|>" + m["role"].get<std::string>() + "\n";
        if (m["role"] == "assistant" && i + 1 == messages.size() && i > last_user) s += "<think>\n\n</think>\n\n";
        s += m["content"].get<std::string>() + "<|im_end|>\n";
    }
    if (gen) {
        s += "<|im_start|>assistant\n";
        if (extra.value("enable_thinking", true) == false) s += "<think>\n\n</think>\n\n";
    }
    return s;
}

// Writes a plain "### Response:" block that holds no EOS: EOS must be appended.
std::string render_no_eos(const json& messages, bool gen, const json&) {
    std::string s;
    for (const auto& m : messages) {
        if (m["role"] == "user")
            s += "### Q:\n" + m["content"].get<std::string>() + "\n\n";
        else if (m["role"] == "assistant")
            s += "### A:\n" + m["content"].get<std::string>() + "\n\n";
        else
            throw Error(ErrorCategory::InvalidInput, "role " + m["role"].get<std::string>() + " not supported");
    }
    if (gen) s += "### A:\n";
    return s;
}

std::string render_ignores_generation_prompt(const json& messages, bool, const json& extra) {
    return render_chatml(messages, false, extra);
}

TextCodec fake_codec(std::function<std::string(const json&, bool, const json&)> render,
                     std::string eos_token = "<|im_end|>") {
    TextCodec c;
    c.encode = fake_encode;
    c.render = std::move(render);
    c.eos_token = eos_token;
    c.eos_id = eos_token.empty() ? std::nullopt : std::optional<int32_t>(fake_encode(eos_token).at(0));
    c.bos_id = 256 + 3;  // "<s>"
    c.template_name = "fake";
    return c;
}

// Text of the trained tokens of sample i, with a '|' wherever the trained tokens are not contiguous.
template <class Decode>
std::string trained_text(const TokenizedDataset& d, size_t i, Decode decode) {
    const auto tok = d.sample_tokens(i);
    const auto lab = d.sample_labels(i);
    std::string out;
    std::vector<int32_t> run;
    for (size_t t = 0; t <= tok.size(); ++t) {
        const bool trained = t < tok.size() && lab[t] != -100;
        if (trained) {
            QTEST_ASSERT(lab[t] == tok[t]);
            run.push_back(tok[t]);
        } else if (!run.empty()) {
            if (!out.empty()) out += "|";
            out += decode(run);
            run.clear();
        }
    }
    return out;
}

Record chat_record(std::vector<std::pair<std::string, std::string>> turns) {
    Record r;
    for (auto& [role, content] : turns) {
        Message m;
        m.role = role;
        m.content = content;
        r.messages.push_back(m);
    }
    return r;
}

Dataset dataset_of(std::vector<Record> records) {
    Dataset d;
    d.files = {"mem.jsonl"};
    d.format = DatasetFormat::Chat;
    d.records = std::move(records);
    d.total_records = static_cast<int64_t>(d.records.size());
    return d;
}

// A TokenizedDataset with samples of the given lengths (tokens = 1000 + sample index, all trained but the first).
TokenizedDataset synthetic(const std::vector<int32_t>& lengths) {
    TokenizedDataset d;
    d.offsets.push_back(0);
    for (size_t i = 0; i < lengths.size(); ++i) {
        for (int32_t t = 0; t < lengths[i]; ++t) {
            d.tokens.push_back(1000 + static_cast<int32_t>(i));
            d.labels.push_back(t == 0 ? -100 : 1000 + static_cast<int32_t>(i));
        }
        d.offsets.push_back(static_cast<int64_t>(d.tokens.size()));
        d.record.push_back(static_cast<uint32_t>(i));
    }
    return d;
}

std::vector<int32_t> random_lengths(size_t n, int32_t max_len, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<int32_t> v(n);
    for (auto& l : v) l = 1 + static_cast<int32_t>(rng() % static_cast<uint64_t>(max_len));
    return v;
}

// Every invariant a batch must keep. Returns the samples it holds.
void check_batch(const PackedBatch& b, const TokenizedDataset& d, const PackOptions& o) {
    const int32_t T = o.token_budget;
    QCOMPARE(b.token_budget, T);
    QCOMPARE(static_cast<int32_t>(b.tokens.size()), T);
    QCOMPARE(static_cast<int32_t>(b.labels.size()), T);
    QCOMPARE(static_cast<int32_t>(b.position_ids.size()), T);
    QCOMPARE(static_cast<int32_t>(b.cu_seqlens.size()), b.num_samples + 1);
    QCOMPARE(static_cast<int32_t>(b.samples.size()), b.num_samples);
    QCOMPARE(b.cu_seqlens[0], 0);
    QCOMPARE(b.cu_seqlens.back(), b.num_tokens);
    QVERIFY(b.num_tokens <= T);
    std::vector<char> real(T, 0);
    int32_t max_len = 0;
    for (int32_t i = 0; i < b.num_samples; ++i) {
        const int32_t len = b.cu_seqlens[i + 1] - b.cu_seqlens[i];
        QCOMPARE(len, d.length(b.samples[i]));
        max_len = std::max(max_len, len);
        const int32_t off = b.sample_offset(i);
        if (!o.packing) QVERIFY(len <= b.row_len);
        const auto tok = d.sample_tokens(b.samples[i]);
        const auto lab = d.sample_labels(b.samples[i]);
        for (int32_t t = 0; t < len; ++t) {
            QVERIFY(!real[off + t]);
            real[off + t] = 1;
            QCOMPARE(b.tokens[off + t], tok[t]);
            QCOMPARE(b.position_ids[off + t], t);
            QCOMPARE(b.labels[off + t], t == 0 ? -100 : lab[t]);
        }
    }
    QCOMPARE(b.max_seqlen, max_len);
    int32_t label_tokens = 0;
    for (int32_t t = 0; t < T; ++t) {
        if (!real[t]) {
            QCOMPARE(b.tokens[t], o.pad_id);
            QCOMPARE(b.labels[t], -100);
            QCOMPARE(b.position_ids[t], 0);
        }
        label_tokens += b.labels[t] != -100;
    }
    QCOMPARE(b.num_label_tokens, label_tokens);
}

}  // namespace

class TestData : public QObject {
    Q_OBJECT

    QTemporaryDir tmp_;
    fs::path file(const std::string& name, const std::string& content) {
        const fs::path p = fs::path(tmp_.path().toStdString()) / name;
        write_file(p, content);
        return p;
    }

private slots:
    // ----- readers ------------------------------------------------------------------------------------------

    void alpaca_json_array() {
        const auto p = file("a.json", R"([
  {"instruction": "Add", "input": "1 and 2", "output": "3"},
  {"instruction": "Greet", "input": "", "output": "Hello", "system": "Be kind."},
  {"instruction": "Q2", "output": "A2", "history": [["Q1", "A1"]]}
])");
        const Dataset d = read_dataset(p);
        QCOMPARE(d.format, DatasetFormat::Alpaca);
        QCOMPARE(d.records.size(), size_t(3));
        QCOMPARE(d.total_records, int64_t(3));
        const auto& m0 = d.records[0].messages;
        QCOMPARE(m0.size(), size_t(2));
        QCOMPARE(m0[0].role, std::string("user"));
        QCOMPARE(m0[0].content, std::string("Add\n\n1 and 2"));
        QCOMPARE(m0[1].role, std::string("assistant"));
        QCOMPARE(m0[1].content, std::string("3"));
        const auto& m1 = d.records[1].messages;
        QCOMPARE(m1.size(), size_t(3));
        QCOMPARE(m1[0].role, std::string("system"));
        QCOMPARE(m1[1].content, std::string("Greet"));  // empty input: no "\n\n"
        const auto& m2 = d.records[2].messages;
        QCOMPARE(m2.size(), size_t(4));
        QCOMPARE(m2[0].content, std::string("Q1"));
        QCOMPARE(m2[1].content, std::string("A1"));
        QCOMPARE(m2[3].content, std::string("A2"));
        QCOMPARE(d.records[1].location.line, uint32_t(3));
        QCOMPARE(d.records[1].location.element, int64_t(1));
    }

    void chat_jsonl() {
        const auto p =
            file("c.jsonl",
                 "{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": "
                 "\"U\"}, {\"role\": \"assistant\", \"content\": \"A\"}, {\"role\": \"user\", \"content\": "
                 "\"trailing\"}]}\n\n"
                 "{\"messages\": [{\"role\": \"user\", \"content\": \"U\"}, {\"role\": \"assistant\", "
                 "\"content\": null, \"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", "
                 "\"arguments\": {}}}]}, {\"role\": \"tool\", \"content\": \"42\"}, {\"role\": "
                 "\"assistant\", \"content\": \"It is 42.\"}]}\n");
        const Dataset d = read_dataset(p);
        QCOMPARE(d.format, DatasetFormat::Chat);
        QCOMPARE(d.records.size(), size_t(2));
        QCOMPARE(d.records[0].messages.size(), size_t(3));  // the trailing user turn trains nothing: dropped
        QCOMPARE(d.records[1].location.line, uint32_t(3));  // blank line 2 skipped, lines still counted
        QVERIFY(d.records[1].messages[1].is_tool_call);
        QVERIFY(d.records[1].messages[1].tool_calls.is_array());
        QCOMPARE(d.records[1].messages[2].role, std::string("tool"));
    }

    void sharegpt_roles() {
        // Built with nlohmann: moc cannot lex raw strings that hold backslashes.
        const json conv =
            json::array({{{"from", "human"}, {"value", "Hi"}},
                         {{"from", "gpt"}, {"value", "Hello"}},
                         {{"from", "user"}, {"value", "call f"}},
                         {{"from", "function_call"}, {"value", "{\"name\": \"f\", \"arguments\": {\"x\": 1}}"}},
                         {{"from", "observation"}, {"value", "{\"y\": 2}"}},
                         {{"from", "assistant"}, {"value", "y is 2"}}});
        const json rec = {{"system", "Sys"}, {"tools", "[{\"name\": \"f\"}]"}, {"conversations", conv}};
        const auto p = file("s.json", json::array({rec}).dump(2));
        const Dataset d = read_dataset(p);
        QCOMPARE(d.format, DatasetFormat::ShareGpt);
        const auto& m = d.records[0].messages;
        const std::vector<std::string> roles = {"system",    "user", "assistant", "user",
                                                "assistant", "tool", "assistant"};
        QCOMPARE(m.size(), roles.size());
        for (size_t i = 0; i < roles.size(); ++i) QCOMPARE(m[i].role, roles[i]);
        QVERIFY(m[4].is_tool_call);
        QVERIFY(d.records[0].tools.is_array());
        QCOMPARE(d.records[0].tools[0]["name"].get<std::string>(), std::string("f"));
    }

    void prompt_completion_and_text() {
        const auto pc = read_dataset(file("pc.jsonl", "{\"prompt\": \"2+2=\", \"completion\": \"4\"}\n"));
        QCOMPARE(pc.format, DatasetFormat::PromptCompletion);
        QCOMPARE(pc.records[0].prompt, std::string("2+2="));
        QCOMPARE(pc.records[0].completion, std::string("4"));
        const auto t = read_dataset(file("t.jsonl", "{\"text\": \"one\"}\n{\"text\": \"two\"}"));
        QCOMPARE(t.format, DatasetFormat::Text);
        QCOMPARE(t.records.size(), size_t(2));
        QCOMPARE(t.records[1].text, std::string("two"));
    }

    void json_file_holding_jsonl() {
        const auto d = read_dataset(file("lines.json", "{\"text\": \"a\"}\n{\"text\": \"b\"}\n{\"text\": \"c\"}\n"));
        QCOMPARE(d.records.size(), size_t(3));
        QCOMPARE(d.records[2].location.line, uint32_t(3));
        QCOMPARE(d.records[2].location.element, int64_t(-1));
    }

    void single_object_is_not_jsonl() {
        const auto p = file("one.json", "{\n  \"data\": [\n    {\"text\": \"a\"}\n  ]\n}\n");
        EXPECT_ERROR(read_dataset(p), ErrorCategory::InvalidInput, "holds one JSON object");
        EXPECT_ERROR(read_dataset(p), ErrorCategory::InvalidInput, "\"data\"");
    }

    void text_file_splits() {
        const auto p = file("doc.txt", "First doc line 1\nline 2\n\n\n  \nSecond doc\r\n\r\nThird\n");
        const auto blank = read_dataset(p);
        QCOMPARE(blank.format, DatasetFormat::Text);
        QCOMPARE(blank.records.size(), size_t(3));
        QCOMPARE(blank.records[0].text, std::string("First doc line 1\nline 2"));
        QCOMPARE(blank.records[1].text, std::string("Second doc"));  // \r removed
        QCOMPARE(blank.records[1].location.line, uint32_t(6));
        QCOMPARE(blank.records[2].location.line, uint32_t(8));
        ReadOptions lines;
        lines.text_split = TextSplit::Lines;
        QCOMPARE(read_dataset(p, lines).records.size(), size_t(4));
        ReadOptions whole;
        whole.text_split = TextSplit::WholeFile;
        QCOMPARE(read_dataset(p, whole).records.size(), size_t(1));
        ReadOptions wrong;
        wrong.format = DatasetFormat::Alpaca;
        EXPECT_ERROR(read_dataset(p, wrong), ErrorCategory::InvalidInput, "plain text");
    }

    void auto_detection() {
        QCOMPARE(format_from_keys({"instruction", "input", "output"}), DatasetFormat::Alpaca);
        QCOMPARE(format_from_keys({"messages"}), DatasetFormat::Chat);
        QCOMPARE(format_from_keys({"id", "conversations"}), DatasetFormat::ShareGpt);
        QCOMPARE(format_from_keys({"prompt", "completion"}), DatasetFormat::PromptCompletion);
        QCOMPARE(format_from_keys({"text", "meta"}), DatasetFormat::Text);
        QCOMPARE(format_from_keys({"instruction"}), DatasetFormat::Auto);
        // The majority of the first records decides; a stray record is then invalid, not a different format.
        std::string s;
        for (int i = 0; i < 20; ++i) s += "{\"prompt\": \"p\", \"completion\": \"c\"}\n";
        s = "{\"text\": \"odd one\"}\n" + s;
        ReadOptions o;
        o.max_invalid_fraction = 0.5;
        const auto d = read_dataset(file("vote.jsonl", s), o);
        QCOMPARE(d.format, DatasetFormat::PromptCompletion);
        QCOMPARE(d.invalid.count, int64_t(1));
        QCOMPARE(d.invalid.by_reason.at("missing_key"), int64_t(1));
        QVERIFY(contains(d.invalid.first[0].location, "vote.jsonl:1"));
        // An explicit format overrides detection.
        ReadOptions text;
        text.format = DatasetFormat::Text;
        QCOMPARE(read_dataset(file("t2.jsonl", "{\"text\": \"x\", \"prompt\": \"p\", \"completion\": \"c\"}\n"), text)
                     .format,
                 DatasetFormat::Text);
        QCOMPARE(parse_dataset_format("sharegpt"), std::optional(DatasetFormat::ShareGpt));
        QCOMPARE(parse_dataset_format("nope"), std::optional<DatasetFormat>());
    }

    void unknown_format_names_keys() {
        const auto p = file("unknown.jsonl", "{\"question\": \"q\", \"answer\": \"a\"}\n");
        EXPECT_ERROR(read_dataset(p), ErrorCategory::InvalidInput, "\"answer\", \"question\"");
        EXPECT_ERROR(read_dataset(p), ErrorCategory::InvalidInput, "alpaca needs \"instruction\" and \"output\"");
        EXPECT_ERROR(read_dataset(p), ErrorCategory::InvalidInput, "unknown.jsonl");
    }

    // ----- bad input ----------------------------------------------------------------------------------------

    void invalid_records_are_counted() {
        std::string s;
        for (int i = 0; i < 60; ++i) s += "{\"instruction\": \"i\", \"input\": \"\", \"output\": \"o\"}\n";
        const std::vector<std::pair<std::string, std::string>> bad = {
            {"{\"instruction\": \"i\", \"output\": 5}", "wrong_type"},
            {"{\"instruction\": \"i\", \"output\": \"o\"", "json_syntax"},
            {"{\"instruction\": \"i\"}", "missing_key"},
            {"{\"instruction\": \"i\", \"output\": \"  \"}", "empty"},
            {"[1, 2]", "not_an_object"},
            {"{\"instruction\": \"caf\xC3\", \"output\": \"o\"}", "invalid_utf8"},
        };
        for (const auto& [line, reason] : bad) s += line + "\n";
        ReadOptions o;
        o.max_reported_invalid = 3;
        const auto d = read_dataset(file("mixed.jsonl", s), o);
        QCOMPARE(d.records.size(), size_t(60));
        QCOMPARE(d.total_records, int64_t(66));
        QCOMPARE(d.invalid.count, int64_t(6));
        QCOMPARE(d.invalid.first.size(), size_t(3));
        for (const auto& [line, reason] : bad) QVERIFY2(d.invalid.by_reason.count(reason), reason.c_str());
        QVERIFY(contains(d.invalid.first[0].location, "mixed.jsonl:61"));
        QVERIFY(contains(d.invalid.first[0].message, "\"output\" is a number, expected a string"));
        QVERIFY(contains(d.invalid.first[1].location, "mixed.jsonl:62"));
        QVERIFY(contains(d.invalid.first[1].message, "invalid JSON at line 62"));
    }

    // Found by fuzz_dataset: nlohmann refuses a number beyond double's range with out_of_range (not
    // parse_error), which escaped read_dataset as a non-tandem exception instead of one invalid record.
    void number_beyond_double_is_one_invalid_record() {
        std::string s;
        for (int i = 0; i < 20; ++i) s += "{\"text\": \"t\"}\n";
        const auto d = read_dataset(file("huge.jsonl", s + "{\"text\": \"x\", \"n\": 1e309}\n"));
        QCOMPARE(d.records.size(), size_t(20));
        QCOMPARE(d.invalid.count, int64_t(1));
        QCOMPARE(d.invalid.by_reason.count("json_syntax"), size_t(1));
        QVERIFY(contains(d.invalid.first[0].location, "huge.jsonl:21"));
        QVERIFY(contains(d.invalid.first[0].message, "number overflow"));
        std::string a = "[";
        for (int i = 0; i < 20; ++i) a += "{\"text\": \"t\"},";
        const auto arr = read_dataset(file("huge.json", a + "{\"text\": -1e400}]"));
        QCOMPARE(arr.records.size(), size_t(20));
        QCOMPARE(arr.invalid.by_reason.count("json_syntax"), size_t(1));
    }

    void invalid_utf8_offset() {
        const std::string good = "{\"text\": \"fine\"}\n";
        std::string s;
        for (int i = 0; i < 20; ++i) s += good;
        const size_t line_start = s.size();
        s += "{\"text\": \"bad \xFF byte\"}\n";
        const auto d = read_dataset(file("utf8.jsonl", s));
        QCOMPARE(d.invalid.count, int64_t(1));
        const auto& r = d.invalid.first[0];
        QCOMPARE(r.reason, InvalidReason::InvalidUtf8);
        QVERIFY(contains(r.location, "utf8.jsonl:21"));
        QVERIFY2(contains(r.message, "byte offset " + std::to_string(line_start + 14)), r.message.c_str());
        // Text files: the document is skipped with its line.
        const auto t = read_dataset(file("utf8.txt", std::string(30, 'a') + "\n\nx\xC0\xAFy\n\n" + "ok\n"),
                                    ReadOptions{DatasetFormat::Auto, TextSplit::BlankLines, 0.5, 20, {}});
        QCOMPARE(t.invalid.count, int64_t(1));
        QVERIFY(contains(t.invalid.first[0].location, "utf8.txt:3"));
    }

    void conversation_errors() {
        std::string s;
        for (int i = 0; i < 40; ++i)
            s += R"({"messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]})"
                 "\n";
        s += R"({"messages": []})"
             "\n";
        s += R"({"messages": [{"role": "user", "content": "u"}]})"
             "\n";
        s += R"({"messages": [{"role": "narrator", "content": "u"}, {"role": "assistant", "content": "a"}]})"
             "\n";
        s += R"({"messages": [{"role": "user", "content": 3}, {"role": "assistant", "content": "a"}]})"
             "\n";
        const auto d = read_dataset(file("conv.jsonl", s));
        QCOMPARE(d.records.size(), size_t(40));
        QCOMPARE(d.invalid.by_reason.at("empty"), int64_t(1));
        QCOMPARE(d.invalid.by_reason.at("no_assistant_turn"), int64_t(1));
        QCOMPARE(d.invalid.by_reason.at("unknown_role"), int64_t(1));
        QCOMPARE(d.invalid.by_reason.at("wrong_type"), int64_t(1));
        QVERIFY(contains(d.invalid.first[0].location, "conv.jsonl:41"));
        QVERIFY(contains(d.invalid.first[2].message, "\"narrator\""));
        QVERIFY(contains(d.invalid.first[3].message, "message 0 \"content\" is a number"));

        std::string g;
        for (int i = 0; i < 30; ++i)
            g += R"({"conversations": [{"from": "human", "value": "u"}, {"from": "gpt", "value": "a"}]})"
                 "\n";
        g += R"({"conversations": [{"from": "robot", "value": "u"}, {"from": "gpt", "value": "a"}]})"
             "\n";
        const auto sg = read_dataset(file("sg.jsonl", g));
        QCOMPARE(sg.invalid.by_reason.at("unknown_role"), int64_t(1));
        QVERIFY(contains(sg.invalid.first[0].message, "\"robot\""));
    }

    void too_many_invalid() {
        std::string s = "{\"text\": \"ok\"}\n{\"text\": \"ok\"}\n{\"text\": 1}\n";
        const auto p = file("many_bad.jsonl", s);
        EXPECT_ERROR(read_dataset(p), ErrorCategory::InvalidInput, "many_bad.jsonl:3");
        EXPECT_ERROR(read_dataset(p), ErrorCategory::InvalidInput, "more than the 10% allowed");
        ReadOptions lenient;
        lenient.max_invalid_fraction = 0.5;
        QCOMPARE(read_dataset(p, lenient).records.size(), size_t(2));
        // Nothing valid at all.
        const auto none = file("none_valid.jsonl", "{\"text\": 1}\n{\"text\": \"\"}\n");
        ReadOptions all;
        all.max_invalid_fraction = 1.0;
        EXPECT_ERROR(read_dataset(none, all), ErrorCategory::InvalidInput, "no valid records");
        EXPECT_ERROR(read_dataset(none, all), ErrorCategory::InvalidInput, "none_valid.jsonl:1");
    }

    void json_array_errors() {
        // Element index and line of a broken element.
        std::string s = "[\n";
        for (int i = 0; i < 20; ++i) s += "  {\"text\": \"t\"},\n";
        s += "  {\"text\": \"t\" \"oops\": 1},\n  {\"text\": \"last\"}\n]\n";
        const auto d = read_dataset(file("arr.json", s));
        QCOMPARE(d.records.size(), size_t(21));
        QCOMPARE(d.invalid.count, int64_t(1));
        QVERIFY2(contains(d.invalid.first[0].location, "arr.json:22 (element 20)"),
                 d.invalid.first[0].location.c_str());
        // Truncated: the array never closes.
        const auto cut = file("cut.json", s.substr(0, s.size() - 30));
        EXPECT_ERROR(read_dataset(cut), ErrorCategory::InvalidInput, "truncated");
        EXPECT_ERROR(read_dataset(cut), ErrorCategory::InvalidInput, "cut.json:");
        EXPECT_ERROR(read_dataset(cut), ErrorCategory::InvalidInput, "element 20, which starts at line 22");
        EXPECT_ERROR(read_dataset(file("cut2.json", "[{\"text\": \"a\"},")), ErrorCategory::InvalidInput, "truncated");
        EXPECT_ERROR(read_dataset(file("empty_arr.json", "[ ]")), ErrorCategory::InvalidInput, "empty");
        EXPECT_ERROR(read_dataset(file("trailing.json", "[{\"text\": \"a\"}] x")), ErrorCategory::InvalidInput,
                     "after the end of the JSON array");
        // Brackets inside strings do not confuse the scanner.
        const auto br = read_dataset(file("br.json", "[{\"text\": \"a ] } [ {\"}, {\"text\": \"\\\"]\"}]"));
        QCOMPARE(br.records.size(), size_t(2));
        QCOMPARE(br.records[1].text, std::string("\"]"));
    }

    void file_level_errors() {
        EXPECT_ERROR(read_dataset(file("empty.jsonl", "")), ErrorCategory::InvalidInput,
                     "empty.jsonl: the file is empty");
        EXPECT_ERROR(read_dataset(file("ws.json", " \n\n ")), ErrorCategory::InvalidInput, "only whitespace");
        EXPECT_ERROR(read_dataset(file("bin.jsonl", std::string("PAR1\0\0\x15", 7))), ErrorCategory::InvalidInput,
                     "bin.jsonl: looks like a binary file");
        EXPECT_ERROR(read_dataset(file("notjson.json", "hello")), ErrorCategory::InvalidInput, "notjson.json:1:1");
        EXPECT_ERROR(read_dataset(fs::path(tmp_.path().toStdString()) / "missing.json"), ErrorCategory::Io,
                     "missing.json");
        // A truncated JSONL file: the last record is cut off mid-way.
        std::string s;
        for (int i = 0; i < 20; ++i) s += "{\"text\": \"x\"}\n";
        s += "{\"text\": \"cut of";
        const auto d = read_dataset(file("cut.jsonl", s));
        QCOMPARE(d.invalid.count, int64_t(1));
        QVERIFY(contains(d.invalid.first[0].message, "truncated"));
        QVERIFY(contains(d.invalid.first[0].location, "cut.jsonl:21"));
        // A UTF-8 byte order mark is fine.
        QCOMPARE(read_dataset(file("bom.jsonl", "\xEF\xBB\xBF{\"text\": \"x\"}\n")).records.size(), size_t(1));
    }

    // ----- CSV / TSV ----------------------------------------------------------------------------------------

    void csv_quoted_fields() {
        // Quoted fields hold the separator, line breaks (LF and CRLF) and doubled quotes; an unquoted field
        // keeps a stray quote as it is; extra columns are ignored; record lines are where each row starts.
        const auto p = file("q.csv",
                            "id,instruction,input,output\n"
                            "1,\"Add, then print\",\"1, 2\",\"3\"\n"
                            "2,\"Say \"\"hi\"\"\",,\"line one\nline two\r\nline three\"\n"
                            "3,Measure,5\" screen,\"\"\"quoted\"\" answer\"\n");
        const Dataset d = read_dataset(p);
        QCOMPARE(d.format, DatasetFormat::Alpaca);
        QCOMPARE(d.records.size(), size_t(3));
        QCOMPARE(d.total_records, int64_t(3));
        QCOMPARE(d.records[0].messages[0].content, std::string("Add, then print\n\n1, 2"));
        QCOMPARE(d.records[0].messages[1].content, std::string("3"));
        QCOMPARE(d.records[1].messages[0].content, std::string("Say \"hi\""));  // empty input: no "\n\n"
        QCOMPARE(d.records[1].messages[1].content, std::string("line one\nline two\nline three"));
        QCOMPARE(d.records[2].messages[0].content, std::string("Measure\n\n5\" screen"));
        QCOMPARE(d.records[2].messages[1].content, std::string("\"quoted\" answer"));
        QCOMPARE(d.records[0].location.line, uint32_t(2));
        QCOMPARE(d.records[1].location.line, uint32_t(3));
        QCOMPARE(d.records[2].location.line, uint32_t(6));  // row 2 spans lines 3-5
        QCOMPARE(d.records[2].location.element, int64_t(-1));
    }

    // Column mapping (the studio's mapping dialog, the CLI's --column KEY=COLUMN): the same records whatever the
    // file calls its columns, in JSON, CSV and Parquet; bad mappings are refused naming what is wrong.
    void column_mapping() {
        ReadOptions opt;
        opt.columns = {{"instruction", "question"}, {"output", "answer"}};
        const auto j = file("qa.jsonl", "{\"question\": \"2+2?\", \"answer\": \"4\"}\n{\"question\": \"3+3?\", \"answer\": \"6\"}\n");
        Dataset d = read_dataset(j, opt);
        QCOMPARE(d.format, DatasetFormat::Alpaca);
        QCOMPARE(d.records.size(), size_t(2));
        QCOMPARE(d.records[1].messages[0].content, std::string("3+3?"));
        QCOMPARE(d.records[1].messages[1].content, std::string("6"));
        EXPECT_ERROR(read_dataset(j), ErrorCategory::InvalidInput, "cannot tell the dataset format");
        const auto c = file("qa.csv", "id,Question,Answer\n1,2+2?,4\n");
        d = read_dataset(c, opt);  // header names match case-insensitively
        QCOMPARE(d.format, DatasetFormat::Alpaca);
        QCOMPARE(d.records[0].messages[1].content, std::string("4"));
        opt.columns["input"] = "context";
        EXPECT_ERROR(read_dataset(c, opt), ErrorCategory::InvalidInput, "input=context names a column the header lacks");
        opt.columns = {{"prompt", "instruction"}, {"completion", "output"}};
        d = read_dataset(fs::path(TANDEM_FIXTURES_DIR) / "parquet/alpaca_plain_gzip_v2.parquet", opt);
        QCOMPARE(d.format, DatasetFormat::PromptCompletion);
        QCOMPARE(d.records[1].prompt, std::string("Translate to French"));
        QCOMPARE(d.records[1].completion, std::string("Bonjour"));
        opt.columns = {{"answer", "output"}};
        EXPECT_ERROR(read_dataset(c, opt), ErrorCategory::InvalidInput, "\"answer\" is not a dataset key");
        EXPECT_ERROR(parse_column_mapping("instruction"), ErrorCategory::InvalidInput, "expected KEY=COLUMN");
        QCOMPARE(parse_column_mapping("output=the answer").second, std::string("the answer"));
    }

    void csv_tsv() {
        const auto p = file("pc.tsv",
                            "prompt\tcompletion\n"
                            "Capital of France?\tParis, of course\n"
                            "\"Tab\tinside\"\t\"two\nlines\"\n");
        const Dataset d = read_dataset(p);
        QCOMPARE(d.format, DatasetFormat::PromptCompletion);
        QCOMPARE(d.records.size(), size_t(2));
        QCOMPARE(d.records[0].prompt, std::string("Capital of France?"));
        QCOMPARE(d.records[0].completion, std::string("Paris, of course"));  // a comma is data in a TSV
        QCOMPARE(d.records[1].prompt, std::string("Tab\tinside"));
        QCOMPARE(d.records[1].completion, std::string("two\nlines"));
    }

    void csv_bom_crlf() {
        const auto p = file("bom.csv",
                            "\xEF\xBB\xBF"
                            "Instruction , Output\r\n"
                            "Greet,Hello\r\n"
                            "\"Two\r\nlines\",\"Yes\"\r\n"
                            "\r\n");
        const Dataset d = read_dataset(p);
        QCOMPARE(d.format, DatasetFormat::Alpaca);  // header names: case and spaces ignored, the BOM skipped
        QCOMPARE(d.records.size(), size_t(2));
        QCOMPARE(d.records[0].messages[0].content, std::string("Greet"));
        QCOMPARE(d.records[0].messages[1].content, std::string("Hello"));  // no '\r' left
        QCOMPARE(d.records[1].messages[0].content, std::string("Two\nlines"));
        QCOMPARE(d.records[1].messages[1].content, std::string("Yes"));
        QCOMPARE(d.records[1].location.line, uint32_t(3));
    }

    void csv_column_sets() {
        // alpaca with system; prompt/completion; text; an explicit format picks among several sets.
        const auto a = read_dataset(file("a.csv", "system,instruction,output\nBe kind.,Greet,Hello\n,Q,A\n"));
        QCOMPARE(a.format, DatasetFormat::Alpaca);
        QCOMPARE(a.records[0].messages.size(), size_t(3));
        QCOMPARE(a.records[0].messages[0].role, std::string("system"));
        QCOMPARE(a.records[1].messages.size(), size_t(2));  // empty system: none
        const auto pc = read_dataset(file("pc.csv", "prompt,completion\nHi,Hello\n"));
        QCOMPARE(pc.format, DatasetFormat::PromptCompletion);
        QCOMPARE(pc.records[0].prompt, std::string("Hi"));
        QCOMPARE(pc.records[0].completion, std::string("Hello"));
        const auto t = read_dataset(file("t.csv", "text,source\n\"Once upon a time,\nthe end.\",web\nSecond,x\n"));
        QCOMPARE(t.format, DatasetFormat::Text);
        QCOMPARE(t.records.size(), size_t(2));
        QCOMPARE(t.records[0].text, std::string("Once upon a time,\nthe end."));
        // Same priority as the JSON keys: instruction+output wins over text; an explicit format overrides.
        const std::string both = "text,instruction,output\nT,I,O\n";
        QCOMPARE(read_dataset(file("both.csv", both)).format, DatasetFormat::Alpaca);
        ReadOptions o;
        o.format = DatasetFormat::Text;
        const auto forced = read_dataset(file("both2.csv", both), o);
        QCOMPARE(forced.format, DatasetFormat::Text);
        QCOMPARE(forced.records[0].text, std::string("T"));
        // A chat column holds a JSON array per cell.
        const auto c = read_dataset(
            file("chat.csv",
                 "messages\n\"[{\"\"role\"\": \"\"user\"\", \"\"content\"\": \"\"U\"\"}, {\"\"role\"\": "
                 "\"\"assistant\"\", \"\"content\"\": \"\"A, B\"\"}]\"\n"));
        QCOMPARE(c.format, DatasetFormat::Chat);
        QCOMPARE(c.records[0].messages.size(), size_t(2));
        QCOMPARE(c.records[0].messages[1].content, std::string("A, B"));
        // Empty cells are empty fields: the record is invalid (counted), not the file.
        const auto e = read_dataset(file("e.csv", "prompt,completion\nHi,Hello\nA,B\nC,D\nE,F\nG,H\nI,J\nK,L\nM,N\n"
                                                  "O,P\nQ,R\nS,T\nU,\n"));
        QCOMPARE(e.records.size(), size_t(11));
        QCOMPARE(e.invalid.count, int64_t(1));
        QVERIFY(contains(e.invalid.first[0].location, "e.csv:13"));
    }

    void csv_never_plain_text() {
        // Before CSV support a .csv was read as one text document, header included.
        const auto p = file("plain.csv", "text\nhello world\nsecond row\n");
        const Dataset d = read_dataset(p);
        QCOMPARE(d.format, DatasetFormat::Text);
        QCOMPARE(d.records.size(), size_t(2));
        for (const auto& r : d.records) {
            QVERIFY(!contains(r.text, "text"));
            QVERIFY(!contains(r.text, "\n"));
        }
        QCOMPARE(d.records[0].text, std::string("hello world"));
        // Even when asked for text, a .csv without a text column is refused, never read as plain text.
        ReadOptions o;
        o.format = DatasetFormat::Text;
        o.text_split = TextSplit::WholeFile;
        EXPECT_ERROR(read_dataset(file("nt.csv", "instruction,output\nI,O\n"), o), ErrorCategory::InvalidInput,
                     "nt.csv:1: the header lacks the columns the text format needs");
        // Upper-case extension too.
        QCOMPARE(read_dataset(file("UP.CSV", "text\nx\n")).records[0].text, std::string("x"));
    }

    void csv_errors() {
        // A row with another field count: the message names the line.
        {
            const auto err = error_of([&] {
                (void)read_dataset(file("count.csv", "instruction,output\nA,B\nC,D,E\nF,G\n"));
            });
            QVERIFY(err.has_value());
            QCOMPARE(err->category(), ErrorCategory::InvalidInput);
            QVERIFY2(contains(err->what(), "count.csv:3: this row has 3 fields but the header (line 1) has 2"),
                     err->what());
            QVERIFY2(contains(err->what(), "double quotes"), err->what());
        }
        EXPECT_ERROR(read_dataset(file("few.tsv", "prompt\tcompletion\nA\tB\n\nC\n")), ErrorCategory::InvalidInput,
                     "few.tsv:4: this row has 1 field but the header (line 1) has 2");
        // A quote that is never closed: the line it opens on.
        EXPECT_ERROR(read_dataset(file("open.csv", "instruction,output\nA,B\nC,\"D\nE,F\nG,H\n")),
                     ErrorCategory::InvalidInput, "open.csv:3: a quoted field opens on this line");
        EXPECT_ERROR(read_dataset(file("open2.csv", "instruction,output\r\nA,\"B\r\nmore\",\"never closed\r\n")),
                     ErrorCategory::InvalidInput, "open2.csv:3: a quoted field opens on this line (in the row that "
                                                  "starts on line 2)");
        EXPECT_ERROR(read_dataset(file("open3.csv", "instruction,output\nA,\"B\"x\n")), ErrorCategory::InvalidInput,
                     "open3.csv:2: unexpected text after the closing quote");
        // No known column set: the header's columns and the accepted sets.
        {
            const auto err =
                error_of([&] { (void)read_dataset(file("cols.csv", "question,answer\nWhat?,That.\n")); });
            QVERIFY(err.has_value());
            QCOMPARE(err->category(), ErrorCategory::InvalidInput);
            const std::string m = err->what();
            QVERIFY2(contains(m, "cols.csv:1: no known column set in the header: its columns are \"question\", "
                                 "\"answer\""),
                     m.c_str());
            QVERIFY2(contains(m, "\"instruction\" + \"output\""), m.c_str());
            QVERIFY2(contains(m, "\"prompt\" + \"completion\""), m.c_str());
            QVERIFY2(contains(m, "\"text\""), m.c_str());
        }
        EXPECT_ERROR(read_dataset(file("semi.csv", "instruction;output\nA;B\n")), ErrorCategory::InvalidInput,
                     "uses another separator");
        // A header-only file, and a preference dataset.
        EXPECT_ERROR(read_dataset(file("hdr.csv", "prompt,completion\r\n")), ErrorCategory::InvalidInput,
                     "hdr.csv: the CSV file has a header row (columns \"prompt\", \"completion\") but no data rows");
        EXPECT_ERROR(read_dataset(file("dpo.csv", "prompt,chosen,rejected\nP,C,R\n")), ErrorCategory::Unsupported,
                     "preference (DPO)");
        EXPECT_ERROR(read_dataset(file("dup.csv", "text,Text\na,b\n")), ErrorCategory::InvalidInput,
                     "dup.csv:1: the header names the column \"text\" twice");
    }

    // ----- splits and shuffles ------------------------------------------------------------------------------

    void shuffle_and_split() {
        const auto a = shuffled_indices(1000, 7), b = shuffled_indices(1000, 7), c = shuffled_indices(1000, 8);
        QVERIFY(a == b);
        QVERIFY(a != c);
        auto sorted = a;
        std::sort(sorted.begin(), sorted.end());
        for (uint32_t i = 0; i < 1000; ++i) QCOMPARE(sorted[i], i);
        // Fixed by the algorithm, not the standard library: the first elements for seed 7 never change.
        const auto small = shuffled_indices(5, 1);
        QCOMPARE(std::set<uint32_t>(small.begin(), small.end()).size(), size_t(5));

        std::vector<Record> recs(100);
        for (int i = 0; i < 100; ++i) recs[i].text = std::to_string(i);
        Dataset d = dataset_of(recs);
        auto s1 = split_dataset(d, 0.1, 3), s2 = split_dataset(d, 0.1, 3), s3 = split_dataset(d, 0.1, 4);
        QCOMPARE(s1.validation.records.size(), size_t(10));
        QCOMPARE(s1.train.records.size(), size_t(90));
        std::set<std::string> all;
        for (auto& r : s1.train.records) all.insert(r.text);
        for (auto& r : s1.validation.records) all.insert(r.text);
        QCOMPARE(all.size(), size_t(100));
        auto texts = [](const Dataset& x) {
            std::vector<std::string> v;
            for (auto& r : x.records) v.push_back(r.text);
            return v;
        };
        QVERIFY(texts(s1.validation) == texts(s2.validation));
        QVERIFY(texts(s1.validation) != texts(s3.validation));
        QCOMPARE(split_dataset(dataset_of(std::vector<Record>(3)), 0.01, 1).validation.records.size(), size_t(1));
        EXPECT_ERROR(split_dataset(dataset_of(std::vector<Record>(1)), 0.5, 1), ErrorCategory::InvalidInput,
                     "nothing would be left");
    }

    // ----- rendering and masks (fake codec) -----------------------------------------------------------------

    void chatml_masks_multi_turn() {
        const auto codec = fake_codec(render_chatml);
        RenderOptions o;
        auto d = dataset_of({chat_record(
            {{"system", "S"}, {"user", "hi"}, {"assistant", "hello"}, {"user", "q2"}, {"assistant", "a2"}})});
        const auto t = tokenize_dataset(d, codec, o);
        QCOMPARE(t.size(), size_t(1));
        QCOMPARE(t.split_conversations, int64_t(0));
        QCOMPARE(trained_text(t, 0, fake_decode), std::string("hello<|im_end|>|a2<|im_end|>"));
        // The whole sample is the template's rendering, unchanged.
        QCOMPARE(fake_decode(t.sample_tokens(0)),
                 render_chatml(json::array({{{"role", "system"}, {"content", "S"}},
                                            {{"role", "user"}, {"content", "hi"}},
                                            {{"role", "assistant"}, {"content", "hello"}},
                                            {{"role", "user"}, {"content", "q2"}},
                                            {{"role", "assistant"}, {"content", "a2"}}}),
                               false, {}));
        QCOMPARE(t.labels[0], -100);
        // train_on_all_tokens: everything but the first token.
        o.train_on_all_tokens = true;
        const auto all = tokenize_dataset(d, codec, o);
        QCOMPARE(all.trained_tokens(), static_cast<int64_t>(all.tokens.size()) - 1);
    }

    void not_prefix_stable_falls_back_per_turn() {
        const auto codec = fake_codec(render_qwen_like);
        RenderOptions o;  // enable_thinking=false by default
        auto single = tokenize_dataset(dataset_of({chat_record({{"user", "hi"}, {"assistant", "hello"}})}), codec, o);
        QCOMPARE(single.size(), size_t(1));
        QCOMPARE(single.split_conversations, int64_t(0));
        // The empty think block is part of the prompt, not trained.
        QCOMPARE(trained_text(single, 0, fake_decode), std::string("hello<|im_end|>"));
        QVERIFY(contains(fake_decode(single.sample_tokens(0)), "<think>\n\n</think>\n\nhello"));

        auto multi = tokenize_dataset(
            dataset_of({chat_record({{"user", "u1"}, {"assistant", "a1"}, {"user", "u2"}, {"assistant", "a2"}})}),
            codec, o);
        QCOMPARE(multi.split_conversations, int64_t(1));
        QCOMPARE(multi.size(), size_t(2));
        QCOMPARE(trained_text(multi, 0, fake_decode), std::string("a1<|im_end|>"));
        QCOMPARE(trained_text(multi, 1, fake_decode), std::string("a2<|im_end|>"));
        // The second sample holds the history as the template renders it when turn 2 is the last.
        QCOMPARE(fake_decode(multi.sample_tokens(1)),
                 std::string("<|im_start|>user\nu1<|im_end|>\n<|im_start|>assistant\na1<|im_end|>\n"
                             "<|im_start|>user\nu2<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
                             "a2<|im_end|>\n"));
        QCOMPARE(multi.record[0], uint32_t(0));
        QCOMPARE(multi.record[1], uint32_t(0));
    }

    void eos_appended_when_template_has_none() {
        auto codec = fake_codec(render_no_eos, "</s>");
        RenderOptions o;
        auto t = tokenize_dataset(
            dataset_of({chat_record({{"user", "q"}, {"assistant", "a"}, {"user", "q2"}, {"assistant", "b"}})}), codec,
            o);
        // Reply trained, EOS appended and trained, the "\n\n" separator masked.
        QCOMPARE(trained_text(t, 0, fake_decode), std::string("a</s>|b</s>"));
        QCOMPARE(fake_decode(t.sample_tokens(0)),
                 std::string("### Q:\nq\n\n### A:\na</s>\n\n### Q:\nq2\n\n### A:\nb</s>\n\n"));
        o.add_eos_if_missing = false;
        t = tokenize_dataset(dataset_of({chat_record({{"user", "q"}, {"assistant", "a"}})}), codec, o);
        QCOMPARE(trained_text(t, 0, fake_decode), std::string("a"));
        // A template whose replies already end with EOS does not get a second one.
        codec = fake_codec(render_chatml);
        t = tokenize_dataset(dataset_of({chat_record({{"user", "q"}, {"assistant", "a"}})}), codec, RenderOptions{});
        QCOMPARE(std::count(t.tokens.begin(), t.tokens.end(), *codec.eos_id), 2);  // user turn + assistant turn
    }

    void template_errors_are_invalid_records() {
        const auto codec = fake_codec(render_no_eos, "</s>");
        Dataset d =
            dataset_of({chat_record({{"user", "q"}, {"assistant", "a"}}),
                        chat_record({{"user", "q"}, {"assistant", "call"}, {"tool", "r"}, {"assistant", "a"}})});
        const auto t = tokenize_dataset(d, codec, RenderOptions{});
        QCOMPARE(t.size(), size_t(1));
        QCOMPARE(t.invalid.count, int64_t(1));
        QCOMPARE(t.invalid.by_reason.at("template_error"), int64_t(1));
        QVERIFY(contains(t.invalid.first[0].message, "role tool not supported"));

        const auto ignoring = fake_codec(render_ignores_generation_prompt);
        EXPECT_ERROR(
            tokenize_dataset(dataset_of({chat_record({{"user", "q"}, {"assistant", "a"}})}), ignoring, RenderOptions{}),
            ErrorCategory::InvalidInput, "ignores add_generation_prompt");
    }

    void text_and_prompt_completion_samples() {
        auto codec = fake_codec(render_chatml, "</s>");
        codec.adds_bos = true;
        Record text;
        text.text = "abc";
        Record pc;
        pc.prompt = "Q:";
        pc.completion = " A";
        const auto t = tokenize_dataset(dataset_of({text, pc}), codec, RenderOptions{});
        QCOMPARE(t.size(), size_t(2));
        QCOMPARE(fake_decode(t.sample_tokens(0)), std::string("<s>abc</s>"));
        QCOMPARE(trained_text(t, 0, fake_decode), std::string("abc</s>"));
        QCOMPARE(fake_decode(t.sample_tokens(1)), std::string("<s>Q: A</s>"));
        QCOMPARE(trained_text(t, 1, fake_decode), std::string(" A</s>"));
        codec.adds_bos = false;  // Qwen-like: no BOS
        const auto nb = tokenize_dataset(dataset_of({text}), codec, RenderOptions{});
        QCOMPARE(fake_decode(nb.sample_tokens(0)), std::string("abc</s>"));
        QCOMPARE(trained_text(nb, 0, fake_decode), std::string("bc</s>"));  // the first token is never a target
    }

    void truncation_and_drops() {
        const auto codec = fake_codec(render_chatml);
        RenderOptions o;
        o.max_seq_len = 40;
        const std::string long_reply(100, 'x');
        auto d = dataset_of({chat_record({{"user", "q"}, {"assistant", long_reply}}),            // truncated, kept
                             chat_record({{"user", std::string(60, 'p')}, {"assistant", "a"}}),  // nothing left
                             chat_record({{"user", "q"}, {"assistant", "short"}})});
        const auto t = tokenize_dataset(d, codec, o);
        QCOMPARE(t.truncated, int64_t(2));
        QCOMPARE(t.dropped, int64_t(1));
        QCOMPARE(t.size(), size_t(2));
        QCOMPARE(t.length(0), 40);
        QCOMPARE(t.record[1], uint32_t(2));
        const std::string head = fake_decode(t.sample_tokens(0));
        QVERIFY(head.starts_with("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\nxxx"));
        o.max_seq_len = 5;
        EXPECT_ERROR(tokenize_dataset(dataset_of({chat_record({{"user", "q"}, {"assistant", "a"}})}), codec, o),
                     ErrorCategory::InvalidInput, "no trainable samples");
    }

    void demo_datasets_render() {
        const auto alpaca = read_dataset(source_dir() / "datasets/demo_alpaca.jsonl");
        QCOMPARE(alpaca.format, DatasetFormat::Alpaca);
        QCOMPARE(alpaca.records.size(), size_t(60));
        QCOMPARE(alpaca.invalid.count, int64_t(0));
        const auto chat = read_dataset(source_dir() / "datasets/demo_chat.jsonl");
        QCOMPARE(chat.format, DatasetFormat::Chat);
        QCOMPARE(chat.records.size(), size_t(20));
        const auto t = tokenize_dataset(chat, fake_codec(render_chatml), RenderOptions{});
        QCOMPARE(t.size(), size_t(20));
        for (size_t i = 0; i < t.size(); ++i) {
            std::string want;
            for (const auto& m : chat.records[t.record[i]].messages)
                if (m.role == "assistant") want += (want.empty() ? "" : "|") + m.content + "<|im_end|>";
            QCOMPARE(trained_text(t, i, fake_decode), want);
        }
    }

    // ----- packing -------------------------------------------------------------------------------------------

    void packing_invariants() {
        const auto lengths = random_lengths(2000, 512, 11);
        const auto data = synthetic(lengths);
        PackOptions o;
        o.token_budget = 1024;
        o.seed = 5;
        o.pad_id = 7;
        const auto batches = pack_dataset(data, o);
        std::vector<int> seen(data.size(), 0);
        int64_t real = 0;
        for (const auto& b : batches) {
            check_batch(b, data, o);
            if (QTest::currentTestFailed()) return;
            for (uint32_t s : b.samples) ++seen[s];
            real += b.num_tokens;
        }
        for (size_t i = 0; i < seen.size(); ++i) QCOMPARE(seen[i], 1);
        const auto plan = plan_batches(lengths, o);
        QCOMPARE(plan.size(), batches.size());
        const double eff = packing_efficiency(lengths, plan, o.token_budget);
        QCOMPARE(eff, static_cast<double>(real) / (static_cast<double>(batches.size()) * o.token_budget));
        const int64_t total = std::accumulate(lengths.begin(), lengths.end(), int64_t(0));
        QCOMPARE(real, total);
        const int64_t lower_bound = (total + o.token_budget - 1) / o.token_budget;
        QVERIFY2(eff > 0.95, qPrintable(QString::number(eff)));  // best-fit-decreasing on uniform lengths
        QVERIFY(static_cast<int64_t>(batches.size()) >= lower_bound);

        // Deterministic by seed; a different seed gives a different order.
        QVERIFY(plan_batches(lengths, o) == plan);
        PackOptions o2 = o;
        o2.seed = 6;
        QVERIFY(plan_batches(lengths, o2) != plan);
        // Without shuffling the plan is in best-fit order.
        o2.shuffle = false;
        QVERIFY(plan_batches(lengths, o2) == plan_batches(lengths, o2));
    }

    void packing_exact_fit_and_errors() {
        // 4 + 4 + 2 + 2 + 3 + 1 into budget 8: two full batches.
        const std::vector<int32_t> lengths = {4, 2, 3, 4, 1, 2};
        PackOptions o;
        o.token_budget = 8;
        o.shuffle = false;
        const auto plan = plan_batches(lengths, o);
        QCOMPARE(plan.size(), size_t(2));
        QCOMPARE(packing_efficiency(lengths, plan, 8), 1.0);
        const auto data = synthetic(lengths);
        for (const auto& b : pack_dataset(data, o)) {
            QCOMPARE(b.num_tokens, 8);
            check_batch(b, data, o);
        }
        EXPECT_ERROR(plan_batches(std::vector<int32_t>{3, 9}, o), ErrorCategory::InvalidInput,
                     "raise the micro-batch token budget or lower max_seq_len");
        o.token_budget = 0;
        EXPECT_ERROR(plan_batches(lengths, o), ErrorCategory::InvalidInput, "must be positive");
    }

    void padded_mode() {
        const auto lengths = random_lengths(101, 100, 3);
        const auto data = synthetic(lengths);
        PackOptions o;
        o.packing = false;
        o.token_budget = 1000;
        o.rows = 8;  // row_len 125
        o.pad_id = 1;
        const auto batches = pack_dataset(data, o);
        QCOMPARE(batches.size(), size_t(13));  // ceil(101 / 8)
        std::vector<int> seen(data.size(), 0);
        for (const auto& b : batches) {
            QCOMPARE(b.row_len, 125);
            QVERIFY(b.num_samples <= 8);
            check_batch(b, data, o);
            for (uint32_t s : b.samples) ++seen[s];
        }
        for (int n : seen) QCOMPARE(n, 1);
        // rows = 0: budget / longest sample.
        o.rows = 0;
        const auto auto_rows = pack_dataset(data, o);
        const int32_t longest = *std::max_element(lengths.begin(), lengths.end());
        QCOMPARE(auto_rows[0].row_len, 1000 / (1000 / longest));
        // Packing beats padding on the same data.
        PackOptions packed = o;
        packed.packing = true;
        QVERIFY(pack_dataset(data, packed).size() < auto_rows.size());
        o.rows = 20;  // row_len 50 < longest
        EXPECT_ERROR(pack_dataset(data, o), ErrorCategory::InvalidInput, "padded row length");
    }

    void summary() {
        const auto chat = read_dataset(source_dir() / "datasets/demo_chat.jsonl");
        const auto t = tokenize_dataset(chat, fake_codec(render_chatml), RenderOptions{});
        PackOptions o;
        o.token_budget = 2048;
        const auto s = summarize(chat, t, o);
        QCOMPARE(s.format, DatasetFormat::Chat);
        QCOMPARE(s.valid_records, int64_t(20));
        QCOMPARE(s.samples, int64_t(20));
        QCOMPARE(s.lengths.count, int64_t(20));
        QVERIFY(s.lengths.min <= s.lengths.median && s.lengths.median <= s.lengths.p95 &&
                s.lengths.p95 <= s.lengths.max);
        QCOMPARE(s.batches, static_cast<int64_t>(pack_dataset(t, o).size()));
        QVERIFY(s.packing_efficiency > 0 && s.packing_efficiency <= 1);
        const json j = to_json(s);
        QCOMPARE(j["format"].get<std::string>(), std::string("chat"));
        QCOMPARE(j["records"]["valid"].get<int64_t>(), int64_t(20));
        QCOMPARE(j["tokens"]["trained"].get<int64_t>(), t.trained_tokens());
        QVERIFY(contains(to_text(s), "efficiency"));
        const auto ls = length_stats({5, 1, 3, 2, 4, 100, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19});
        QCOMPARE(ls.min, int64_t(1));
        QCOMPARE(ls.max, int64_t(100));
        QCOMPARE(ls.median, int64_t(10));
        QCOMPARE(ls.p95, int64_t(19));
    }

    void prepare_with_validation() {
        DataOptions o;
        o.path = source_dir() / "datasets/demo_alpaca.jsonl";
        o.validation_fraction = 0.1;
        o.seed = 1;
        o.pack.token_budget = 1024;
        const auto codec = fake_codec(render_chatml);
        const auto p = prepare_data(o, codec);
        QCOMPARE(p.train.records.size(), size_t(54));
        QCOMPARE(p.validation.records.size(), size_t(6));
        QCOMPARE(p.summary.samples, int64_t(54));
        QCOMPARE(p.summary.validation_records, int64_t(6));
        QCOMPARE(p.summary.validation_samples, int64_t(6));
        QVERIFY(p.summary.validation_batches >= 1);
        QCOMPARE(to_json(p.summary)["validation"]["records"].get<int64_t>(), int64_t(6));
        // Same seed, same split.
        const auto again = prepare_data(o, codec);
        QCOMPARE(again.validation.records[0].messages.back().content, p.validation.records[0].messages.back().content);
        // A second file wins over the fraction.
        o.validation_path = source_dir() / "datasets/demo_chat.jsonl";
        const auto two = prepare_data(o, codec);
        QCOMPARE(two.train.records.size(), size_t(60));
        QCOMPARE(two.validation.records.size(), size_t(20));
        QCOMPARE(two.summary.validation_path, o.validation_path.string());
    }

    // ----- the real datasets --------------------------------------------------------------------------------

    void real_datasets_load() {
        const fs::path dir = assets() / "datasets";
        TANDEM_REQUIRE_ASSET(dir);
        struct Case {
            const char* file;
            DatasetFormat format;
            size_t valid;
            int64_t invalid;
        };
        const Case cases[] = {
            {"alpaca_5000.json", DatasetFormat::Alpaca, 4998, 2},  // two records have an empty output
            {"llamafactory_alpaca_en_demo.json", DatasetFormat::Alpaca, 999, 0},
            {"llamafactory_identity.json", DatasetFormat::Alpaca, 91, 0},
            {"llamafactory_glaive_toolcall_en_demo.json", DatasetFormat::ShareGpt, 300, 0},
            {"fastchat_dummy_conversation.json", DatasetFormat::ShareGpt, 500, 0},
            {"tinyshakespeare_input.txt", DatasetFormat::Text, 7222, 0},  // one document per speech
            {"tinystories_train_head.txt", DatasetFormat::Text, 1230, 0},
        };
        for (const auto& c : cases) {
            const auto d = read_dataset(dir / c.file);
            QVERIFY2(d.format == c.format, c.file);
            QVERIFY2(d.records.size() == c.valid,
                     qPrintable(QString("%1: %2 valid").arg(c.file).arg(d.records.size())));
            QVERIFY2(d.invalid.count == c.invalid, c.file);
        }
        const auto alpaca = read_dataset(dir / "alpaca_5000.json");
        QCOMPARE(alpaca.invalid.by_reason.at("empty"), int64_t(2));
        QVERIFY(contains(alpaca.invalid.first[0].location, "alpaca_5000.json:1 (element 2335)"));
        const auto glaive = read_dataset(dir / "llamafactory_glaive_toolcall_en_demo.json");
        QVERIFY(glaive.records[0].tools.is_array());
        int calls = 0, tools = 0;
        for (const auto& r : glaive.records)
            for (const auto& m : r.messages) {
                calls += m.is_tool_call;
                tools += m.role == "tool";
            }
        QCOMPARE(calls, 211);
        QCOMPARE(tools, 211);
        // MT-Bench questions have prompts and no responses: a clear error, not a silent empty dataset.
        EXPECT_ERROR(read_dataset(dir / "mt_bench_question.jsonl"), ErrorCategory::InvalidInput, "\"turns\"");
        EXPECT_ERROR(read_dataset(dir / "mt_bench_question.jsonl"), ErrorCategory::InvalidInput, "nothing to train on");
        EXPECT_ERROR(read_dataset(dir / "llamafactory_dpo_en_demo.json"), ErrorCategory::Unsupported, "preference");
        // Packing the real lengths: the fake byte-level codec makes long samples, so use a large budget.
        const auto t = tokenize_dataset(read_dataset(dir / "fastchat_dummy_conversation.json"),
                                        fake_codec(render_chatml), RenderOptions{});
        QCOMPARE(t.size(), size_t(500));
        PackOptions o;
        o.token_budget = 4096;
        const auto s = summarize(read_dataset(dir / "fastchat_dummy_conversation.json"), t, o);
        QVERIFY2(s.packing_efficiency > 0.9, qPrintable(QString::number(s.packing_efficiency)));
    }

    // ----- real tokenizers: decode the trained tokens ---------------------------------------------------------

    void qwen3_masks() {
        const fs::path dir = assets() / "tokenizer-qwen3";
        TANDEM_REQUIRE_ASSET(dir);
        const Tokenizer tok = Tokenizer::load(dir);
        RenderOptions o;
        o.max_seq_len = 0;
        const TextCodec codec = make_text_codec(tok, o);
        QCOMPARE(codec.template_name, std::string("model"));
        QVERIFY(codec.template_has_tool_calls);
        QVERIFY(!codec.adds_bos);
        auto decode = [&](const std::vector<int32_t>& ids) { return tok.decode(ids); };
        Dataset d = dataset_of(
            {chat_record({{"system", "Be brief."}, {"user", "What is 2+2?"}, {"assistant", "4"}}),
             chat_record({{"user", "Hi"}, {"assistant", "Hello there!"}, {"user", "Bye"}, {"assistant", "Goodbye."}})});
        const auto t = tokenize_dataset(d, codec, o);
        QCOMPARE(t.size(), size_t(3));  // the multi-turn conversation is split (Qwen3 is not prefix-stable)
        QCOMPARE(t.split_conversations, int64_t(1));
        QCOMPARE(trained_text(t, 0, decode), std::string("4<|im_end|>"));
        QCOMPARE(trained_text(t, 1, decode), std::string("Hello there!<|im_end|>"));
        QCOMPARE(trained_text(t, 2, decode), std::string("Goodbye.<|im_end|>"));
        // The sample is the template's rendering of the conversation.
        QCOMPARE(tok.decode(std::vector<int32_t>(t.sample_tokens(0).begin(), t.sample_tokens(0).end())),
                 std::string("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
                             "<|im_start|>assistant\n<think>\n\n</think>\n\n4<|im_end|>\n"));

        // Tool calls from ShareGPT become Qwen3 <tool_call> blocks and are trained.
        const auto glaive = read_dataset(assets() / "datasets/llamafactory_glaive_toolcall_en_demo.json");
        const auto g = tokenize_dataset(glaive, codec, o);
        QCOMPARE(g.invalid.count, int64_t(0));
        bool saw_call = false;
        for (size_t i = 0; i < g.size() && !saw_call; ++i) {
            const std::string tr = trained_text(g, i, decode);
            if (contains(tr, "<tool_call>\n{\"name\": \"")) saw_call = true;
            QVERIFY(!contains(tr, "<tool_response>"));
        }
        QVERIFY(saw_call);
    }

    void llama3_masks() {
        const fs::path dir = assets() / "tokenizer-llama3";
        TANDEM_REQUIRE_ASSET(dir);
        const Tokenizer tok = Tokenizer::load(dir);
        RenderOptions o;
        const TextCodec codec = make_text_codec(tok, o);
        QVERIFY(codec.adds_bos);
        auto decode = [&](const std::vector<int32_t>& ids) { return tok.decode(ids); };
        Dataset d = dataset_of({chat_record({{"system", "Be brief."},
                                             {"user", "Hi"},
                                             {"assistant", " Hello! "},
                                             {"user", "Bye"},
                                             {"assistant", "Goodbye."}})});
        const auto t = tokenize_dataset(d, codec, o);
        QCOMPARE(t.size(), size_t(1));  // Llama 3's template is prefix-stable
        QCOMPARE(trained_text(t, 0, decode), std::string("Hello!<|eot_id|>|Goodbye.<|eot_id|>"));
        const auto toks = t.sample_tokens(0);
        QCOMPARE(toks[0], *tok.bos_id());
        QCOMPARE(std::count(toks.begin(), toks.end(), *tok.bos_id()), 1);  // BOS from the template, not doubled
        // Text samples get BOS (the tokenizer adds one) and EOS.
        Record text;
        text.text = "Once upon a time";
        const auto tt = tokenize_dataset(dataset_of({text}), codec, o);
        QCOMPARE(tt.sample_tokens(0).front(), *tok.bos_id());
        QCOMPARE(tt.sample_tokens(0).back(), *tok.eos_id());
    }

    void real_summary_with_tokenizer() {
        const fs::path dir = assets() / "tokenizer-llama3";
        TANDEM_REQUIRE_ASSET(dir);
        const Tokenizer tok = Tokenizer::load(dir);
        const auto data = read_dataset(assets() / "datasets/llamafactory_alpaca_en_demo.json");
        RenderOptions ro;
        ro.max_seq_len = 1024;
        const auto t = tokenize_dataset(data, tok, ro);
        PackOptions po;
        po.token_budget = 4096;
        const auto s = summarize(data, t, po);
        QCOMPARE(s.samples + s.dropped, int64_t(999));
        QVERIFY(s.lengths.max <= 1024);
        QVERIFY(s.packing_efficiency > 0.9);
        qInfo().noquote() << QString::fromStdString(to_text(s));
    }
};

QTEST_GUILESS_MAIN(TestData)
#include "test_data.moc"
