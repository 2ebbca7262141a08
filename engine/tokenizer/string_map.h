// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Hash containers for the tokenizer's hot path. libstdc++'s unordered_map does not cache hash codes for a
// transparent string hash, so every probe re-hashed the keys of a bucket chain (a third of encode time);
// these open-addressing maps keep each key's 64-bit hash next to it and the key bytes in one arena.
//  - FlatStringMap<V>: string -> V (the vocabulary, added-token contents).
//  - PairMap: (left id, right id) -> (rank, merged id) for BPE merges.
// Both are read-only after building except the cache, which its owner locks.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::tok {

inline uint64_t hash_bytes(std::string_view s) noexcept {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (s.size() * 0xff51afd7ed558ccdULL);
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
        uint64_t k;
        std::memcpy(&k, s.data() + i, 8);
        h = (h ^ k) * 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 31;
    }
    uint64_t k = 0;
    if (i < s.size()) std::memcpy(&k, s.data() + i, s.size() - i);
    h = (h ^ k) * 0x94d049bb133111ebULL;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 32;
    return h;
}

template <class V>
class FlatStringMap {
public:
    size_t size() const { return size_; }

    void reserve(size_t n) {
        if (n * 2 > slots_.size()) rehash(n * 2);
    }

    void clear() {
        for (Slot& s : slots_) s.used = false;
        arena_.clear();
        size_ = 0;
    }

    const V* find(std::string_view key) const { return find_hashed(key, hash_bytes(key)); }

    const V* find_hashed(std::string_view key, uint64_t h) const {
        if (slots_.empty()) return nullptr;
        for (size_t i = h & mask_;; i = (i + 1) & mask_) {
            const Slot& s = slots_[i];
            if (!s.used) return nullptr;
            if (s.hash == h && s.key_len == key.size() &&
                std::memcmp(arena_.data() + s.key_off, key.data(), key.size()) == 0)
                return &s.value;
        }
    }

    // Inserts key -> value, or overwrites the value of an existing key.
    void put(std::string_view key, V value) { put_hashed(key, hash_bytes(key), std::move(value)); }

    void put_hashed(std::string_view key, uint64_t h, V value) {
        if ((size_ + 1) * 2 > slots_.size()) rehash(slots_.empty() ? 16 : slots_.size() * 2);
        for (size_t i = h & mask_;; i = (i + 1) & mask_) {
            Slot& s = slots_[i];
            if (!s.used) {
                s = Slot{h, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size()), std::move(value),
                         true};
                arena_.append(key);
                ++size_;
                return;
            }
            if (s.hash == h && key_of(s) == key) {
                s.value = std::move(value);
                return;
            }
        }
    }

    template <class F>
    void for_each(F&& fn) const {
        for (const Slot& s : slots_)
            if (s.used) fn(key_of(s), s.value);
    }

private:
    struct Slot {
        uint64_t hash = 0;
        uint32_t key_off = 0;
        uint32_t key_len = 0;
        V value{};
        bool used = false;
    };

    std::string_view key_of(const Slot& s) const { return std::string_view(arena_).substr(s.key_off, s.key_len); }

    void rehash(size_t want) {
        size_t cap = 16;
        while (cap < want) cap <<= 1;
        std::vector<Slot> old = std::move(slots_);
        slots_.assign(cap, Slot{});
        mask_ = cap - 1;
        for (Slot& s : old) {
            if (!s.used) continue;
            size_t i = s.hash & mask_;
            while (slots_[i].used) i = (i + 1) & mask_;
            slots_[i] = std::move(s);
        }
    }

    std::vector<Slot> slots_;
    std::string arena_;
    size_t mask_ = 0;
    size_t size_ = 0;
};

// (left id, right id) -> (rank, merged id). Linear probing over a power-of-two table; ids are >= 0, so the
// all-ones key marks an empty slot.
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
    static uint64_t make_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
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
            if (old_keys[i] != kEmpty)
                put(int32_t(old_keys[i] >> 32), int32_t(old_keys[i] & 0xffffffffu), old_values[i]);
    }

    std::vector<uint64_t> keys_;
    std::vector<Value> values_;
    size_t mask_ = 0;
    size_t size_ = 0;
};

}  // namespace tandem::tok
