// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Collectives between the ranks of a data-parallel run (train/data_parallel.h).
// Decisions a reader must know:
//  - A Communicator is the one thing data parallelism needs from a transport: an all-reduce (sum) that every
//    rank calls with its own buffer, in the same order on every rank. The engine's transport for GPUs is meant
//    to be NCCL (per-layer buckets on a communication stream); HostThreadCommunicator is the transport of ranks
//    that are threads of one process with their tensors in host memory: the CPU backend, which is how CI
//    checks data parallelism without GPUs.
//  - Determinism: the sum is taken in rank order 0..N-1 for every element, so every rank receives the same
//    bits, and a run's result depends only on the rank count, never on thread timing (NCCL's sums are in its
//    own order, the same on every rank).
//  - Device collectives (on_device()): the GPU transports (train/cuda_communicators.h: NCCL, or the peer
//    communicator for ranks on GPUs of one process) also sum device memory, enqueued on a stream of the rank's
//    device without the host waiting; the model's runtime calls them as each layer's gradients become final.
//  - Failure: abort(reason) wakes every rank waiting in (or later entering) a collective with
//    Error{Internal} naming the reason, so one failing rank stops the run instead of hanging the others.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

namespace tandem {

class Communicator {
public:
    virtual ~Communicator() = default;
    virtual int size() const = 0;  // ranks in the world
    // The ranks of this process: first_rank() .. first_rank() + local_size() - 1. A communicator across
    // processes (SocketCommunicator) holds only a share of the world; an in-process one holds all of it.
    virtual int first_rank() const { return 0; }
    virtual int local_size() const { return size(); }
    // Collective: every rank r in [0, size()) calls it with its own n values; on return each holds their sum.
    // The sum of every element is taken in rank order 0..size()-1, whatever the transport, so a world of N
    // ranks gives the same bits whether its ranks are threads or processes.
    virtual void all_reduce_sum(int rank, float* data, size_t n) = 0;
    virtual void all_reduce_sum(int rank, double* data, size_t n) = 0;
    // Makes every pending and later collective throw Error{Internal} with this reason (idempotent).
    virtual void abort(const std::string& reason) = 0;
    // Throws the reason of a failure the transport found on its own (a peer that died, an NCCL error), if any.
    virtual void check() {}
    // Device collectives: the sum over the ranks of n values of device memory at data, in place, enqueued on
    // stream (the rank's cudaStream_t, on the rank's device). Collective like all_reduce_sum, in the same order on
    // every rank. Only a communicator with on_device() implements them (the others throw Error{Internal}).
    virtual bool on_device() const { return false; }
    virtual void all_reduce_sum_device(int rank, float* data, size_t n, void* stream);
    virtual void all_reduce_sum_device(int rank, double* data, size_t n, void* stream);
    // A short name for messages: "threads", "sockets", "nccl 2.27.3", "peer".
    virtual std::string transport() const = 0;
};

class HostThreadCommunicator final : public Communicator {
public:
    explicit HostThreadCommunicator(int ranks);
    int size() const override { return ranks_; }
    void all_reduce_sum(int rank, float* data, size_t n) override;
    void all_reduce_sum(int rank, double* data, size_t n) override;
    void abort(const std::string& reason) override;
    std::string transport() const override { return "threads"; }
    // Every rank waits until all have arrived (throws when aborted): the peer communicator's handshake.
    void barrier();

private:
    template <class T>
    void reduce(int rank, T* data, size_t n);

    const int ranks_;
    std::mutex m_;
    std::condition_variable cv_;
    int arrived_ = 0;
    uint64_t generation_ = 0;
    bool aborted_ = false;
    std::string reason_;
    std::vector<void*> buffers_;  // each rank's buffer of the collective in progress
    size_t n_ = 0;
};

}  // namespace tandem
