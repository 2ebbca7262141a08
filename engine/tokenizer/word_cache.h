// WordCache: pre-token -> ids, the BPE model's memo. Encoding spends most of its time looking words up
// here, and the table is larger than the CPU caches, so each entry is one 64-byte cache line holding the
// word and its ids inline: a lookup costs one memory access, not three (slot, key bytes, id list).
// Words longer than kMaxKey bytes or with more than kMaxIds ids are simply not cached (they are rare and
// merge quickly anyway). Sharded, each shard behind its own mutex, so encode() can run on many threads.
// A shard that fills up is cleared: hot words come back at once, and memory stays bounded (~16 MiB).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <vector>

namespace tandem::tok {

class WordCache {
public:
    static constexpr size_t kMaxKey = 30;
    static constexpr size_t kMaxIds = 6;

    // Appends the cached ids of key to out; false when key is not cached.
    bool get(std::string_view key, std::vector<int32_t>& out);
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

    struct Shard {
        std::mutex mutex;
        std::vector<Slot> slots;  // power-of-two size, at most half full
        size_t size = 0;
    };
    static constexpr size_t kShards = 16;
    static constexpr size_t kMaxSlotsPerShard = 16384;

    std::array<Shard, kShards> shards_;
};

}  // namespace tandem::tok
