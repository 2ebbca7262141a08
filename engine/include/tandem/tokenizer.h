// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::Tokenizer — Hugging Face `tokenizer.json` (BPE models) in C++, id for id equal to HF `tokenizers`.
// Supports byte-level BPE (GPT-2 / Llama 3 / Qwen2-3: Split regex pre-tokenizer via PCRE2 + ByteLevel) and
// SentencePiece-style BPE (Llama 2 / Mistral: Metaspace or Prepend/Replace "▁" normalizers, byte_fallback).
// Added/special tokens are matched before the model runs. Special-token strings and the chat template come
// from the `tokenizer_config.json` next to `tokenizer.json` when there is one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

// What tokenizer_config.json says (all optional; empty when absent).
struct TokenizerConfig {
    std::string bos_token;       // e.g. "<s>", "<|begin_of_text|>"
    std::string eos_token;       // e.g. "</s>", "<|im_end|>", "<|eot_id|>"
    std::string pad_token;
    std::string unk_token;
    std::string chat_template;   // Jinja source; empty when the model has none
    std::optional<bool> add_bos_token;
    std::optional<bool> add_eos_token;
    std::string tokenizer_class;
};

class Tokenizer {
public:
    // `path` is a tokenizer.json file or a model folder that contains one. tokenizer_config.json beside it is
    // read too when present. Throws Error{InvalidInput|Unsupported|Io} naming the file on any problem.
    static Tokenizer load(const std::filesystem::path& path);

    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;
    ~Tokenizer();

    // Encodes UTF-8 text. With add_special_tokens the post-processor's tokens are added (e.g. BOS for
    // Llama); without, the result equals HF `tokenizer.encode(text, add_special_tokens=False)`.
    // Special tokens written inline in the text (e.g. "<|im_end|>") are always recognised, as in HF.
    std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;

    // Decodes ids back to text through the tokenizer's decoder chain (HF `decode`).
    std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

    // Size of the id space: max id + 1 over the model vocabulary and the added tokens.
    int32_t vocab_size() const;
    std::optional<int32_t> token_to_id(std::string_view token) const;
    std::string id_to_token(int32_t id) const;          // empty for unknown ids
    bool is_special(int32_t id) const;                   // added token marked "special"

    const TokenizerConfig& config() const;
    std::optional<int32_t> bos_id() const;               // id of config().bos_token, if any
    std::optional<int32_t> eos_id() const;               // id of config().eos_token, if any
    std::optional<int32_t> pad_id() const;

    // "byte-level BPE" or "SentencePiece BPE" — for `tandem-cli info`.
    std::string kind() const;
    const std::filesystem::path& path() const;           // the tokenizer.json that was loaded

    struct Impl;

private:
    explicit Tokenizer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace tandem
