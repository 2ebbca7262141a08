// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Tokenizer::Impl: the loaded pipeline. Encode runs, per HF `tokenizers`:
//   added tokens (raw text) -> normalizer per span -> added tokens (normalized) -> pre-tokenizer
//   -> BPE per pre-token -> post-processor (only with add_special_tokens).
// Decode maps ids to token strings (added tokens first), drops special ones when asked, then runs the
// decoder chain. Everything here is immutable after load except the BPE word cache, which is locked.
#pragma once

#include <filesystem>
#include <memory>

#include "tandem/tokenizer.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"

namespace tandem {

struct Tokenizer::Impl {
    std::filesystem::path path;
    TokenizerConfig config;
    std::unique_ptr<tok::BpeModel> model;
    tok::AddedVocabulary added;
    std::unique_ptr<tok::Normalizer> normalizer;
    std::unique_ptr<tok::PreTokenizer> pre_tokenizer;
    std::unique_ptr<tok::PostProcessor> post_processor;
    std::unique_ptr<tok::Decoder> decoder;
    bool byte_level = false;
    bool sentencepiece_style = false;
    int32_t vocab_size = 0;
};

namespace tok {

// Reads tokenizer_config.json (bos/eos/pad/unk, chat template, add_bos/eos_token, tokenizer_class).
// Throws Error{InvalidInput} naming the file when it is not valid JSON or a field has the wrong type.
TokenizerConfig read_tokenizer_config(const std::filesystem::path& path);

// Builds the pipeline from a parsed tokenizer.json.
std::unique_ptr<Tokenizer::Impl> build_tokenizer(const Json& root, const std::filesystem::path& path);

}  // namespace tok
}  // namespace tandem
