// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Added-token extraction (see added_tokens.h).
#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/normalizer.h"
#include "tokenizer/unicode.h"

namespace tandem::tok {

void TokenMatcher::add(std::string_view text, int32_t token_index) {
    if (text.empty()) return;
    int32_t node = 0;
    for (unsigned char b : text) {
        int32_t next = child(node, b);
        if (next < 0) {
            next = static_cast<int32_t>(nodes_.size());
            nodes_.push_back(Node{});
            auto& ch = nodes_[static_cast<size_t>(node)].children;
            ch.insert(std::lower_bound(ch.begin(), ch.end(), std::make_pair(b, int32_t(-1))), {b, next});
        }
        node = next;
    }
    // The first token with a given content wins (contents are unique anyway).
    if (nodes_[static_cast<size_t>(node)].token_index < 0) nodes_[static_cast<size_t>(node)].token_index = token_index;
    first_byte_[static_cast<unsigned char>(text[0])] = true;
}

int32_t TokenMatcher::child(int32_t node, unsigned char b) const {
    const auto& ch = nodes_[static_cast<size_t>(node)].children;
    auto it = std::lower_bound(ch.begin(), ch.end(), std::make_pair(b, int32_t(-1)));
    return it != ch.end() && it->first == b ? it->second : -1;
}

bool TokenMatcher::find(std::string_view s, size_t from, size_t& start, size_t& end, int32_t& token_index) const {
    if (empty()) return false;
    for (size_t i = from; i < s.size(); ++i) {
        if (!first_byte_[static_cast<unsigned char>(s[i])]) continue;
        int32_t node = 0;
        int32_t best = -1;
        size_t best_end = 0;
        for (size_t k = i; k < s.size(); ++k) {
            node = child(node, static_cast<unsigned char>(s[k]));
            if (node < 0) break;
            if (nodes_[static_cast<size_t>(node)].token_index >= 0) {
                best = nodes_[static_cast<size_t>(node)].token_index;
                best_end = k + 1;
            }
        }
        if (best >= 0) {
            start = i;
            end = best_end;
            token_index = best;
            return true;
        }
    }
    return false;
}

void AddedVocabulary::build(const Normalizer* normalizer) {
    raw_ = TokenMatcher();
    normalized_ = TokenMatcher();
    by_id_.clear();
    for (size_t i = 0; i < tokens_.size(); ++i) {
        const AddedToken& t = tokens_[i];
        by_id_.emplace_back(t.id, i);
        if (!t.normalized) {
            raw_.add(t.content, static_cast<int32_t>(i));
        } else {
            std::string content = t.content;
            if (normalizer) normalizer->normalize(content);
            normalized_.add(content, static_cast<int32_t>(i));
        }
    }
    std::sort(by_id_.begin(), by_id_.end());
}

const AddedToken* AddedVocabulary::by_id(int32_t id) const {
    auto it = std::lower_bound(by_id_.begin(), by_id_.end(), std::make_pair(id, size_t(0)));
    return it != by_id_.end() && it->first == id ? &tokens_[it->second] : nullptr;
}

std::optional<int32_t> AddedVocabulary::id_of(std::string_view content) const {
    const size_t* index = by_content_.find(content);
    if (!index) return std::nullopt;
    return tokens_[*index].id;
}

int32_t AddedVocabulary::max_id() const {
    return by_id_.empty() ? -1 : by_id_.back().first;
}

// HF AddedVocabulary::find_matches + split_with_indices, on one piece.
void AddedVocabulary::split_with(const TokenMatcher& matcher, const Piece& piece, Pieces& out) const {
    std::string_view s = piece.text;
    size_t emitted = 0;  // end of what has been emitted so far (HF's start_offset)
    size_t search = 0;   // where the matcher resumes (just after the raw match, as Aho-Corasick does)
    size_t ms = 0, me = 0;
    int32_t index = -1;
    auto emit_text = [&](size_t a, size_t b) {
        if (a >= b) return;
        Piece p;
        p.text.assign(s.substr(a, b - a));
        p.at_start = piece.at_start && a == 0;
        out.push_back(std::move(p));
    };
    while (search < s.size() && matcher.find(s, search, ms, me, index)) {
        search = me;
        const AddedToken& t = tokens_[static_cast<size_t>(index)];
        size_t start = ms, stop = me;
        if (t.single_word) {
            bool space_before = true, space_after = true;
            if (start > 0) {
                size_t j = start;
                space_before = !is_alphanumeric(prev_char(s, j));
            }
            if (stop < s.size()) {
                size_t j = stop;
                space_after = !is_alphanumeric(next_char(s, j));
            }
            if (!space_before || !space_after) continue;
        }
        if (t.lstrip) {
            size_t j = start;
            while (j > 0) {
                size_t k = j;
                if (!is_whitespace(prev_char(s, k))) break;
                j = k;
            }
            start = std::max(j, emitted);
        }
        if (t.rstrip) {
            while (stop < s.size()) {
                size_t k = stop;
                if (!is_whitespace(next_char(s, k))) break;
                stop = k;
            }
        }
        emit_text(emitted, start);
        Piece p;
        p.text.assign(s.substr(start, stop - start));
        p.id = t.id;
        p.at_start = piece.at_start && start == 0;
        out.push_back(std::move(p));
        emitted = stop;
    }
    emit_text(emitted, s.size());
}

void AddedVocabulary::split_raw(std::string_view text, Pieces& out) const {
    Piece whole;
    whole.text.assign(text);
    whole.at_start = true;
    if (raw_.empty()) {
        if (!whole.text.empty()) out.push_back(std::move(whole));
        return;
    }
    split_with(raw_, whole, out);
}

void AddedVocabulary::normalize_and_split(Pieces& pieces, const Normalizer* normalizer) const {
    if (!normalizer && normalized_.empty()) return;
    Pieces out;
    out.reserve(pieces.size());
    for (Piece& p : pieces) {
        if (p.id >= 0) {
            out.push_back(std::move(p));
            continue;
        }
        if (normalizer) normalizer->normalize(p.text);
        if (p.text.empty()) continue;
        if (normalized_.empty())
            out.push_back(std::move(p));
        else
            split_with(normalized_, p, out);
    }
    pieces = std::move(out);
}

}  // namespace tandem::tok
