// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// BPE model (see bpe.h).
#include "tokenizer/bpe.h"

#include <algorithm>
#include <cstdio>

#include "core/utf8.h"

namespace tandem::tok {

namespace {

constexpr int32_t kMaxId = (1 << 26) - 1;  // guards the id -> token table against absurd ids

struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    bool alive;
};

struct Candidate {
    uint32_t rank;
    int32_t pos;
    int32_t new_id;
};

// Heap order: the lowest rank first, then the leftmost position (HF's Merge ordering).
struct LaterCandidate {
    bool operator()(const Candidate& a, const Candidate& b) const {
        return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
    }
};

// True when s[..p) ends with marker.
bool preceded_by(std::string_view s, size_t p, std::string_view marker) {
    return p >= marker.size() && s.compare(p - marker.size(), marker.size(), marker) == 0;
}

}  // namespace

std::unique_ptr<BpeModel> BpeModel::from_json(const Json& j, const Source& src) {
    auto m = std::make_unique<BpeModel>();
    const Json& vocab = require(j, "vocab", src, "model");
    if (!vocab.is_object()) throw_bad_field(src, "model.vocab", "must be an object mapping tokens to ids");
    m->vocab_.reserve(vocab.size());
    int32_t max_id = -1;
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
        if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 || it.value().get<int64_t>() > kMaxId)
            throw_bad_field(src, "model.vocab[\"" + it.key() + "\"]",
                            "the id must be an integer in 0.." + std::to_string(kMaxId));
        int32_t id = static_cast<int32_t>(it.value().get<int64_t>());
        m->vocab_.put(it.key(), id);
        max_id = std::max(max_id, id);
    }
    m->id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
    m->has_id_.assign(static_cast<size_t>(max_id + 1), false);
    m->vocab_.for_each([&](std::string_view token, int32_t id) {
        m->id_to_token_[static_cast<size_t>(id)] = std::string(token);
        m->has_id_[static_cast<size_t>(id)] = true;
    });

    m->prefix_ = get_string_or(j, "continuing_subword_prefix", "", src, "model");
    m->suffix_ = get_string_or(j, "end_of_word_suffix", "", src, "model");
    m->fuse_unk_ = get_bool_or(j, "fuse_unk", false, src, "model");
    m->byte_fallback_ = get_bool_or(j, "byte_fallback", false, src, "model");
    m->ignore_merges_ = get_bool_or(j, "ignore_merges", false, src, "model");
    // "dropout" only matters when training a tokenizer; encoding here is always deterministic.
    std::string unk = get_string_or(j, "unk_token", "", src, "model");
    if (!unk.empty()) {
        if (const int32_t* id = m->vocab_.find(unk)) m->unk_id_ = *id;
    }

    // Single-character fast path: most initial symbols are looked up here instead of hashing.
    m->char_ids_.assign(0x10000, -1);
    m->vocab_.for_each([&](std::string_view token, int32_t id) {
        size_t i = 0;
        int32_t cp = utf8::decode(token, i);
        if (cp >= 0 && cp < 0x10000 && i == token.size()) m->char_ids_[static_cast<size_t>(cp)] = id;
    });
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        const int32_t* id = m->vocab_.find(std::string_view(name));
        m->byte_ids_[b] = id ? *id : -1;
    }

    const Json& merges = require(j, "merges", src, "model");
    if (!merges.is_array()) throw_bad_field(src, "model.merges", "must be a list");
    m->merges_.reserve(merges.size());
    std::string left, right;
    for (size_t r = 0; r < merges.size(); ++r) {
        const Json& e = merges[r];
        std::string where = "model.merges[" + std::to_string(r) + "]";
        if (e.is_string()) {
            const std::string& s = e.get_ref<const std::string&>();
            size_t sp = s.find(' ');
            if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
                throw_bad_field(src, where, "a merge must be two tokens separated by one space");
            left.assign(s, 0, sp);
            right.assign(s, sp + 1, std::string::npos);
        } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
            left = e[0].get<std::string>();
            right = e[1].get<std::string>();
        } else {
            throw_bad_field(src, where, "a merge must be \"a b\" or [\"a\", \"b\"]");
        }
        const int32_t* a = m->vocab_.find(left);
        const int32_t* b = m->vocab_.find(right);
        if (!a || !b) throw_bad_field(src, where, "token \"" + (!a ? left : right) + "\" is not in the vocabulary");
        if (m->prefix_.size() > right.size())
            throw_bad_field(src, where, "right token is shorter than continuing_subword_prefix");
        std::string merged = left + right.substr(m->prefix_.size());
        const int32_t* c = m->vocab_.find(merged);
        if (!c) throw_bad_field(src, where, "merged token \"" + merged + "\" is not in the vocabulary");
        m->merges_.put(*a, *b, PairMap::Value{static_cast<uint32_t>(r), *c});
    }

    // Cutting words before "▁" runs is exact only if no token has a "▁" right after another character.
    const std::string marker = "\xE2\x96\x81";
    bool can_split = m->prefix_.empty() && m->suffix_.empty() && m->vocab_.find(marker) != nullptr;
    m->vocab_.for_each([&](std::string_view token, int32_t) {
        for (size_t p = token.find(marker, 1); can_split && p != std::string_view::npos; p = token.find(marker, p + 1))
            if (!preceded_by(token, p, marker)) can_split = false;
    });
    if (can_split) m->split_marker_ = marker;
    return m;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
    const int32_t* id = vocab_.find(token);
    if (!id) return std::nullopt;
    return *id;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !has_id_[static_cast<size_t>(id)]) return nullptr;
    return &id_to_token_[static_cast<size_t>(id)];
}

int32_t BpeModel::lookup_symbol(std::string_view piece, bool first, bool last) const {
    bool add_prefix = !first && !prefix_.empty();
    bool add_suffix = last && !suffix_.empty();
    if (!add_prefix && !add_suffix) {
        size_t i = 0;
        int32_t cp = utf8::decode(piece, i);
        if (cp >= 0 && cp < 0x10000) return char_ids_[static_cast<size_t>(cp)];
        const int32_t* id = vocab_.find(piece);
        return id ? *id : -1;
    }
    std::string key;
    if (add_prefix) key += prefix_;
    key += piece;
    if (add_suffix) key += suffix_;
    const int32_t* id = vocab_.find(key);
    return id ? *id : -1;
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
    if (word.empty()) return;
    WordCache& cache = WordCache::for_model(cache_id_);
    if (split_marker_.empty()) {
        // The word is the unit: the cache holds its final ids, including an ignore_merges vocabulary hit, so
        // hot words cost one lookup in a small table instead of one in the large vocabulary.
        if (cache.get(word, out)) return;
        size_t before = out.size();
        const int32_t* whole = ignore_merges_ ? vocab_.find(word) : nullptr;
        if (whole)
            out.push_back(*whole);
        else
            merge_word(word, out);
        cache.put(word, out.data() + before, out.data() + out.size());
        return;
    }
    if (ignore_merges_) {
        if (const int32_t* id = vocab_.find(word)) {
            out.push_back(*id);
            return;
        }
    }
    // Cut before every "▁" that follows another character (see bpe.h); parts are cached without the
    // ignore_merges shortcut, which applies to whole words only.
    const std::string_view marker = split_marker_;
    size_t part_start = 0;
    for (size_t p = word.find(marker, 1); p != std::string_view::npos; p = word.find(marker, p + 1)) {
        if (preceded_by(word, p, marker)) continue;  // inside a "▁" run
        if (p > part_start) tokenize_part(word.substr(part_start, p - part_start), cache, out);
        part_start = p;
    }
    tokenize_part(word.substr(part_start), cache, out);
}

void BpeModel::tokenize_part(std::string_view part, WordCache& cache, std::vector<int32_t>& out) const {
    if (cache.get(part, out)) return;
    size_t before = out.size();
    merge_word(part, out);
    cache.put(part, out.data() + before, out.data() + out.size());
}

void BpeModel::merge_word(std::string_view w, std::vector<int32_t>& out) const {
    thread_local std::vector<Symbol> symbols;
    thread_local std::vector<Candidate> heap;
    symbols.clear();
    heap.clear();
    auto add = [&](int32_t id) {
        int32_t pos = static_cast<int32_t>(symbols.size());
        symbols.push_back({id, pos - 1, pos + 1, true});
    };

    // 1. Initial symbols, one per character (HF BPE::merge_word).
    bool pending_unk = false;
    for (size_t i = 0; i < w.size();) {
        size_t start = i;
        i += utf8::sequence_length(static_cast<unsigned char>(w[i]));
        if (i > w.size()) i = w.size();
        std::string_view ch = w.substr(start, i - start);
        bool first = start == 0, last = i == w.size();
        int32_t id = lookup_symbol(ch, first, last);
        if (id >= 0) {
            if (pending_unk) {
                add(*unk_id_);
                pending_unk = false;
            }
            add(id);
            continue;
        }
        if (byte_fallback_) {
            // HF falls back on the bytes of the looked-up string, prefix/suffix included.
            std::string key;
            if (!first && !prefix_.empty()) key += prefix_;
            key += ch;
            if (last && !suffix_.empty()) key += suffix_;
            bool ok = true;
            for (unsigned char b : key) ok = ok && byte_ids_[b] >= 0;
            if (ok) {
                for (unsigned char b : key) add(byte_ids_[b]);
                continue;
            }
        }
        if (unk_id_) {
            if (pending_unk && !fuse_unk_) add(*unk_id_);
            pending_unk = true;
        }
    }
    if (pending_unk) add(*unk_id_);
    if (symbols.empty()) return;
    symbols.back().next = -1;

    // 2. Merge the lowest-ranked adjacent pair until none is left.
    for (int32_t p = 0; p + 1 < static_cast<int32_t>(symbols.size()); ++p) {
        if (const PairMap::Value* v = merges_.get(symbols[p].id, symbols[p + 1].id))
            heap.push_back({v->rank, p, v->new_id});
    }
    std::make_heap(heap.begin(), heap.end(), LaterCandidate{});
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), LaterCandidate{});
        Candidate top = heap.back();
        heap.pop_back();
        Symbol& cur = symbols[static_cast<size_t>(top.pos)];
        if (!cur.alive || cur.next < 0) continue;
        Symbol& right = symbols[static_cast<size_t>(cur.next)];
        const PairMap::Value* now = merges_.get(cur.id, right.id);
        if (!now || now->new_id != top.new_id) continue;  // stale: a neighbour changed since it was queued
        cur.id = top.new_id;
        right.alive = false;
        cur.next = right.next;
        if (cur.next >= 0) symbols[static_cast<size_t>(cur.next)].prev = top.pos;
        if (cur.prev >= 0) {
            if (const PairMap::Value* v = merges_.get(symbols[static_cast<size_t>(cur.prev)].id, cur.id)) {
                heap.push_back({v->rank, cur.prev, v->new_id});
                std::push_heap(heap.begin(), heap.end(), LaterCandidate{});
            }
        }
        if (cur.next >= 0) {
            if (const PairMap::Value* v = merges_.get(cur.id, symbols[static_cast<size_t>(cur.next)].id)) {
                heap.push_back({v->rank, top.pos, v->new_id});
                std::push_heap(heap.begin(), heap.end(), LaterCandidate{});
            }
        }
    }
    for (const Symbol& s : symbols)
        if (s.alive) out.push_back(s.id);
}

}  // namespace tandem::tok
