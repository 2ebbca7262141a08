// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Added tokens ("added_tokens" of tokenizer.json): special tokens such as <|im_end|> and extra tokens such
// as <think>. Like HF's AddedVocabulary they are cut out of the text before the model sees it:
//  1. tokens with normalized=false are matched in the raw text;
//  2. each remaining span is normalized, then tokens with normalized=true are matched in it (their
//     content normalized the same way).
// Matching is leftmost-longest (HF uses Aho-Corasick with LeftmostLongest) and honours single_word (no
// alphanumeric character on either side), lstrip (swallow whitespace to the left) and rstrip (to the right).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/json_util.h"
#include "tokenizer/piece.h"
#include "tokenizer/string_map.h"

namespace tandem::tok {

class Normalizer;

struct AddedToken {
    std::string content;
    int32_t id = -1;
    bool special = false;
    bool single_word = false;
    bool lstrip = false;
    bool rstrip = false;
    bool normalized = false;
};

// Leftmost-longest matcher over a set of byte strings (a byte trie).
class TokenMatcher {
public:
    void add(std::string_view text, int32_t token_index);
    bool empty() const { return nodes_.size() <= 1; }
    // Finds the leftmost-longest match at or after `from`; returns false when there is none.
    bool find(std::string_view s, size_t from, size_t& start, size_t& end, int32_t& token_index) const;

private:
    struct Node {
        std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
        int32_t token_index = -1;
    };
    int32_t child(int32_t node, unsigned char b) const;
    std::vector<Node> nodes_{Node{}};
    bool first_byte_[256] = {};
};

class AddedVocabulary {
public:
    // Reads the "added_tokens" list. `model_id` gives the model's id for a content already in the model
    // vocabulary (HF reuses it).
    template <class ModelLookup>
    void load(const Json& list, const Source& src, ModelLookup&& model_id);
    // Builds the two matchers; the normalizer (may be null) normalizes contents of normalized tokens.
    void build(const Normalizer* normalizer);

    // Step 1: splits the raw text into pieces; matched tokens get their id.
    void split_raw(std::string_view text, Pieces& out) const;
    // Step 2: normalizes every piece without an id and splits it on normalized tokens.
    void normalize_and_split(Pieces& pieces, const Normalizer* normalizer) const;

    const AddedToken* by_id(int32_t id) const;
    std::optional<int32_t> id_of(std::string_view content) const;
    bool is_special_content(std::string_view content) const { return special_contents_.find(content) != nullptr; }
    const std::vector<AddedToken>& tokens() const { return tokens_; }
    int32_t max_id() const;

private:
    void split_with(const TokenMatcher& matcher, const Piece& piece, Pieces& out) const;

    std::vector<AddedToken> tokens_;
    FlatStringMap<size_t> by_content_;
    std::vector<std::pair<int32_t, size_t>> by_id_;  // sorted by id
    FlatStringMap<bool> special_contents_;
    TokenMatcher raw_;
    TokenMatcher normalized_;
};

template <class ModelLookup>
void AddedVocabulary::load(const Json& list, const Source& src, ModelLookup&& model_id) {
    if (list.is_null()) return;
    if (!list.is_array()) throw_bad_field(src, "added_tokens", "must be a list");
    for (size_t i = 0; i < list.size(); ++i) {
        std::string where = "added_tokens[" + std::to_string(i) + "]";
        const Json& e = list[i];
        AddedToken t;
        t.content = get_string(e, "content", src, where);
        int64_t id = get_int(e, "id", src, where);
        if (id < 0 || id > (int64_t(1) << 30)) throw_bad_field(src, where, "\"id\" is out of range");
        t.id = static_cast<int32_t>(id);
        t.special = get_bool_or(e, "special", false, src, where);
        t.single_word = get_bool_or(e, "single_word", false, src, where);
        t.lstrip = get_bool_or(e, "lstrip", false, src, where);
        t.rstrip = get_bool_or(e, "rstrip", false, src, where);
        t.normalized = get_bool_or(e, "normalized", !t.special, src, where);
        if (t.content.empty() || by_content_.find(t.content)) continue;  // HF ignores these too
        if (std::optional<int32_t> mid = model_id(t.content)) t.id = *mid;
        by_content_.put(t.content, tokens_.size());
        if (t.special) special_contents_.put(t.content, true);
        tokens_.push_back(std::move(t));
    }
}

}  // namespace tandem::tok
