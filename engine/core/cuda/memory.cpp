// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Counted device / pinned allocations and the arena (see memory.h).
#include "core/cuda/memory.h"

#include <algorithm>
#include <atomic>

#include "core/cuda/context.h"

namespace tandem::cuda {

namespace {

// Per device (a process may drive several GPUs, one worker thread each).
constexpr int kMaxDevices = 64;
std::atomic<size_t> g_live[kMaxDevices];
std::atomic<size_t> g_peak[kMaxDevices];

int slot_of(int device) { return device < 0 ? thread_device() % kMaxDevices : device % kMaxDevices; }
std::atomic<size_t> g_pinned{0};
std::atomic<uint64_t> g_limit{0};

std::string gib(size_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(1ull << 30));
    return buf;
}

}  // namespace

void set_device_memory_limit(uint64_t bytes) noexcept { g_limit.store(bytes); }

void* device_alloc(size_t bytes, const char* what) {
    if (bytes == 0) return nullptr;
    context();  // the device is selected and usable
    if (const uint64_t limit = g_limit.load()) {
        // An emulated smaller card: what the device has in use (any process, the context included) plus this.
        size_t free_b = 0, total_b = 0;
        TANDEM_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
        const uint64_t used = total_b - free_b;
        if (used + bytes > limit)
            throw Error(ErrorCategory::OutOfMemory,
                        std::string("out of GPU memory allocating ") + gib(bytes) + " for " + what + " (" +
                            gib(used) + " in use of the " + gib(limit) +
                            " budget, vram_budget_gib); lower the token budget (batch_tokens) or the sequence "
                            "length, or use checkpointing 'recompute'");
    }
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        throw Error(ErrorCategory::OutOfMemory,
                    std::string("out of GPU memory allocating ") + gib(bytes) + " for " + what + " (" + gib(free_b) +
                        " free of " + gib(total_b) +
                        "); lower the token budget (batch_tokens) or the sequence length, use checkpointing "
                        "'recompute', or close other programs using the GPU");
    }
    if (e != cudaSuccess) throw_cuda(e, "cudaMalloc", __FILE__, __LINE__);
    const int d = slot_of(context().device);
    const size_t now = g_live[d].fetch_add(bytes) + bytes;
    size_t peak = g_peak[d].load();
    while (now > peak && !g_peak[d].compare_exchange_weak(peak, now)) {
    }
    return p;
}

void device_free(void* p, size_t bytes) noexcept {
    if (!p) return;
    cudaPointerAttributes a{};
    const int d = cudaPointerGetAttributes(&a, p) == cudaSuccess ? slot_of(a.device) : slot_of(-1);
    cudaFree(p);
    g_live[d].fetch_sub(bytes);
}

size_t allocated_bytes(int device) noexcept { return g_live[slot_of(device)].load(); }
size_t peak_allocated_bytes(int device) noexcept { return g_peak[slot_of(device)].load(); }
void reset_peak(int device) noexcept { g_peak[slot_of(device)].store(g_live[slot_of(device)].load()); }

void* pinned_alloc(size_t bytes, const char* what) {
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        throw Error(ErrorCategory::OutOfMemory,
                    std::string("out of pinned host memory allocating ") + gib(bytes) + " for " + what +
                        "; lower memory.host_budget_gib (--host-budget) or the sequence length, or use checkpointing "
                        "'recompute'");
    }
    if (e != cudaSuccess) throw_cuda(e, "cudaHostAlloc", __FILE__, __LINE__);
    g_pinned.fetch_add(bytes);
    return p;
}

void pinned_free(void* p, size_t bytes) noexcept {
    if (!p) return;
    cudaFreeHost(p);
    g_pinned.fetch_sub(bytes);
}

size_t pinned_bytes() noexcept { return g_pinned.load(); }

DeviceBuffer::DeviceBuffer(size_t bytes, const char* what) : p_(device_alloc(bytes, what)), n_(bytes) {}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), n_(o.n_) {
    o.p_ = nullptr;
    o.n_ = 0;
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
        reset();
        p_ = o.p_;
        n_ = o.n_;
        o.p_ = nullptr;
        o.n_ = 0;
    }
    return *this;
}
DeviceBuffer::~DeviceBuffer() { reset(); }
void DeviceBuffer::reset() noexcept {
    device_free(p_, n_);
    p_ = nullptr;
    n_ = 0;
}

}  // namespace tandem::cuda
