// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// WordCache: pre-token -> ids, the BPE model's memo. Encoding spends most of its time looking words up
// here, and the table is larger than the CPU caches, so each entry is one 64-byte cache line holding the
// word and its ids inline: a lookup costs one memory access, not three (slot, key bytes, id list).
// Words longer than kMaxKey bytes or with more than kMaxIds ids are simply not cached (they are rare and
// merge quickly anyway). A full table is cleared: hot words come back at once and memory stays bounded.
//
// Each thread has its own caches (WordCache::for_model): no locks on the hot path (a mutex cost a fifth
// of encode time) and threads scale freely. A thread keeps caches for its kThreadModels most recently used
// models, keyed by a model id that is never reused, so a destroyed model's cache can never be mistaken
// for a new one's.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace tandem::tok {

class WordCache {
public:
    static constexpr size_t kMaxKey = 30;
    static constexpr size_t kMaxIds = 6;
    static constexpr size_t kMaxSlots = size_t(1) << 17;  // 8 MiB
    static constexpr size_t kThreadModels = 4;

    // This thread's cache for the model with this id (see new_model_id).
    static WordCache& for_model(uint64_t model_id);
    static uint64_t new_model_id();

    // Appends the cached ids of key to out; false when key is not cached.
    bool get(std::string_view key, std::vector<int32_t>& out) const;
    void put(std::string_view key, const int32_t* begin, const int32_t* end);

private:
    struct alignas(64) Slot {
        uint64_t hash = 0;  // 0 marks an empty slot (stored hashes are never 0)
        uint8_t key_len = 0;
        uint8_t n_ids = 0;
        char key[kMaxKey] = {};
        int32_t ids[kMaxIds] = {};
    };
    static_assert(sizeof(Slot) == 64, "a cache entry must be one cache line");

    std::vector<Slot> slots_;  // power-of-two size, at most half full
    size_t size_ = 0;
};

}  // namespace tandem::tok
