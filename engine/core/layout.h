// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// ArenaLayout: the byte layout of one arena as named, 256-byte aligned pieces. A plan is a few of these;
// plan() reports their sizes without allocating, load() allocates each once and carves it by the same
// offsets, so what is planned is what is allocated, byte for byte, on every backend.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tandem/error.h"

namespace tandem {

class ArenaLayout {
public:
    static constexpr size_t kAlign = 256;

    // Records a piece of `bytes` and returns its handle.
    int reserve(size_t bytes, std::string name) {
        offsets_.push_back(total_);
        names_.push_back(std::move(name));
        total_ += (bytes + kAlign - 1) / kAlign * kAlign;
        return int(offsets_.size()) - 1;
    }
    size_t size() const { return total_; }
    // Bytes to allocate: size(), at least one alignment unit (an empty arena still gets a valid pointer).
    size_t alloc_size() const { return total_ < kAlign ? kAlign : total_; }
    size_t offset(int handle) const { return offsets_.at(size_t(handle)); }
    const std::string& name(int handle) const { return names_.at(size_t(handle)); }
    int count() const { return int(offsets_.size()); }
    // The piece's pointer inside an allocation of this layout at base; nullptr for handle -1 (not present).
    template <class T>
    T* ptr(void* base, int handle) const {
        if (handle < 0) return nullptr;
        if (base == nullptr) throw_internal("ArenaLayout: piece " + name(handle) + " of an unallocated arena");
        return reinterpret_cast<T*>(static_cast<char*>(base) + offset(handle));
    }

private:
    std::vector<size_t> offsets_;
    std::vector<std::string> names_;
    size_t total_ = 0;
};

}  // namespace tandem
