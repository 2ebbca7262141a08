// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Dataset readers: JSON arrays, JSON Lines (also inside .json files), CSV/TSV (RFC 4180, header row) and plain
// text -> normalised Records.
// Decisions:
//  * The file is read once into memory and split into per-record byte ranges by a small scanner (JSON arrays:
//    top-level elements; JSONL: lines). Each range is parsed on its own, so only one record's JSON DOM exists
//    at a time, a syntax error costs one record instead of the whole file, and every error names file:line
//    (and the element index for arrays).
//  * Invalid records are skipped and counted by reason; loading fails when more than max_invalid_fraction of
//    them are invalid, or when nothing valid is left, quoting the first ones.
//  * .csv / .tsv files are read by extension only, as RFC 4180 records under a required header row whose column
//    names pick the format like JSON keys do (never as plain text: the header would become training text).
//    Malformed files (a row with another field count, an unclosed quote, no known column set) are refused
//    whole with path:line, not skipped row by row: a mis-quoted row shifts every later field.
//  * .parquet files (or files starting with "PAR1") go through data/parquet.h: each row becomes the same JSON
//    object a JSON Lines record would be (only the columns a format reads are decoded), and then follows the
//    JSON path. A record's "line" is its 1-based row number.
//  * Alpaca and ShareGPT records become `messages` here, so rendering only knows chat, prompt/completion, text.
#include <algorithm>
#include <cctype>
#include <cstring>
#include <random>
#include <set>
#include <sstream>

#include "core/files.h"
#include "core/utf8.h"
#include "data/parquet.h"
#include "tandem/data.h"
#include "tandem/error.h"

namespace tandem {

using json = nlohmann::ordered_json;  // keeps key order: tool schemas must print as written (tojson)

std::string_view dataset_format_name(DatasetFormat format) noexcept {
    switch (format) {
        case DatasetFormat::Auto:
            return "auto";
        case DatasetFormat::Alpaca:
            return "alpaca";
        case DatasetFormat::Chat:
            return "chat";
        case DatasetFormat::ShareGpt:
            return "sharegpt";
        case DatasetFormat::PromptCompletion:
            return "prompt_completion";
        case DatasetFormat::Text:
            return "text";
    }
    return "?";
}

std::optional<DatasetFormat> parse_dataset_format(std::string_view name) noexcept {
    if (name == "auto") return DatasetFormat::Auto;
    if (name == "alpaca") return DatasetFormat::Alpaca;
    if (name == "chat" || name == "messages") return DatasetFormat::Chat;
    if (name == "sharegpt") return DatasetFormat::ShareGpt;
    if (name == "prompt_completion" || name == "prompt-completion") return DatasetFormat::PromptCompletion;
    if (name == "text") return DatasetFormat::Text;
    return std::nullopt;
}

std::string_view invalid_reason_name(InvalidReason reason) noexcept {
    switch (reason) {
        case InvalidReason::JsonSyntax:
            return "json_syntax";
        case InvalidReason::NotAnObject:
            return "not_an_object";
        case InvalidReason::MissingKey:
            return "missing_key";
        case InvalidReason::WrongType:
            return "wrong_type";
        case InvalidReason::InvalidUtf8:
            return "invalid_utf8";
        case InvalidReason::Empty:
            return "empty";
        case InvalidReason::UnknownRole:
            return "unknown_role";
        case InvalidReason::NoAssistantTurn:
            return "no_assistant_turn";
        case InvalidReason::TemplateError:
            return "template_error";
        case InvalidReason::NotPrefixStable:
            return "not_prefix_stable";
    }
    return "?";
}

void InvalidStats::add(InvalidRecord record) {
    ++count;
    ++by_reason[std::string(invalid_reason_name(record.reason))];
    if (first.size() < max_kept) first.push_back(std::move(record));
}

std::string Dataset::location(const RecordLocation& loc) const {
    std::string s =
        (loc.file < files.size() ? files[loc.file].string() : std::string("?")) + ":" + std::to_string(loc.line);
    if (loc.element >= 0) s += " (element " + std::to_string(loc.element) + ")";
    return s;
}

const std::vector<std::string>& dataset_keys() {
    static const std::vector<std::string> keys = {"instruction", "input",         "output", "system",
                                                  "history",     "messages",      "conversations",
                                                  "prompt",      "completion",    "text",   "tools"};
    return keys;
}

std::pair<std::string, std::string> parse_column_mapping(std::string_view spec) {
    const size_t eq = spec.find('=');
    std::string key(spec.substr(0, eq == std::string_view::npos ? spec.size() : eq));
    if (eq == std::string_view::npos || eq == 0 || eq + 1 >= spec.size())
        throw_invalid("column mapping \"" + std::string(spec) +
                      "\": expected KEY=COLUMN, e.g. instruction=question (the dataset key, then the file's column)");
    const auto& keys = dataset_keys();
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
        throw_invalid("column mapping \"" + std::string(spec) + "\": \"" + key +
                      "\" is not a dataset key; use instruction, input, output, system, history, messages, "
                      "conversations, prompt, completion, text or tools");
    return {key, std::string(spec.substr(eq + 1))};
}

DatasetFormat format_from_keys(const std::vector<std::string>& keys) noexcept {
    auto has = [&](std::string_view k) { return std::find(keys.begin(), keys.end(), k) != keys.end(); };
    if (has("messages")) return DatasetFormat::Chat;
    if (has("conversations")) return DatasetFormat::ShareGpt;
    if (has("instruction") && has("output")) return DatasetFormat::Alpaca;
    if (has("prompt") && has("completion")) return DatasetFormat::PromptCompletion;
    if (has("text")) return DatasetFormat::Text;
    return DatasetFormat::Auto;
}

std::vector<uint32_t> shuffled_indices(size_t n, uint64_t seed) {
    std::vector<uint32_t> idx(n);
    for (size_t i = 0; i < n; ++i) idx[i] = static_cast<uint32_t>(i);
    std::mt19937_64 rng(seed);
    // Fisher-Yates from the back; j uniform in [0, i] by rejection so the result does not depend on the
    // standard library's distribution implementation.
    for (size_t i = n; i > 1; --i) {
        const uint64_t bound = i;  // pick j in [0, i-1]
        const uint64_t limit = UINT64_MAX - (UINT64_MAX % bound);
        uint64_t r;
        do r = rng();
        while (r >= limit);
        std::swap(idx[i - 1], idx[r % bound]);
    }
    return idx;
}

DatasetSplit split_dataset(Dataset dataset, double validation_fraction, uint64_t seed) {
    if (!(validation_fraction >= 0.0 && validation_fraction < 1.0))
        throw_invalid("validation fraction must be in [0, 1), got " + std::to_string(validation_fraction));
    const size_t n = dataset.records.size();
    size_t n_val = static_cast<size_t>(std::llround(validation_fraction * static_cast<double>(n)));
    if (validation_fraction > 0 && n_val == 0) n_val = 1;
    if (n_val >= n && n > 0)
        throw_invalid((dataset.files.empty() ? std::string("dataset") : dataset.files[0].string()) + ": " +
                      std::to_string(n) + " records are too few for a validation fraction of " +
                      std::to_string(validation_fraction) + ": nothing would be left for training");
    const auto order = shuffled_indices(n, seed);
    std::vector<char> is_val(n, 0);
    for (size_t k = 0; k < n_val; ++k) is_val[order[k]] = 1;
    DatasetSplit out;
    out.train.format = out.validation.format = dataset.format;
    out.train.files = out.validation.files = dataset.files;
    out.train.invalid = std::move(dataset.invalid);
    out.train.total_records = dataset.total_records;
    // Records keep their file order inside each part (the packer shuffles later).
    for (size_t i = 0; i < n; ++i)
        (is_val[i] ? out.validation : out.train).records.push_back(std::move(dataset.records[i]));
    out.validation.total_records = static_cast<int64_t>(out.validation.records.size());
    out.train.total_records -= out.validation.total_records;
    return out;
}

namespace {

// A record's bytes inside the file text.
struct Chunk {
    size_t begin = 0;
    size_t end = 0;
    uint32_t line = 0;     // 1-based line of `begin`
    int64_t element = -1;  // JSON array element index
    bool at_eof = false;   // JSONL: the last line, without a final newline
};

struct RecordError {
    InvalidReason reason;
    std::string message;
};

[[noreturn]] void bad(InvalidReason reason, std::string message) {
    throw RecordError{reason, std::move(message)};
}

bool is_ws(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string type_name(const json& v) {
    switch (v.type()) {
        case json::value_t::null:
            return "null";
        case json::value_t::boolean:
            return "a boolean";
        case json::value_t::number_integer:
        case json::value_t::number_unsigned:
        case json::value_t::number_float:
            return "a number";
        case json::value_t::string:
            return "a string";
        case json::value_t::array:
            return "an array";
        case json::value_t::object:
            return "an object";
        default:
            return "something else";
    }
}

// Moves a string member out of obj. Missing or null -> nullopt when optional, else MissingKey.
std::optional<std::string> take_string(json& obj, const char* key, bool required, std::string_view what = {}) {
    auto it = obj.find(key);
    const std::string name = what.empty() ? "\"" + std::string(key) + "\"" : std::string(what);
    if (it == obj.end() || it->is_null()) {
        if (required) bad(InvalidReason::MissingKey, "missing " + name);
        return std::nullopt;
    }
    if (!it->is_string()) bad(InvalidReason::WrongType, name + " is " + type_name(*it) + ", expected a string");
    return std::move(it->get_ref<std::string&>());
}

Message text_message(std::string role, std::string content) {
    Message m;
    m.role = std::move(role);
    m.content = std::move(content);
    return m;
}

bool blank(std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return is_ws(c); });
}

json take_tools(json& obj) {
    auto it = obj.find("tools");
    if (it == obj.end() || it->is_null()) return nullptr;
    if (it->is_string()) {
        if (blank(it->get_ref<const std::string&>())) return nullptr;
        json parsed = json::parse(it->get_ref<const std::string&>(), nullptr, false);
        if (parsed.is_discarded() || !parsed.is_array())
            bad(InvalidReason::WrongType, "\"tools\" is a string that does not hold a JSON array");
        return parsed;
    }
    if (!it->is_array()) bad(InvalidReason::WrongType, "\"tools\" is " + type_name(*it) + ", expected an array");
    return std::move(*it);
}

// Keeps the conversation up to its last assistant turn (later turns train nothing).
void finish_conversation(std::vector<Message>& messages) {
    if (messages.empty()) bad(InvalidReason::Empty, "empty conversation");
    size_t last = messages.size();
    for (size_t i = messages.size(); i-- > 0;)
        if (messages[i].role == "assistant") {
            last = i;
            break;
        }
    if (last == messages.size()) bad(InvalidReason::NoAssistantTurn, "conversation has no assistant turn");
    messages.resize(last + 1);
}

// Applies ReadOptions::columns to one record: the file's key becomes the dataset key.
void rename_columns(json& obj, const std::map<std::string, std::string>& columns) {
    if (columns.empty() || !obj.is_object()) return;
    for (const auto& [key, src] : columns) {
        if (key == src) continue;
        auto it = obj.find(src);
        if (it == obj.end()) continue;
        json v = std::move(*it);
        obj.erase(src);
        obj[key] = std::move(v);
    }
}

Record convert_alpaca(json& obj) {
    Record r;
    auto instruction = take_string(obj, "instruction", true);
    auto input = take_string(obj, "input", false);
    auto output = take_string(obj, "output", true);
    auto system = take_string(obj, "system", false);
    if (system && !system->empty()) r.messages.push_back(text_message("system", std::move(*system)));
    if (auto it = obj.find("history"); it != obj.end() && !it->is_null()) {
        if (!it->is_array()) bad(InvalidReason::WrongType, "\"history\" is " + type_name(*it) + ", expected an array");
        for (size_t k = 0; k < it->size(); ++k) {
            json& pair = (*it)[k];
            if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string())
                bad(InvalidReason::WrongType,
                    "\"history\"[" + std::to_string(k) + "] is not a [user, assistant] pair of strings");
            r.messages.push_back(text_message("user", std::move(pair[0].get_ref<std::string&>())));
            r.messages.push_back(text_message("assistant", std::move(pair[1].get_ref<std::string&>())));
        }
    }
    std::string user = std::move(*instruction);
    if (input && !input->empty()) user = user.empty() ? std::move(*input) : user + "\n\n" + *input;
    if (blank(user)) bad(InvalidReason::Empty, "\"instruction\" and \"input\" are empty");
    if (blank(*output)) bad(InvalidReason::Empty, "\"output\" is empty");
    r.messages.push_back(text_message("user", std::move(user)));
    r.messages.push_back(text_message("assistant", std::move(*output)));
    return r;
}

Record convert_chat(json& obj) {
    Record r;
    auto it = obj.find("messages");
    if (it == obj.end() || it->is_null()) bad(InvalidReason::MissingKey, "missing \"messages\"");
    if (!it->is_array()) bad(InvalidReason::WrongType, "\"messages\" is " + type_name(*it) + ", expected an array");
    for (size_t k = 0; k < it->size(); ++k) {
        json& m = (*it)[k];
        const std::string where = "message " + std::to_string(k);
        if (!m.is_object()) bad(InvalidReason::WrongType, where + " is " + type_name(m) + ", expected an object");
        auto role = take_string(m, "role", true, where + " \"role\"");
        if (*role != "system" && *role != "user" && *role != "assistant" && *role != "tool")
            bad(InvalidReason::UnknownRole,
                where + " has unknown role \"" + *role + "\" (expected system, user, assistant or tool)");
        Message msg = text_message(std::move(*role), {});
        if (auto tc = m.find("tool_calls"); tc != m.end() && !tc->is_null()) {
            if (!tc->is_array()) bad(InvalidReason::WrongType, where + " \"tool_calls\" is not an array");
            msg.tool_calls = std::move(*tc);
            msg.is_tool_call = true;
        }
        auto content = take_string(m, "content", msg.tool_calls.is_null(), where + " \"content\"");
        if (content) msg.content = std::move(*content);
        if (msg.role == "assistant" && msg.tool_calls.is_null() && blank(msg.content))
            bad(InvalidReason::Empty, where + " (assistant) is empty");
        r.messages.push_back(std::move(msg));
    }
    finish_conversation(r.messages);
    r.tools = take_tools(obj);
    return r;
}

Record convert_sharegpt(json& obj) {
    Record r;
    auto system = take_string(obj, "system", false);
    if (system && !system->empty()) r.messages.push_back(text_message("system", std::move(*system)));
    auto it = obj.find("conversations");
    if (it == obj.end() || it->is_null()) bad(InvalidReason::MissingKey, "missing \"conversations\"");
    if (!it->is_array())
        bad(InvalidReason::WrongType, "\"conversations\" is " + type_name(*it) + ", expected an array");
    for (size_t k = 0; k < it->size(); ++k) {
        json& m = (*it)[k];
        const std::string where = "turn " + std::to_string(k);
        if (!m.is_object()) bad(InvalidReason::WrongType, where + " is " + type_name(m) + ", expected an object");
        auto from = take_string(m, "from", true, where + " \"from\"");
        auto value = take_string(m, "value", true, where + " \"value\"");
        Message msg;
        // function_call is the assistant's turn (the call is what it must learn to produce); observation is
        // the tool's answer.
        if (*from == "human" || *from == "user")
            msg.role = "user";
        else if (*from == "gpt" || *from == "assistant")
            msg.role = "assistant";
        else if (*from == "system")
            msg.role = "system";
        else if (*from == "function_call") {
            msg.role = "assistant";
            msg.is_tool_call = true;
        } else if (*from == "observation" || *from == "tool" || *from == "function")
            msg.role = "tool";
        else
            bad(InvalidReason::UnknownRole, where + " has unknown \"from\": \"" + *from +
                                                "\" (expected human, gpt, system, function_call or observation)");
        msg.content = std::move(*value);
        if (msg.role == "assistant" && blank(msg.content))
            bad(InvalidReason::Empty, where + " (" + *from + ") is empty");
        r.messages.push_back(std::move(msg));
    }
    finish_conversation(r.messages);
    r.tools = take_tools(obj);
    return r;
}

Record convert_prompt_completion(json& obj) {
    Record r;
    r.prompt = std::move(*take_string(obj, "prompt", true));
    r.completion = std::move(*take_string(obj, "completion", true));
    if (blank(r.completion)) bad(InvalidReason::Empty, "\"completion\" is empty");
    return r;
}

Record convert_text(json& obj) {
    Record r;
    r.text = std::move(*take_string(obj, "text", true));
    if (blank(r.text)) bad(InvalidReason::Empty, "\"text\" is empty");
    return r;
}

Record convert(json& obj, DatasetFormat format) {
    if (!obj.is_object()) bad(InvalidReason::NotAnObject, "record is " + type_name(obj) + ", expected an object");
    switch (format) {
        case DatasetFormat::Alpaca:
            return convert_alpaca(obj);
        case DatasetFormat::Chat:
            return convert_chat(obj);
        case DatasetFormat::ShareGpt:
            return convert_sharegpt(obj);
        case DatasetFormat::PromptCompletion:
            return convert_prompt_completion(obj);
        case DatasetFormat::Text:
            return convert_text(obj);
        case DatasetFormat::Auto:
            break;
    }
    throw_internal("convert: format not resolved");
}

// Splits a JSON array into its top-level elements without parsing them. Strings and escapes are tracked so
// brackets inside strings do not count. A file that ends before the array closes is reported as truncated.
std::vector<Chunk> split_json_array(const std::string& text, size_t open, const std::string& path) {
    std::vector<Chunk> chunks;
    uint32_t line = 1;
    for (size_t k = 0; k < open; ++k) line += text[k] == '\n';
    const uint32_t open_line = line;
    size_t i = open + 1;
    const size_t n = text.size();
    int64_t element = 0;
    auto skip_ws = [&] {
        while (i < n && is_ws(text[i])) line += text[i++] == '\n';
    };
    auto truncated = [&](const Chunk* inside) {
        std::string msg = path + ":" + std::to_string(line) + ": truncated file: the JSON array opened at line " +
                          std::to_string(open_line) + " is not closed";
        if (inside)
            msg += " (the file ends inside element " + std::to_string(inside->element) + ", which starts at line " +
                   std::to_string(inside->line) + ")";
        throw_invalid(msg + "; was the file cut off while copying or downloading?");
    };
    skip_ws();
    if (i < n && text[i] == ']') {
        ++i;
    } else {
        for (;;) {
            skip_ws();
            if (i >= n) truncated(nullptr);
            Chunk c{i, i, line, element++};
            int depth = 0;
            bool in_string = false, done = false, closed = false;
            while (i < n) {
                const char ch = text[i];
                if (in_string) {
                    if (ch == '\\') {
                        if (i + 1 < n && text[i + 1] == '\n') ++line;
                        i += 2;
                        continue;
                    }
                    if (ch == '"')
                        in_string = false;
                    else if (ch == '\n')
                        ++line;
                    ++i;
                    continue;
                }
                if (ch == '"')
                    in_string = true;
                else if (ch == '{' || ch == '[')
                    ++depth;
                else if (ch == '}' || ch == ']') {
                    if (depth > 0)
                        --depth;
                    else if (ch == ']') {
                        closed = true;
                        done = true;
                        break;
                    }
                    // a stray '}' at depth 0 stays in the element: its parser reports the syntax error
                } else if (ch == ',' && depth == 0) {
                    done = true;
                    break;
                } else if (ch == '\n')
                    ++line;
                ++i;
            }
            if (!done) {
                c.end = n;
                truncated(&c);
            }
            c.end = i;
            while (c.end > c.begin && is_ws(text[c.end - 1])) --c.end;
            chunks.push_back(c);
            ++i;  // past ',' or ']'
            if (closed) break;
        }
    }
    skip_ws();
    if (i < n)
        throw_invalid(path + ":" + std::to_string(line) +
                      ": unexpected text after the end of the JSON array (expected one array of records)");
    return chunks;
}

// ----- CSV / TSV (RFC 4180) -------------------------------------------------------------------------------
// A row of a delimited file: its fields (quotes removed, "" -> ", CRLF inside quotes -> LF) and the 1-based
// lines it starts and ends on (a quoted field may hold newlines).
struct CsvRow {
    std::vector<std::string> fields;
    uint32_t line = 0;
    uint32_t last_line = 0;
};

// Reads one row at a time. A field is quoted only when its first character is '"'; inside quotes separators,
// newlines and doubled quotes are data. A '"' inside an unquoted field is kept as it is. Rows end at LF,
// CRLF or a lone CR; empty lines between rows are skipped. Errors are Error{InvalidInput} naming path:line.
class CsvScanner {
   public:
    CsvScanner(const std::string& text, size_t start, char sep, const std::string& path)
        : text_(text), i_(start), sep_(sep), path_(path) {}

    bool next(CsvRow& row) {
        const size_t n = text_.size();
        // Skip empty lines (a trailing newline at the end of the file, blank lines between rows).
        while (i_ < n && (text_[i_] == '\n' || text_[i_] == '\r')) eol();
        if (i_ >= n) return false;
        row.fields.clear();
        row.line = line_;
        for (;;) {
            std::string field;
            if (text_[i_] == '"') {
                quoted(field, row.line);
            } else {
                const size_t b = i_;
                while (i_ < n && text_[i_] != sep_ && text_[i_] != '\n' && text_[i_] != '\r') ++i_;
                field.assign(text_, b, i_ - b);
            }
            row.fields.push_back(std::move(field));
            if (i_ < n && text_[i_] == sep_) {
                ++i_;
                if (i_ >= n || text_[i_] == '\n' || text_[i_] == '\r') {  // "a,b," -> a trailing empty field
                    row.fields.emplace_back();
                    break;
                }
                continue;
            }
            break;
        }
        row.last_line = line_;
        if (i_ < n) eol();
        return true;
    }

   private:
    void eol() {
        if (text_[i_] == '\r' && i_ + 1 < text_.size() && text_[i_ + 1] == '\n') ++i_;
        ++i_;
        ++line_;
    }

    void quoted(std::string& field, uint32_t row_line) {
        const size_t n = text_.size();
        const uint32_t open_line = line_;
        ++i_;  // the opening quote
        for (;;) {
            if (i_ >= n)
                throw_invalid(path_ + ":" + std::to_string(open_line) +
                              ": a quoted field opens on this line" +
                              (row_line != open_line ? " (in the row that starts on line " +
                                                           std::to_string(row_line) + ")"
                                                     : std::string()) +
                              " and its quote is never closed: the rest of the file was read as part of it. Close "
                              "the quote, and write a quote inside a quoted field as two quotes (\"\")");
            const char c = text_[i_];
            if (c == '"') {
                if (i_ + 1 < n && text_[i_ + 1] == '"') {
                    field += '"';
                    i_ += 2;
                    continue;
                }
                ++i_;
                break;
            }
            if (c == '\r' && i_ + 1 < n && text_[i_ + 1] == '\n') {
                field += '\n';
                i_ += 2;
                ++line_;
                continue;
            }
            if (c == '\n') ++line_;
            field += c;
            ++i_;
        }
        // After the closing quote: optional spaces, then a separator or the end of the row.
        while (i_ < n && (text_[i_] == ' ' || (text_[i_] == '\t' && sep_ != '\t'))) ++i_;
        if (i_ < n && text_[i_] != sep_ && text_[i_] != '\n' && text_[i_] != '\r')
            throw_invalid(path_ + ":" + std::to_string(line_) + ": unexpected text after the closing quote of a "
                          "field that opens on line " + std::to_string(open_line) +
                          ": a quote inside a quoted field must be written as two quotes (\"\")");
    }

    const std::string& text_;
    size_t i_;
    uint32_t line_ = 1;
    char sep_;
    const std::string& path_;
};

std::string lower_trimmed(std::string_view s) {
    while (!s.empty() && is_ws(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_ws(s.back())) s.remove_suffix(1);
    std::string r(s);
    std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return r;
}

// Columns whose cells hold JSON (an array) rather than text.
bool json_column(std::string_view name) {
    return name == "messages" || name == "conversations" || name == "history";
}

const char* kCsvColumnSets =
    "\"instruction\" + \"output\" (alpaca; optional \"input\", \"system\"), \"prompt\" + \"completion\" "
    "(prompt_completion), \"text\" (text), \"messages\" (chat: each cell a JSON array of {role, content}) or "
    "\"conversations\" (sharegpt: each cell a JSON array of {from, value})";

std::vector<Chunk> split_lines(const std::string& text, size_t start) {
    std::vector<Chunk> chunks;
    uint32_t line = 1;
    for (size_t k = 0; k < start; ++k) line += text[k] == '\n';
    size_t i = start;
    while (i < text.size()) {
        size_t e = text.find('\n', i);
        const bool eof = e == std::string::npos;
        if (eof) e = text.size();
        if (!blank(std::string_view(text).substr(i, e - i))) chunks.push_back({i, e, line, -1, eof});
        ++line;
        i = e + 1;
    }
    return chunks;
}

std::string shown_keys(const std::map<std::string, int>& keys) {
    std::string s;
    for (const auto& [k, n] : keys) s += (s.empty() ? "" : ", ") + ("\"" + k + "\"");
    return s.empty() ? "none" : s;
}

const char* kFormatNeeds =
    "alpaca needs \"instruction\" and \"output\"; chat needs \"messages\"; sharegpt needs \"conversations\"; "
    "prompt_completion needs \"prompt\" and \"completion\"; text needs \"text\"";

struct Reader {
    const std::filesystem::path& path;
    const ReadOptions& options;
    const std::string& text;
    Dataset& out;
    std::string path_str = path.string();

    std::string where(const Chunk& c) const {
        std::string s = path_str + ":" + std::to_string(c.line);
        if (c.element >= 0) s += " (element " + std::to_string(c.element) + ")";
        return s;
    }

    void invalid(const Chunk& c, InvalidReason reason, std::string message) {
        out.invalid.add({where(c), reason, std::move(message)});
    }

    // Parses one chunk; nullopt (and an invalid record) on bad UTF-8 or JSON.
    std::optional<json> parse(const Chunk& c, bool record_errors) {
        std::string_view s(text.data() + c.begin, c.end - c.begin);
        size_t bad_off = 0;
        if (!utf8::is_valid(s, &bad_off)) {
            if (record_errors) {
                size_t l, col;
                utf8::line_col(s, bad_off, l, col);
                invalid(c, InvalidReason::InvalidUtf8,
                        "invalid UTF-8 at byte offset " + std::to_string(c.begin + bad_off) + " (line " +
                            std::to_string(c.line + l - 1) + ", column " + std::to_string(col) + ")");
            }
            return std::nullopt;
        }
        try {
            json v = json::parse(s);
            rename_columns(v, options.columns);
            return v;
        } catch (const json::parse_error& e) {
            if (record_errors) {
                size_t l, col;
                utf8::line_col(s, e.byte > 0 ? e.byte - 1 : 0, l, col);
                std::string what = e.what();
                if (auto p = what.find("syntax error"); p != std::string::npos) what = what.substr(p);
                std::string msg = "invalid JSON at line " + std::to_string(c.line + l - 1) + ", column " +
                                  std::to_string(col) + ": " + what;
                if (c.at_eof) msg += " (the file ends inside this record: truncated?)";
                invalid(c, InvalidReason::JsonSyntax, msg);
            }
            return std::nullopt;
        } catch (const json::out_of_range& e) {  // a number beyond double's range (1e309): no byte offset
            if (record_errors) {
                std::string what = e.what();
                if (auto p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
                invalid(c, InvalidReason::JsonSyntax, "invalid JSON: " + what + " (beyond the range of a double)");
            }
            return std::nullopt;
        }
    }

    DatasetFormat detect(const std::vector<Chunk>& chunks) {
        std::map<std::string, int> keys;
        std::map<DatasetFormat, int> votes;
        DatasetFormat first = DatasetFormat::Auto;
        int objects = 0;
        for (size_t k = 0; k < chunks.size() && objects < 32; ++k) {
            auto v = parse(chunks[k], false);
            if (!v || !v->is_object()) continue;
            ++objects;
            std::vector<std::string> ks;
            for (auto it = v->begin(); it != v->end(); ++it) {
                ks.push_back(it.key());
                ++keys[it.key()];
            }
            const auto has = [&](const char* key) { return v->contains(key); };
            if (has("chosen") && has("rejected"))
                throw_unsupported(where(chunks[k]) +
                                  ": this is a preference (DPO) dataset (keys \"chosen\"/\"rejected\"); "
                                  "supervised fine-tuning needs alpaca, chat, sharegpt, prompt_completion or "
                                  "text records");
            const auto f = format_from_keys(ks);
            if (f != DatasetFormat::Auto) {
                if (first == DatasetFormat::Auto) first = f;
                ++votes[f];
            }
        }
        if (objects == 0) return DatasetFormat::Auto;  // every record is broken: the invalid count reports it
        if (votes.empty()) {
            std::string hint;
            if (keys.count("turns"))
                hint =
                    " The records look like an evaluation question set (MT-Bench style \"turns\" hold prompts "
                    "without responses): there is nothing to train on.";
            throw_invalid(path_str + ": cannot tell the dataset format: the first " + std::to_string(objects) +
                          " records have the keys " + shown_keys(keys) + ". Expected: " + kFormatNeeds + "." + hint +
                          " Choose the format explicitly if the keys are right.");
        }
        DatasetFormat best = first;
        for (const auto& [f, n] : votes)
            if (n > votes[best]) best = f;
        return best;
    }

    void read_json_records(const std::vector<Chunk>& chunks) {
        DatasetFormat format = options.format;
        if (format == DatasetFormat::Auto) format = detect(chunks);
        out.format = format;
        out.records.reserve(chunks.size());
        for (const Chunk& c : chunks) {
            ++out.total_records;
            auto v = parse(c, true);
            if (!v) continue;
            if (format == DatasetFormat::Auto) {  // no record was an object, so none could be detected
                invalid(c, InvalidReason::NotAnObject, "record is " + type_name(*v) + ", expected an object");
                continue;
            }
            try {
                Record r = convert(*v, format);
                r.location = {0, c.line, c.element};
                out.records.push_back(std::move(r));
            } catch (const RecordError& e) {
                invalid(c, e.reason, e.message);
            }
        }
    }

    void read_text(size_t start) {
        if (options.format != DatasetFormat::Auto && options.format != DatasetFormat::Text)
            throw_invalid(path_str + ": a .txt file holds plain text; it cannot be read as " +
                          std::string(dataset_format_name(options.format)) + " records");
        out.format = DatasetFormat::Text;
        const std::string_view all(text);
        auto add_doc = [&](size_t b, size_t e, uint32_t line) {
            while (e > b && is_ws(all[e - 1])) --e;
            if (e <= b) return;
            ++out.total_records;
            std::string_view s = all.substr(b, e - b);
            size_t bad_off = 0;
            Chunk c{b, e, line};
            if (!utf8::is_valid(s, &bad_off)) {
                size_t l, col;
                utf8::line_col(s, bad_off, l, col);
                invalid(c, InvalidReason::InvalidUtf8,
                        "invalid UTF-8 at byte offset " + std::to_string(b + bad_off) + " (line " +
                            std::to_string(line + l - 1) + ", column " + std::to_string(col) + ")");
                return;
            }
            Record r;
            r.text.assign(s);
            if (r.text.find('\r') != std::string::npos) std::erase(r.text, '\r');
            r.location = {0, line, -1};
            out.records.push_back(std::move(r));
        };
        if (options.text_split == TextSplit::WholeFile) {
            add_doc(start, all.size(), 1);
            return;
        }
        size_t doc_begin = std::string::npos;
        uint32_t doc_line = 0, line = 1;
        size_t i = start;
        while (i <= all.size()) {
            size_t e = all.find('\n', i);
            if (e == std::string::npos) e = all.size();
            const bool empty_line = blank(all.substr(i, e - i));
            if (options.text_split == TextSplit::Lines) {
                if (!empty_line) add_doc(i, e, line);
            } else if (empty_line) {
                if (doc_begin != std::string::npos) add_doc(doc_begin, i, doc_line);
                doc_begin = std::string::npos;
            } else if (doc_begin == std::string::npos) {
                doc_begin = i;
                doc_line = line;
            }
            ++line;
            i = e + 1;
        }
        if (doc_begin != std::string::npos) add_doc(doc_begin, all.size(), doc_line);
    }

    // A .csv / .tsv file: a header row naming the columns, then one record per row. Columns map to the record
    // formats by the keys the JSON readers use (case and surrounding spaces ignored); other columns are ignored.
    void read_csv(size_t start, char sep) {
        const std::string kind = sep == '\t' ? "TSV" : "CSV";
        const std::string sep_name = sep == '\t' ? "tab" : "comma";
        CsvScanner scanner(text, start, sep, path_str);
        CsvRow header;
        if (!scanner.next(header)) throw_invalid(path_str + ": the file holds no header row");
        const std::string header_at = path_str + ":" + std::to_string(header.line);
        std::vector<std::string> names;
        std::string shown;
        for (const std::string& f : header.fields) {
            names.push_back(lower_trimmed(f));
            shown += (shown.empty() ? "" : ", ") + ("\"" + f + "\"");
        }
        for (const auto& [key, src] : options.columns) {
            const auto it = std::find(names.begin(), names.end(), lower_trimmed(src));
            if (it == names.end())
                throw_invalid(header_at + ": the column mapping " + key + "=" + src + " names a column the header "
                              "lacks: its columns are " + shown);
            *it = key;
        }
        for (size_t a = 0; a < names.size(); ++a)
            for (size_t b = a + 1; b < names.size(); ++b)
                if (!names[a].empty() && names[a] == names[b])
                    throw_invalid(header_at + ": the header names the column \"" + names[a] + "\" twice (columns " +
                                  std::to_string(a + 1) + " and " + std::to_string(b + 1) +
                                  "); rename or remove one of them");
        std::vector<std::string> keys;
        for (const auto& nm : names)
            if (!nm.empty()) keys.push_back(nm);
        const auto has = [&](std::string_view k) { return std::find(keys.begin(), keys.end(), k) != keys.end(); };
        const std::string expected = ". A " + kind + " dataset needs a header row naming one of these column sets: " +
                                     kCsvColumnSets;
        DatasetFormat format = options.format;
        if (format == DatasetFormat::Auto) {
            if (has("chosen") && has("rejected"))
                throw_unsupported(header_at +
                                  ": this is a preference (DPO) dataset (columns \"chosen\"/\"rejected\"); "
                                  "supervised fine-tuning needs alpaca, chat, sharegpt, prompt_completion or "
                                  "text records");
            format = format_from_keys(keys);
            if (format == DatasetFormat::Auto) {
                std::string hint;
                const std::string& only = header.fields.size() == 1 ? header.fields[0] : std::string();
                if (sep == ',' && (only.find(';') != std::string::npos || only.find('\t') != std::string::npos))
                    hint = " The header is one column holding ';' or tabs: this file uses another separator; save "
                           "it with commas (or as .tsv for tabs).";
                else if (sep == '\t' && only.find(',') != std::string::npos)
                    hint = " The header is one column holding commas: save the file as .csv, or separate the "
                           "columns with tabs.";
                throw_invalid(header_at + ": no known column set in the header: its columns are " + shown +
                              expected + "." + hint + " Rename the columns (the first row must be the header).");
            }
        } else {
            bool ok = false;
            switch (format) {
                case DatasetFormat::Alpaca:
                    ok = has("instruction") && has("output");
                    break;
                case DatasetFormat::Chat:
                    ok = has("messages");
                    break;
                case DatasetFormat::ShareGpt:
                    ok = has("conversations");
                    break;
                case DatasetFormat::PromptCompletion:
                    ok = has("prompt") && has("completion");
                    break;
                case DatasetFormat::Text:
                    ok = has("text");
                    break;
                case DatasetFormat::Auto:
                    break;
            }
            if (!ok)
                throw_invalid(header_at + ": the header lacks the columns the " +
                              std::string(dataset_format_name(format)) + " format needs: its columns are " + shown +
                              expected + ".");
        }
        out.format = format;

        CsvRow row;
        while (scanner.next(row)) {
            if (row.fields.size() != names.size()) {
                std::string msg = path_str + ":" + std::to_string(row.line) + ": this row has " +
                                  std::to_string(row.fields.size()) + " field" + (row.fields.size() == 1 ? "" : "s") +
                                  " but the header (line " + std::to_string(header.line) + ") has " +
                                  std::to_string(names.size()) + " columns";
                if (row.last_line != row.line)
                    msg += " (the row runs on to line " + std::to_string(row.last_line) +
                           " inside quotes: is a quote not closed?)";
                msg += ". Put every field that holds a " + sep_name +
                       ", a quote or a line break in double quotes (a quote inside as \"\"), and give every row "
                       "as many fields as the header";
                throw_invalid(msg);
            }
            ++out.total_records;
            const Chunk c{0, 0, row.line};
            json obj = json::object();
            bool ok = true;
            for (size_t k = 0; k < names.size() && ok; ++k) {
                const std::string& nm = names[k];
                if (nm.empty()) continue;
                std::string& cell = row.fields[k];
                size_t bad_off = 0;
                if (!utf8::is_valid(cell, &bad_off)) {
                    invalid(c, InvalidReason::InvalidUtf8,
                            "invalid UTF-8 in column \"" + nm + "\" at byte " + std::to_string(bad_off) +
                                " of the field (save the file as UTF-8)");
                    ok = false;
                } else if (json_column(nm)) {
                    if (blank(cell)) {
                        obj[nm] = nullptr;
                    } else {
                        json v = json::parse(cell, nullptr, false);
                        if (v.is_discarded()) {
                            invalid(c, InvalidReason::WrongType,
                                    "column \"" + nm + "\" does not hold valid JSON (expected a JSON array)");
                            ok = false;
                        } else {
                            obj[nm] = std::move(v);
                        }
                    }
                } else {
                    obj[nm] = std::move(cell);
                }
            }
            if (!ok) continue;
            try {
                Record r = convert(obj, format);
                r.location = {0, row.line, -1};
                out.records.push_back(std::move(r));
            } catch (const RecordError& e) {
                invalid(c, e.reason, e.message);
            }
        }
        if (out.total_records == 0)
            throw_invalid(path_str + ": the " + kind + " file has a header row (columns " + shown +
                          ") but no data rows");
    }

    // A .parquet file: top-level columns are the keys; the known ones are decoded, each row is one record.
    void read_parquet() {
        const parquet::File file(text, path_str);
        const std::vector<std::string> columns = file.fields();
        // The dataset key each column stands for (itself unless mapped).
        std::vector<std::string> fields = columns;
        for (const auto& [key, src] : options.columns) {
            const auto it = std::find(columns.begin(), columns.end(), src);
            if (it == columns.end()) {
                std::string all;
                for (const auto& c : columns) all += (all.empty() ? "" : ", ") + ("\"" + c + "\"");
                throw_invalid(path_str + ": the column mapping " + key + "=" + src +
                              " names a column the Parquet file lacks: its columns are " + all);
            }
            fields[static_cast<size_t>(it - columns.begin())] = key;
        }
        std::string shown;
        for (const auto& f : fields) shown += (shown.empty() ? "" : ", ") + ("\"" + f + "\"");
        const auto has = [&](std::string_view k) { return std::find(fields.begin(), fields.end(), k) != fields.end(); };
        DatasetFormat format = options.format;
        if (format == DatasetFormat::Auto) {
            if (has("chosen") && has("rejected"))
                throw_unsupported(path_str +
                                  ": this is a preference (DPO) dataset (columns \"chosen\"/\"rejected\"); "
                                  "supervised fine-tuning needs alpaca, chat, sharegpt, prompt_completion or "
                                  "text records");
            format = format_from_keys(fields);
            if (format == DatasetFormat::Auto)
                throw_invalid(path_str + ": cannot tell the dataset format: the Parquet file's columns are " +
                              (shown.empty() ? std::string("none") : shown) + ". Expected: " + kFormatNeeds +
                              ". Rename the columns (e.g. with pyarrow or datasets' rename_column) or convert the "
                              "file to JSON Lines");
        }
        out.format = format;
        static const char* kKnown[] = {"instruction", "input",    "output", "system", "history",    "messages",
                                       "conversations", "prompt", "completion", "text", "tools"};
        std::vector<std::string> wanted;  // the file's names of the columns to decode
        for (const char* k : kKnown)
            if (has(k)) wanted.push_back(columns[static_cast<size_t>(std::find(fields.begin(), fields.end(), k) - fields.begin())]);
        std::vector<json> rows = file.read_rows(wanted);
        out.records.reserve(rows.size());
        for (size_t i = 0; i < rows.size(); ++i) {
            ++out.total_records;
            const Chunk c{0, 0, static_cast<uint32_t>(std::min<size_t>(i + 1, UINT32_MAX))};
            json& obj = rows[i];
            rename_columns(obj, options.columns);
            std::string bad_col;
            if (!valid_utf8(obj, bad_col)) {
                invalid(c, InvalidReason::InvalidUtf8, "invalid UTF-8 in column \"" + bad_col + "\" (row " +
                                                           std::to_string(i + 1) + ")");
                continue;
            }
            // Chat columns stored as JSON text (a common export) are parsed like the CSV reader does.
            for (const char* k : {"messages", "conversations", "history"}) {
                auto it = obj.find(k);
                if (it == obj.end() || !it->is_string()) continue;
                json v = json::parse(it->get_ref<const std::string&>(), nullptr, false);
                if (!v.is_discarded()) *it = std::move(v);
            }
            try {
                Record r = convert(obj, format);
                r.location = {0, c.line, -1};
                out.records.push_back(std::move(r));
            } catch (const RecordError& e) {
                invalid(c, e.reason, e.message);
            }
            json().swap(obj);  // free the row as we go
        }
        if (out.total_records == 0) throw_invalid(path_str + ": the Parquet file holds no rows");
    }

    static bool valid_utf8(const json& v, std::string& where) {
        if (v.is_string()) return utf8::is_valid(v.get_ref<const std::string&>());
        if (v.is_array()) {
            for (const auto& e : v)
                if (!valid_utf8(e, where)) return false;
        } else if (v.is_object()) {
            for (auto it = v.begin(); it != v.end(); ++it)
                if (!valid_utf8(it.value(), where)) {
                    where = it.key();  // the outermost key wins: the column
                    return false;
                }
        }
        return true;
    }

    void check_counts() {
        std::string first;
        for (size_t k = 0; k < out.invalid.first.size() && k < 5; ++k)
            first += "\n  " + out.invalid.first[k].location + ": " + out.invalid.first[k].message;
        if (out.records.empty())
            throw_invalid(path_str + ": no valid records (" + std::to_string(out.total_records) + " read, " +
                          std::to_string(out.invalid.count) + " invalid)" +
                          (first.empty() ? std::string() : ":" + first));
        const double share = static_cast<double>(out.invalid.count) / static_cast<double>(out.total_records);
        if (share > options.max_invalid_fraction) {
            std::ostringstream pct;
            pct.precision(3);
            pct << share * 100 << "% of the records are invalid (" << out.invalid.count << " of " << out.total_records
                << "), more than the " << options.max_invalid_fraction * 100
                << "% allowed (raise the invalid-record limit to load the valid ones anyway)";
            throw_invalid(path_str + ": " + pct.str() + ". First ones:" + first);
        }
    }
};

}  // namespace

std::vector<std::string> dataset_columns(const std::filesystem::path& path) {
    const std::string text = read_file(path);
    const std::string p = path.string();
    if (text.empty()) throw_invalid(p + ": the file is empty");
    std::string ext = path.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    if (ext == ".parquet" || parquet::has_magic(text)) return parquet::File(text, p).fields();
    size_t start = 0;
    if (text.size() >= 3 && text.compare(0, 3, "\xEF\xBB\xBF") == 0) start = 3;
    std::vector<std::string> out;
    if (ext == ".csv" || ext == ".tsv") {
        CsvScanner scanner(text, start, ext == ".tsv" ? '\t' : ',', p);
        CsvRow header;
        if (scanner.next(header))
            for (const std::string& f : header.fields) out.push_back(f);
        return out;
    }
    if (ext == ".txt") return out;
    size_t first = start;
    while (first < text.size() && is_ws(text[first])) ++first;
    if (first == text.size()) return out;
    const std::vector<Chunk> chunks = text[first] == '[' ? split_json_array(text, first, p) : split_lines(text, start);
    int objects = 0;
    for (size_t k = 0; k < chunks.size() && objects < 32; ++k) {
        const json v = json::parse(std::string_view(text).substr(chunks[k].begin, chunks[k].end - chunks[k].begin),
                                   nullptr, false);
        if (v.is_discarded() || !v.is_object()) continue;
        ++objects;
        for (auto it = v.begin(); it != v.end(); ++it)
            if (std::find(out.begin(), out.end(), it.key()) == out.end()) out.push_back(it.key());
    }
    return out;
}

Dataset read_dataset(const std::filesystem::path& path, const ReadOptions& options) {
    for (const auto& [key, src] : options.columns) (void)parse_column_mapping(key + "=" + src);  // validates
    Dataset out;
    out.files.push_back(path);
    out.invalid.max_kept = options.max_reported_invalid;
    const std::string text = read_file(path);
    const std::string p = path.string();
    if (text.empty()) throw_invalid(p + ": the file is empty");
    std::string lower_ext = path.extension().string();
    std::transform(lower_ext.begin(), lower_ext.end(), lower_ext.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (lower_ext == ".parquet" || parquet::has_magic(text)) {
        Reader reader{path, options, text, out};
        reader.read_parquet();
        reader.check_counts();
        return out;
    }
    if (const void* nul = std::memchr(text.data(), 0, text.size()))
        throw_invalid(p + ": looks like a binary file (NUL byte at offset " +
                      std::to_string(static_cast<const char*>(nul) - text.data()) +
                      "); expected JSON, JSON Lines, CSV/TSV, Parquet or plain text (Arrow / other binary files must be "
                      "converted to JSONL first)");
    size_t start = 0;
    if (text.size() >= 3 && text.compare(0, 3, "\xEF\xBB\xBF") == 0) start = 3;  // UTF-8 byte order mark
    size_t first = start;
    while (first < text.size() && is_ws(text[first])) ++first;
    if (first == text.size()) throw_invalid(p + ": the file holds only whitespace");

    std::string ext = path.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    const bool json_ext = ext == ".json" || ext == ".jsonl" || ext == ".ndjson";
    const bool looks_json = text[first] == '[' || text[first] == '{';

    Reader reader{path, options, text, out};
    if (ext == ".csv" || ext == ".tsv") {
        reader.read_csv(start, ext == ".tsv" ? '\t' : ',');  // never read as plain text: the header is no document
    } else if (ext == ".txt" || (!json_ext && !looks_json)) {
        reader.read_text(start);
    } else if (!looks_json) {
        size_t line, col;
        utf8::line_col(text, first, line, col);
        throw_invalid(p + ":" + std::to_string(line) + ":" + std::to_string(col) +
                      ": expected a JSON array of records or JSON Lines (one object per line), found '" +
                      std::string(1, text[first]) + "'");
    } else if (text[first] == '[') {
        reader.read_json_records(split_json_array(text, first, p));
        if (out.total_records == 0) throw_invalid(p + ": the JSON array is empty: no records");
    } else {
        auto chunks = split_lines(text, start);
        // A single pretty-printed object is not JSON Lines: say so instead of reporting every line.
        if (!chunks.empty() &&
            !json::accept(std::string_view(text).substr(chunks[0].begin, chunks[0].end - chunks[0].begin))) {
            json whole = json::parse(std::string_view(text).substr(start), nullptr, false);
            if (!whole.is_discarded() && whole.is_object()) {
                std::map<std::string, int> keys;
                for (auto it = whole.begin(); it != whole.end(); ++it) keys[it.key()] = 1;
                throw_invalid(p + ": the file holds one JSON object (keys " + shown_keys(keys) +
                              "), expected an array of records or JSON Lines (one record per line)");
            }
        }
        reader.read_json_records(chunks);
    }
    reader.check_counts();
    return out;
}

}  // namespace tandem
