// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Scoped owners of CUDA resources (no naked cudaFreeHost / cudaEventDestroy / cudaStreamDestroy): a pinned
// host buffer, an event, a stream of our own, an instantiated graph, and a captured graph until it is
// instantiated. Each is move-only; a default-constructed owner holds nothing.
#pragma once

#include <cstddef>
#include <utility>

#include "core/cuda/context.h"
#include "core/cuda/memory.h"

namespace tandem::cuda {

class PinnedBuffer {
public:
    PinnedBuffer() = default;
    PinnedBuffer(size_t bytes, const char* what) : p_(pinned_alloc(bytes, what)), n_(bytes) {}
    PinnedBuffer(PinnedBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
    PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
        if (this != &o) {
            pinned_free(p_, n_);
            p_ = std::exchange(o.p_, nullptr);
            n_ = std::exchange(o.n_, 0);
        }
        return *this;
    }
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;
    ~PinnedBuffer() { pinned_free(p_, n_); }
    char* data() const { return static_cast<char*>(p_); }

private:
    void* p_ = nullptr;
    size_t n_ = 0;
};

class Event {
public:
    Event() = default;
    static Event make(unsigned flags = cudaEventDefault) {
        Event e;
        TANDEM_CUDA_CHECK(cudaEventCreateWithFlags(&e.e_, flags));
        return e;
    }
    Event(Event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
    Event& operator=(Event&& o) noexcept {
        if (this != &o) {
            if (e_) cudaEventDestroy(e_);
            e_ = std::exchange(o.e_, nullptr);
        }
        return *this;
    }
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    ~Event() {
        if (e_) cudaEventDestroy(e_);
    }
    void record() { record(context().stream); }
    void record(cudaStream_t s) { TANDEM_CUDA_CHECK(cudaEventRecord(e_, s)); }
    // Work queued on s after this call waits for the event's latest record (a device-side wait).
    void wait_on(cudaStream_t s) const { TANDEM_CUDA_CHECK(cudaStreamWaitEvent(s, e_, 0)); }
    cudaEvent_t get() const { return e_; }

private:
    cudaEvent_t e_ = nullptr;
};

// A non-blocking stream of our own (the checkpoint copy stream).
class Stream {
public:
    Stream() = default;
    static Stream make_non_blocking() {
        Stream s;
        TANDEM_CUDA_CHECK(cudaStreamCreateWithFlags(&s.s_, cudaStreamNonBlocking));
        return s;
    }
    Stream(Stream&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
    Stream& operator=(Stream&& o) noexcept {
        if (this != &o) {
            if (s_) cudaStreamDestroy(s_);
            s_ = std::exchange(o.s_, nullptr);
        }
        return *this;
    }
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    ~Stream() {
        if (s_) cudaStreamDestroy(s_);
    }
    cudaStream_t get() const { return s_; }

private:
    cudaStream_t s_ = nullptr;
};

// An instantiated CUDA graph (one captured micro-step). Destroying it while a launch is in flight is
// allowed: CUDA frees it when that launch completes.
class GraphExec {
public:
    GraphExec() = default;
    explicit GraphExec(cudaGraphExec_t e) : e_(e) {}
    GraphExec(GraphExec&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
    GraphExec& operator=(GraphExec&& o) noexcept {
        if (this != &o) {
            if (e_) cudaGraphExecDestroy(e_);
            e_ = std::exchange(o.e_, nullptr);
        }
        return *this;
    }
    GraphExec(const GraphExec&) = delete;
    GraphExec& operator=(const GraphExec&) = delete;
    ~GraphExec() {
        if (e_) cudaGraphExecDestroy(e_);
    }
    cudaGraphExec_t get() const { return e_; }

private:
    cudaGraphExec_t e_ = nullptr;
};

// The captured graph itself, only until it is instantiated.
struct GraphOwner {
    cudaGraph_t g = nullptr;
    GraphOwner() = default;
    GraphOwner(const GraphOwner&) = delete;
    GraphOwner& operator=(const GraphOwner&) = delete;
    ~GraphOwner() {
        if (g) cudaGraphDestroy(g);
    }
};

}  // namespace tandem::cuda
