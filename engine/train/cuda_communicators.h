// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The communicators of data parallelism on GPUs (CUDA plugin only): both sum device memory on the ranks'
// communication streams (Communicator::on_device), so a layer's gradients are summed while the next layer's
// backward runs and the host never waits inside a step.
// Decisions a reader must know:
//  - NcclCommunicator: NCCL, the standard collective library, loaded at run time (dlopen of libnccl.so.2, or the
//    file TANDEM_NCCL_LIBRARY names), so Tandem starts and trains on one GPU where NCCL is not installed; only the
//    handful of NCCL calls below are declared here (NCCL's stable C ABI: ncclUniqueId is 128 bytes, the enums'
//    values are NCCL's). One process holds all its ranks (ncclCommInitAll over distinct GPUs) or one rank of a
//    world across processes (ncclCommInitRank with the unique id node 0 made, carried by the rendezvous). A
//    watchdog thread polls every communicator's asynchronous error every 100 ms and aborts them all on one
//    (ncclCommAbort ends the kernels that wait for a dead peer), so a failure never leaves a rank hanging;
//    check() then reports it. NCCL sums in its own order, the same bits on every rank. NCCL_NVLS_ENABLE is set to
//    0 before NCCL loads unless the environment sets it (NVLink multicast is off where Tandem runs NCCL).
//  - PeerCommunicator: ranks are threads of this process on GPUs that can read each other's memory (peer access),
//    or several ranks on one GPU (how one GPU checks the data-parallel path: NCCL refuses two ranks on one GPU).
//    A collective: each rank records an event on its stream and meets the others at a host barrier (the threads
//    meet; the host does not wait for the device); each stream waits for every rank's event, sums its share of
//    the elements over all ranks' buffers in rank order (kernels/cuda/collective.h) and records a second event; a
//    second barrier, and each stream waits for every share. The sums are HostThreadCommunicator's bits.
//  - Host collectives (all_reduce_sum on host memory): the peer communicator has them (its host barrier); NCCL's
//    device ranks never need them and throw Error{Internal}.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/cuda/owners.h"
#include "train/communicator.h"

namespace tandem::cuda {

// NCCL as loaded (nullptr and why when it cannot be): the library's version as "2.27.3".
struct NcclLibrary;
const NcclLibrary* load_nccl(std::string* why);
std::string nccl_version(const NcclLibrary& lib);

inline constexpr size_t kNcclUniqueIdBytes = 128;

class NcclCommunicator final : public Communicator {
public:
    // One process, its ranks on `devices` (distinct GPUs; rank r on devices[r]). Error{Unsupported} when NCCL
    // cannot be loaded, naming why.
    explicit NcclCommunicator(const std::vector<int>& devices);
    // One rank of a world across processes, on the calling thread's device: unique_id from nccl_unique_id() on
    // node 0, carried to every node.
    NcclCommunicator(int world, int rank, const std::string& unique_id);
    ~NcclCommunicator() override;
    static std::string unique_id();  // a new ncclUniqueId (node 0), kNcclUniqueIdBytes bytes

    int size() const override { return world_; }
    int first_rank() const override { return first_; }
    int local_size() const override { return int(comms_.size()); }
    void all_reduce_sum(int rank, float* data, size_t n) override;
    void all_reduce_sum(int rank, double* data, size_t n) override;
    void abort(const std::string& reason) override;
    void check() override;
    bool on_device() const override { return true; }
    void all_reduce_sum_device(int rank, float* data, size_t n, void* stream) override;
    void all_reduce_sum_device(int rank, double* data, size_t n, void* stream) override;
    std::string transport() const override;

private:
    void start_watchdog();
    void reduce(int rank, void* data, size_t n, int type, void* stream);

    const NcclLibrary* lib_ = nullptr;
    int world_ = 1, first_ = 0;
    std::vector<void*> comms_;  // ncclComm_t per local rank
    std::mutex m_;
    std::condition_variable idle_;  // in_flight_ dropped
    int in_flight_ = 0;             // reduce() calls inside NCCL now (abort waits for them)
    std::atomic<bool> aborted_{false};
    std::string reason_;
    std::atomic<bool> stop_{false};
    std::thread watchdog_;
};

class PeerCommunicator final : public Communicator {
public:
    // Rank r on devices[r] (an index may repeat). Error{Unsupported} when two of the GPUs cannot reach each
    // other's memory (then NCCL is the way).
    explicit PeerCommunicator(const std::vector<int>& devices);
    int size() const override { return host_.size(); }
    void all_reduce_sum(int rank, float* data, size_t n) override { host_.all_reduce_sum(rank, data, n); }
    void all_reduce_sum(int rank, double* data, size_t n) override { host_.all_reduce_sum(rank, data, n); }
    void abort(const std::string& reason) override { host_.abort(reason); }
    bool on_device() const override { return true; }
    void all_reduce_sum_device(int rank, float* data, size_t n, void* stream) override;
    void all_reduce_sum_device(int rank, double* data, size_t n, void* stream) override;
    std::string transport() const override { return "peer"; }

private:
    template <class T>
    void reduce(int rank, T* data, size_t n, cudaStream_t s);

    struct Slot {
        Event ready, done;  // made on the rank's thread (its device) at its first collective
        void* data = nullptr;
        size_t n = 0;
    };
    HostThreadCommunicator host_;
    std::vector<Slot> slots_;
};

}  // namespace tandem::cuda
