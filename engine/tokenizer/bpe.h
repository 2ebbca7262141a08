// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The BPE model of tokenizer.json ("model": {"type": "BPE", ...}), merged exactly as HF's `Word::merge_all`:
// symbols start as single characters (with continuing_subword_prefix / end_of_word_suffix, byte_fallback to
// <0xNN> tokens, unk with fuse_unk), then the adjacent pair with the lowest merge rank (leftmost on ties) is
// merged until none is left, driven by a binary heap over a doubly linked symbol list.
// ignore_merges (Llama 3): a pre-token that is itself in the vocabulary is emitted as one id.
// A per-thread word cache (word_cache.h) maps short pre-tokens to their ids; encode() is safe from many
// threads, and the model itself is read-only after loading.
// SentencePiece-style models have no pre-tokenizer, so a whole text is one "word". When no vocabulary
// token contains a "▁" that follows another character, no merge can ever cross the start of a "▁" run, so
// the word is cut there and each part merged (and cached) on its own: the same ids, far less work.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/json_util.h"
#include "tokenizer/string_map.h"
#include "tokenizer/word_cache.h"

namespace tandem::tok {

class BpeModel {
public:
    // j is the "model" object; throws Error{InvalidInput} on malformed vocab/merges.
    static std::unique_ptr<BpeModel> from_json(const Json& j, const Source& src);

    // Appends the ids of one pre-token.
    void tokenize(std::string_view word, std::vector<int32_t>& out) const;

    std::optional<int32_t> token_to_id(std::string_view token) const;
    const std::string* id_to_token(int32_t id) const;  // nullptr for ids outside the vocabulary
    int32_t max_id() const { return static_cast<int32_t>(id_to_token_.size()) - 1; }
    bool byte_fallback() const { return byte_fallback_; }

private:
    void tokenize_part(std::string_view part, WordCache& cache, std::vector<int32_t>& out) const;
    void merge_word(std::string_view word, std::vector<int32_t>& out) const;
    int32_t lookup_symbol(std::string_view piece, bool first, bool last) const;

    FlatStringMap<int32_t> vocab_;
    std::vector<std::string> id_to_token_;
    std::vector<bool> has_id_;
    PairMap merges_;
    std::vector<int32_t> char_ids_;        // code point < 0x10000 -> id of that one-character token, or -1
    std::array<int32_t, 256> byte_ids_{};  // byte -> id of "<0xNN>", or -1
    std::string prefix_;                   // continuing_subword_prefix
    std::string suffix_;                   // end_of_word_suffix
    std::optional<int32_t> unk_id_;
    bool fuse_unk_ = false;
    bool byte_fallback_ = false;
    bool ignore_merges_ = false;
    std::string split_marker_;  // "▁" when words may be cut before each "▁" run (see above)

    uint64_t cache_id_ = WordCache::new_model_id();  // selects this thread's WordCache for this model
};

}  // namespace tandem::tok
