// Hash containers used by the tokenizer: a string -> id map that can be probed with string_view (no
// temporary strings on the hot path) and an open-addressing map from a pair of ids to a merge.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tandem::tok {

struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

template <class V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

// (left id, right id) -> (rank, merged id). Linear probing over a power-of-two table; ids are >= 0, so the
// all-ones key marks an empty slot. Read-only after building, hence safe to share between threads.
class PairMap {
public:
    struct Value {
        uint32_t rank;
        int32_t new_id;
    };

    void reserve(size_t n) {
        size_t cap = 16;
        while (cap < n * 2) cap <<= 1;
        keys_.assign(cap, kEmpty);
        values_.assign(cap, Value{0, -1});
        mask_ = cap - 1;
        size_ = 0;
    }

    // Inserts or overwrites (HF keeps the last of duplicate merges).
    void put(int32_t a, int32_t b, Value v) {
        if ((size_ + 1) * 2 > keys_.size()) grow();
        uint64_t key = make_key(a, b);
        size_t i = slot(key);
        while (keys_[i] != kEmpty && keys_[i] != key) i = (i + 1) & mask_;
        if (keys_[i] == kEmpty) ++size_;
        keys_[i] = key;
        values_[i] = v;
    }

    const Value* get(int32_t a, int32_t b) const {
        if (keys_.empty()) return nullptr;
        uint64_t key = make_key(a, b);
        for (size_t i = slot(key);; i = (i + 1) & mask_) {
            if (keys_[i] == key) return &values_[i];
            if (keys_[i] == kEmpty) return nullptr;
        }
    }

    size_t size() const { return size_; }

private:
    static constexpr uint64_t kEmpty = ~uint64_t(0);
    static uint64_t make_key(int32_t a, int32_t b) {
        return (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
    }
    size_t slot(uint64_t key) const {
        key ^= key >> 29;
        key *= 0xbf58476d1ce4e5b9ULL;
        key ^= key >> 32;
        return static_cast<size_t>(key) & mask_;
    }
    void grow() {
        std::vector<uint64_t> old_keys = std::move(keys_);
        std::vector<Value> old_values = std::move(values_);
        reserve(old_keys.empty() ? 8 : old_keys.size());
        for (size_t i = 0; i < old_keys.size(); ++i)
            if (old_keys[i] != kEmpty) put(int32_t(old_keys[i] >> 32), int32_t(old_keys[i] & 0xffffffffu), old_values[i]);
    }

    std::vector<uint64_t> keys_;
    std::vector<Value> values_;
    size_t mask_ = 0;
    size_t size_ = 0;
};

}  // namespace tandem::tok
