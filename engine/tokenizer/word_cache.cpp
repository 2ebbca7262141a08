// WordCache (see word_cache.h).
#include "tokenizer/word_cache.h"

#include <cstring>

#include "tokenizer/string_map.h"

namespace tandem::tok {

bool WordCache::get(std::string_view key, std::vector<int32_t>& out) {
    if (key.size() > kMaxKey) return false;
    uint64_t h = hash_bytes(key) | 1;
    Shard& shard = shards_[(h >> 59) % kShards];
    std::lock_guard<std::mutex> lock(shard.mutex);
    if (shard.slots.empty()) return false;
    size_t mask = shard.slots.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        const Slot& s = shard.slots[i];
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
    Shard& shard = shards_[(h >> 59) % kShards];
    std::lock_guard<std::mutex> lock(shard.mutex);
    if ((shard.size + 1) * 2 > shard.slots.size()) {
        if (shard.slots.size() >= kMaxSlotsPerShard) {
            shard.slots.assign(shard.slots.size(), Slot{});  // full: start over
            shard.size = 0;
        } else {
            std::vector<Slot> old = std::move(shard.slots);
            shard.slots.assign(old.empty() ? 256 : old.size() * 2, Slot{});
            size_t mask = shard.slots.size() - 1;
            for (const Slot& s : old) {
                if (s.hash == 0) continue;
                size_t i = s.hash & mask;
                while (shard.slots[i].hash != 0) i = (i + 1) & mask;
                shard.slots[i] = s;
            }
        }
    }
    size_t mask = shard.slots.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        Slot& s = shard.slots[i];
        if (s.hash == h && s.key_len == key.size() && std::memcmp(s.key, key.data(), key.size()) == 0) return;
        if (s.hash != 0) continue;
        s.hash = h;
        s.key_len = static_cast<uint8_t>(key.size());
        s.n_ids = static_cast<uint8_t>(n);
        std::memcpy(s.key, key.data(), key.size());
        std::copy(begin, end, s.ids);
        ++shard.size;
        return;
    }
}

}  // namespace tandem::tok
