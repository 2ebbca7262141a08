// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem data — dataset files -> records -> rendered, masked token sequences -> packed micro-batches.
// Decisions a reader must know:
//  * Labels follow the Hugging Face convention: labels[t] == tokens[t] when token t is trained, else -100;
//    the loss shifts by one (logits at t are scored against labels[t+1]).
//    The first label of every sample is always -100, so that shift never crosses a sample boundary in a pack.
//  * Packing is best-fit-decreasing; samples are never split. Every micro-batch is exactly token_budget long
//    (real tokens first, then padding: pad id, label -100, position 0, outside every sample).
//  * Chat-style records are rendered through the model's chat template prefix by prefix and tokenized span by
//    span (see render.cpp); templates that are not prefix-stable (Qwen3) fall back to one sample per
//    assistant turn. Masks are never guessed: a record whose spans cannot be located is reported invalid.
// Plain structs and functions; no Qt, no CUDA.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem {

class Tokenizer;

// ---------------------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------------------

enum class DatasetFormat {
    Auto,              // detect from the keys of the first records
    Alpaca,            // {instruction, input?, output, system?, history?: [[user, assistant], ...]}
    Chat,              // {messages: [{role, content}], tools?}; roles system/user/assistant/tool
    ShareGpt,          // {conversations: [{from, value}], system?, tools?}
    PromptCompletion,  // {prompt, completion}
    Text,              // {text} records, or a .txt file
};
std::string_view dataset_format_name(DatasetFormat format) noexcept;  // "alpaca", "chat", "sharegpt", ...
// Parses "auto", "alpaca", "chat" (or "messages"), "sharegpt", "prompt_completion", "text"; nullopt else.
std::optional<DatasetFormat> parse_dataset_format(std::string_view name) noexcept;

// How a .txt file becomes documents. Default BlankLines: a document ends at one or more empty lines
// (tinyshakespeare -> one document per speech; TinyStories -> one per story).
enum class TextSplit { BlankLines, Lines, WholeFile };

struct ReadOptions {
    DatasetFormat format = DatasetFormat::Auto;
    TextSplit text_split = TextSplit::BlankLines;
    double max_invalid_fraction = 0.10;  // loading fails when more than this share of records is invalid
    size_t max_reported_invalid = 20;    // invalid records kept with their location (all are counted)
    // Column mapping for files whose keys are named otherwise: dataset key -> the file's column / JSON key,
    // e.g. {"instruction": "question", "output": "answer"}. Applied before format detection, by every reader
    // (JSON keys, CSV/TSV header names case-insensitively, Parquet top-level columns). Keys must be ones of
    // dataset_keys(); for CSV/TSV and Parquet a mapped column that the file lacks is refused naming its columns.
    std::map<std::string, std::string> columns;
};

// The record keys the readers know: instruction, input, output, system, history, messages, conversations,
// prompt, completion, text, tools.
const std::vector<std::string>& dataset_keys();

// Parses "KEY=COLUMN" (the CLI's --column); throws Error{InvalidInput} naming the problem.
std::pair<std::string, std::string> parse_column_mapping(std::string_view spec);

// One conversation turn after normalisation. role is system, user, assistant or tool.
struct Message {
    std::string role;
    std::string content;
    bool is_tool_call = false;  // ShareGPT function_call / chat message with tool_calls: content is the call
    nlohmann::ordered_json tool_calls;  // chat format's tool_calls passed through (null when absent)
};

// Where a record came from: file index into Dataset::files, 1-based line, element index for JSON arrays.
struct RecordLocation {
    uint32_t file = 0;
    uint32_t line = 0;
    int64_t element = -1;  // -1 for JSONL / text
};

// A valid record. Alpaca and ShareGPT are converted to messages when read; Chat/Alpaca/ShareGpt records
// use `messages`, PromptCompletion uses prompt/completion, Text uses text.
struct Record {
    std::vector<Message> messages;
    std::string prompt;
    std::string completion;
    std::string text;
    nlohmann::ordered_json tools;  // tool definitions (array) or null
    RecordLocation location;
};

// Reasons a record is skipped. The summary counts them by name.
enum class InvalidReason {
    JsonSyntax,       // the line / element is not valid JSON (or is cut off at the end of the file)
    NotAnObject,      // a JSON value that is not an object
    MissingKey,       // a key the format needs is absent
    WrongType,        // e.g. "output" is a number
    InvalidUtf8,      // with the byte offset
    Empty,            // empty text / instruction / output / conversation
    UnknownRole,      // chat role or ShareGPT "from" we do not know
    NoAssistantTurn,  // a conversation with nothing to train on
    TemplateError,    // the chat template refused the conversation (raise_exception, unsupported role)
    NotPrefixStable,  // the template's rendering of a turn is not a prefix of the conversation's rendering
};
std::string_view invalid_reason_name(InvalidReason reason) noexcept;  // "json_syntax", "wrong_type", ...

struct InvalidRecord {
    std::string location;  // "path:line" or "path:line (element 12)"
    InvalidReason reason;
    std::string message;  // "\"output\" is a number, expected a string"
};

// Counters of records that were skipped.
struct InvalidStats {
    int64_t count = 0;
    std::map<std::string, int64_t> by_reason;  // invalid_reason_name -> count
    std::vector<InvalidRecord> first;          // the first ReadOptions::max_reported_invalid of them
    size_t max_kept = 20;
    void add(InvalidRecord record);
};

struct Dataset {
    DatasetFormat format = DatasetFormat::Auto;  // the detected (or requested) format
    std::vector<std::filesystem::path> files;
    std::vector<Record> records;
    int64_t total_records = 0;  // valid + invalid
    InvalidStats invalid;
    std::string location(const RecordLocation& loc) const;  // "path:line (element N)"
};

// Reads a dataset file: .json (an array of records, or JSON Lines), .jsonl, .txt (documents per TextSplit),
// .csv / .tsv (chosen by extension; comma / tab separated, RFC 4180 quoting: quoted fields may hold separators,
// line breaks and doubled quotes; CRLF or LF rows; a UTF-8 BOM is skipped). A CSV/TSV file needs a header row;
// its column names (case and surrounding spaces ignored) are the JSON keys: instruction/output (+ input,
// system) -> Alpaca, prompt/completion, text, messages / conversations (cells holding JSON arrays), chosen by
// format_from_keys when format is Auto; other columns are ignored. Each row is one record.
// .parquet files (or any file starting with the Parquet magic) are read by engine/data/parquet.cpp: top-level
// columns are the keys (messages as list<struct<role, content>> or as JSON text), each row one record, its
// "line" the 1-based row number; a malformed or unsupported file is Error{InvalidInput} naming the file,
// row group, column and page.
// Throws Error{InvalidInput} naming the file for: empty file, binary file (NUL byte), truncated JSON array,
// no recognisable format (the message lists the keys seen and the keys each format needs), nothing valid
// left, or more than max_invalid_fraction invalid records (the message quotes the first ones with file:line);
// for CSV/TSV also with the line: a row whose field count differs from the header's, a quote that is never
// closed (the line it opens on), no known column set in the header (its columns and the accepted sets).
// Error{Io} when the file cannot be read.
Dataset read_dataset(const std::filesystem::path& path, const ReadOptions& options = {});

// The column names / keys a dataset file offers, for a front end's column-mapping choice: the header of a
// .csv / .tsv file (as written), a Parquet file's top-level columns, the keys of the first 32 records of a
// JSON / JSON Lines file (first seen first). Empty for a .txt file. Reads the file; throws as read_dataset.
std::vector<std::string> dataset_columns(const std::filesystem::path& path);

// The format a set of keys matches (Auto when none): messages -> Chat, conversations -> ShareGpt,
// instruction+output -> Alpaca, prompt+completion -> PromptCompletion, text -> Text.
DatasetFormat format_from_keys(const std::vector<std::string>& keys) noexcept;

// Deterministic train/validation split of a dataset's records: Fisher-Yates with std::mt19937_64(seed),
// round(fraction * n) records (at least one when fraction > 0) go to validation. Throws when nothing would
// be left for training.
struct DatasetSplit {
    Dataset train;
    Dataset validation;
};
DatasetSplit split_dataset(Dataset dataset, double validation_fraction, uint64_t seed);

// Fisher-Yates shuffle of [0, n) with std::mt19937_64(seed) — the same permutation on every platform
// (std::shuffle's algorithm is implementation-defined).
std::vector<uint32_t> shuffled_indices(size_t n, uint64_t seed);

// ---------------------------------------------------------------------------------------------------------
// Rendering + loss masks
// ---------------------------------------------------------------------------------------------------------

struct RenderOptions {
    // "auto": the model's chat template (tokenizer_config.json), or `fallback_template` when it has none.
    // A built-in name ("chatml", "llama3", "alpaca") forces that template.
    std::string chat_template = "auto";
    std::string fallback_template = "chatml";
    // Extra template variables. enable_thinking=false makes Qwen3's empty <think></think> block part of the
    // prompt (not trained), as Qwen3 renders the generation prompt in non-thinking mode.
    nlohmann::ordered_json template_vars = {{"enable_thinking", false}};
    bool train_on_all_tokens = false;  // default: only assistant replies + their end-of-turn token
    bool add_eos_if_missing = true;    // append EOS after an assistant turn whose rendering holds none
    int32_t max_seq_len = 2048;        // longer samples keep their head; 0 = no limit
};

// What rendering needs from a model, as functions so tests can pass a fake tokenizer/template.
struct TextCodec {
    std::function<std::vector<int32_t>(std::string_view)> encode;  // without special tokens added
    // messages (JSON array of {role, content, ...}), add_generation_prompt, extra template variables.
    std::function<std::string(const nlohmann::ordered_json&, bool, const nlohmann::ordered_json&)> render;
    std::optional<int32_t> bos_id;  // prepended to text / prompt-completion samples when adds_bos
    bool adds_bos = false;          // the tokenizer's post-processor adds BOS
    std::optional<int32_t> eos_id;
    std::string eos_token;                 // text of the end-of-turn / EOS token (e.g. "<|im_end|>")
    bool template_has_tool_calls = false;  // template reads message.tool_calls (else calls become content)
    bool template_has_tools = false;       // template reads `tools`
    std::string template_name;             // for the summary: "model" or "builtin:chatml"
};

// Builds the codec for a real tokenizer: its chat template or the chosen built-in.
TextCodec make_text_codec(const Tokenizer& tokenizer, const RenderOptions& options);

// Tokenized samples, stored flat: sample i is tokens[offsets[i] .. offsets[i+1]).
struct TokenizedDataset {
    std::vector<int32_t> tokens;      // [N] all samples back to back
    std::vector<int32_t> labels;      // [N] tokens[t] or -100; labels[offsets[i]] == -100 always
    std::vector<int64_t> offsets;     // [S+1]
    std::vector<uint32_t> record;     // [S] index of the source record in Dataset::records
    int64_t truncated = 0;            // samples cut to max_seq_len
    int64_t dropped = 0;              // samples with no trained token left (after truncation), not kept
    int64_t split_conversations = 0;  // conversations rendered one sample per assistant turn (not prefix-stable)
    InvalidStats invalid;             // records the template refused (added to the reader's counts)
    std::string template_name;

    size_t size() const { return record.size(); }
    int32_t length(size_t i) const { return static_cast<int32_t>(offsets[i + 1] - offsets[i]); }
    std::span<const int32_t> sample_tokens(size_t i) const;
    std::span<const int32_t> sample_labels(size_t i) const;
    int64_t trained_tokens() const;  // labels != -100
};

// Renders and tokenizes every record. Records the template rejects are counted in `invalid`.
TokenizedDataset tokenize_dataset(const Dataset& dataset, const TextCodec& codec, const RenderOptions& options);
TokenizedDataset tokenize_dataset(const Dataset& dataset, const Tokenizer& tokenizer, const RenderOptions& options);

// One record -> zero or more samples (appended to out). Exposed for the Data page's preview.
void tokenize_record(const Record& record, uint32_t record_index, const TextCodec& codec, const RenderOptions& options,
                     TokenizedDataset& out);

// ---------------------------------------------------------------------------------------------------------
// Packing
// ---------------------------------------------------------------------------------------------------------

struct PackOptions {
    int32_t token_budget = 8192;  // tokens per micro-batch (T)
    bool packing = true;          // false: padded mode, one sample per row
    int32_t rows = 0;             // padded mode: rows per micro-batch (0 = token_budget / longest sample)
    int32_t pad_id = 0;           // never attended nor trained; 0 is always a valid id
    uint64_t seed = 0;            // shuffles sample order before packing and the order of the batches
    bool shuffle = true;
};

// A micro-batch. T = token_budget, S = number of samples.
// Packed: sample i is tokens[cu_seqlens[i] .. cu_seqlens[i+1]); positions [cu_seqlens[S], T) are padding.
// Padded: sample i starts at row i: tokens[i*row_len ..], its length is cu_seqlens[i+1]-cu_seqlens[i]
// (cu_seqlens counts real tokens only, as for varlen attention); the rest of each row is padding.
struct PackedBatch {
    std::vector<int32_t> tokens;        // [T]
    std::vector<int32_t> labels;        // [T] tokens[t] or -100 (first token of each sample, padding: -100)
    std::vector<int32_t> position_ids;  // [T] 0.. per sample; 0 on padding
    std::vector<int32_t> cu_seqlens;    // [S+1] cumulative real sample lengths, cu_seqlens[0] = 0
    std::vector<uint32_t> samples;      // [S] indices into the TokenizedDataset
    int32_t num_samples = 0;
    int32_t max_seqlen = 0;        // longest sample
    int32_t token_budget = 0;      // T
    int32_t num_tokens = 0;        // real tokens (cu_seqlens[S])
    int32_t num_label_tokens = 0;  // labels != -100
    int32_t row_len = 0;           // padded mode: T / rows; packed mode: 0
    // Offset of sample i in tokens: cu_seqlens[i] when packed, i * row_len when padded.
    int32_t sample_offset(int32_t i) const { return row_len ? i * row_len : cu_seqlens[i]; }
};

// Which samples go into which micro-batch (indices into the lengths), before the tensors are built.
// Best-fit-decreasing (packed) or consecutive rows (padded), on a seed-shuffled order; batch order shuffled.
// Throws Error{InvalidInput} when a sample is longer than the budget (packed) or the row (padded).
std::vector<std::vector<uint32_t>> plan_batches(std::span<const int32_t> lengths, const PackOptions& options);

PackedBatch make_batch(const TokenizedDataset& data, std::span<const uint32_t> samples, const PackOptions& options);

// plan_batches + make_batch for every batch of one epoch (use seed + epoch for the next one).
std::vector<PackedBatch> pack_dataset(const TokenizedDataset& data, const PackOptions& options);

// Real tokens / (batches * token_budget).
double packing_efficiency(std::span<const int32_t> lengths, const std::vector<std::vector<uint32_t>>& plan,
                          int32_t token_budget);

// ---------------------------------------------------------------------------------------------------------
// Summary for `tandem-cli data` and the Data page
// ---------------------------------------------------------------------------------------------------------

struct LengthStats {
    int64_t count = 0;
    int64_t min = 0;
    int64_t max = 0;
    double mean = 0;
    int64_t median = 0;
    int64_t p95 = 0;
};
LengthStats length_stats(std::vector<int32_t> lengths);

struct DataSummary {
    std::string path;
    DatasetFormat format = DatasetFormat::Auto;
    std::string template_name;
    int64_t total_records = 0;
    int64_t valid_records = 0;
    int64_t invalid_records = 0;  // reader + template
    std::map<std::string, int64_t> invalid_by_reason;
    std::vector<InvalidRecord> first_invalid;
    int64_t samples = 0;
    int64_t truncated = 0;
    int64_t dropped = 0;
    int64_t split_conversations = 0;
    LengthStats lengths;  // tokens per sample
    int64_t total_tokens = 0;
    int64_t trained_tokens = 0;
    bool packing = true;
    int32_t token_budget = 0;
    int64_t batches = 0;
    double packing_efficiency = 0;
    // Validation part (from validation_fraction or a second file); zero when there is none.
    std::string validation_path;
    int64_t validation_records = 0;
    int64_t validation_samples = 0;
    int64_t validation_batches = 0;
};

DataSummary summarize(const Dataset& dataset, const TokenizedDataset& tokens, const PackOptions& options);
nlohmann::json to_json(const DataSummary& summary);
std::string to_text(const DataSummary& summary);

// ---------------------------------------------------------------------------------------------------------
// Everything at once: what `tandem-cli data` and the trainer call
// ---------------------------------------------------------------------------------------------------------

struct DataOptions {
    std::filesystem::path path;
    std::filesystem::path validation_path;  // a second file for validation; wins over validation_fraction
    double validation_fraction = 0.0;       // share of the records held out (deterministic by seed)
    uint64_t seed = 0;                      // split seed; pack.seed shuffles the batches
    ReadOptions read;
    RenderOptions render;
    PackOptions pack;
};

struct PreparedData {
    Dataset train;
    Dataset validation;  // empty when there is no validation part
    TokenizedDataset train_tokens;
    TokenizedDataset validation_tokens;
    DataSummary summary;
};

// read -> split -> tokenize -> summarize (batches are built per epoch with pack_dataset).
PreparedData prepare_data(const DataOptions& options, const TextCodec& codec);
PreparedData prepare_data(const DataOptions& options, const Tokenizer& tokenizer);

}  // namespace tandem
