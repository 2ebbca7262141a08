// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Vectorised memory access shared by the CUDA kernels (.cu files only): a pack of W elements of T moved as
// one access of up to 16 bytes, and the host-side alignment test that picks the vector path.
#pragma once

#include <cstdint>

namespace tandem::cuda {

template <class T, int W>
struct alignas(sizeof(T) * W > 16 ? 16 : sizeof(T) * W) Pack {
    T v[W];
};

// p must be aligned to the pack (the callers check aligned16 and the element counts on the host).
template <int W, class T>
__device__ inline Pack<T, W> load_pack(const T* p) {
    return *reinterpret_cast<const Pack<T, W>*>(p);
}
template <int W, class T>
__device__ inline void store_pack(T* p, const Pack<T, W>& x) {
    *reinterpret_cast<Pack<T, W>*>(p) = x;
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace tandem::cuda
