// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Device memory of the CUDA backend: counted allocation and owning buffers (an arena is one DeviceBuffer of
// an ArenaLayout's size, core/layout.h). Every byte the engine takes from the device goes through
// device_alloc, which counts it (live bytes and the high-water mark, for MemoryStats and for checking
// Trainer::plan() against reality) and turns cudaErrorMemoryAllocation into Error{OutOfMemory} naming what
// was being allocated and how much was free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tandem::cuda {

// Raw allocation; `what` names it in the OOM message ("activation arena", "layer 3 weights").
void* device_alloc(size_t bytes, const char* what);
// Emulate a GPU of `bytes` (0: no limit): device_alloc refuses (Error{OutOfMemory}) an allocation that would
// take the device's memory in use (every process, the CUDA context included) past it.
void set_device_memory_limit(uint64_t bytes) noexcept;
void device_free(void* p, size_t bytes) noexcept;

// Bytes currently allocated through device_alloc on a device, and the most ever at once (reset_peak() restarts
// it); device -1: the calling thread's (set_thread_device).
size_t allocated_bytes(int device = -1) noexcept;
size_t peak_allocated_bytes(int device = -1) noexcept;
void reset_peak(int device = -1) noexcept;

// Pinned host memory (cudaHostAlloc), counted separately.
void* pinned_alloc(size_t bytes, const char* what);
void pinned_free(void* p, size_t bytes) noexcept;
size_t pinned_bytes() noexcept;

// Owning device buffer (move-only).
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    DeviceBuffer(size_t bytes, const char* what);
    DeviceBuffer(DeviceBuffer&& o) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    ~DeviceBuffer();
    void reset() noexcept;
    void* data() const { return p_; }
    template <class T> T* as() const { return static_cast<T*>(p_); }
    size_t bytes() const { return n_; }

private:
    void* p_ = nullptr;
    size_t n_ = 0;
};

}  // namespace tandem::cuda
