// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// WordCache (see word_cache.h).
#include "tokenizer/word_cache.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <memory>

#include "tokenizer/string_map.h"

namespace tandem::tok {

uint64_t WordCache::new_model_id() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
}

WordCache& WordCache::for_model(uint64_t model_id) {
    struct Entry {
        uint64_t model_id = 0;
        std::unique_ptr<WordCache> cache;
    };
    thread_local std::array<Entry, kThreadModels> entries;  // most recently used first
    if (entries[0].model_id == model_id) return *entries[0].cache;
    auto it = std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.model_id == model_id; });
    if (it == entries.end()) {
        it = entries.end() - 1;  // evict the least recently used
        it->model_id = model_id;
        it->cache = std::make_unique<WordCache>();
    }
    std::rotate(entries.begin(), it, it + 1);
    return *entries[0].cache;
}

bool WordCache::get(std::string_view key, std::vector<int32_t>& out) const {
    if (key.size() > kMaxKey || slots_.empty()) return false;
    uint64_t h = hash_bytes(key) | 1;
    size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        const Slot& s = slots_[i];
        if (s.hash == 0) return false;
        if (s.hash == h && s.key_len == key.size() && std::memcmp(s.key, key.data(), key.size()) == 0) {
            out.insert(out.end(), s.ids, s.ids + s.n_ids);
            return true;
        }
    }
}

void WordCache::put(std::string_view key, const int32_t* begin, const int32_t* end) {
    size_t n = static_cast<size_t>(end - begin);
    if (key.size() > kMaxKey || n > kMaxIds) return;
    uint64_t h = hash_bytes(key) | 1;
    if ((size_ + 1) * 2 > slots_.size()) {
        if (slots_.size() >= kMaxSlots) {
            std::fill(slots_.begin(), slots_.end(), Slot{});  // full: start over
            size_ = 0;
        } else {
            std::vector<Slot> old = std::move(slots_);
            slots_.assign(old.empty() ? 1024 : old.size() * 2, Slot{});
            size_t mask = slots_.size() - 1;
            for (const Slot& s : old) {
                if (s.hash == 0) continue;
                size_t i = s.hash & mask;
                while (slots_[i].hash != 0) i = (i + 1) & mask;
                slots_[i] = s;
            }
        }
    }
    size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        Slot& s = slots_[i];
        if (s.hash == h && s.key_len == key.size() && std::memcmp(s.key, key.data(), key.size()) == 0) return;
        if (s.hash != 0) continue;
        s.hash = h;
        s.key_len = static_cast<uint8_t>(key.size());
        s.n_ids = static_cast<uint8_t>(n);
        std::memcpy(s.key, key.data(), key.size());
        std::copy(begin, end, s.ids);
        ++size_;
        return;
    }
}

}  // namespace tandem::tok
