// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// A Communicator across processes over the rendezvous' TCP connections (train/rendezvous.h): what a
// multi-process data-parallel run on the CPU backend reduces its host gradients with.
// Decisions a reader must know:
//  - A star around node 0: every other node sends its ranks' buffers to node 0, which sums every element in
//    global rank order (node 0's ranks, then node 1's, ...: the order HostThreadCommunicator uses) and sends the
//    sum back. So N processes give exactly the bits of N threads. Node 0's link carries (nodes - 1) times the
//    data, which is fine for LoRA gradients next to CPU compute; GPUs are meant to use NCCL instead.
//  - A process may hold several local ranks (threads): global rank = node_rank * local_ranks + r. They meet
//    in the communicator like HostThreadCommunicator's ranks; local rank 0's thread does the network part.
//  - Every collective carries a sequence number, the element type and count; a node that disagrees (it runs
//    another step) stops the run instead of summing unrelated data.
//  - Failure: abort(reason) wakes the local ranks and sends the reason to the connected nodes, which stop
//    with an error naming the node rank it came from; a closed connection (a killed process) is noticed at
//    once, a silent one after the rendezvous' timeout. Errors are Error{Io}.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "train/communicator.h"
#include "train/rendezvous.h"

namespace tandem {

class SocketCommunicator final : public Communicator {
public:
    // rv: this node's connections (rendezvous()); local_ranks: the ranks each process holds (the same on every
    // node). Collectives give up after rv.timeout_s.
    SocketCommunicator(Rendezvous rv, int local_ranks);
    ~SocketCommunicator() override;

    int size() const override { return rv_.nodes * local_; }
    int first_rank() const override { return rv_.node_rank * local_; }
    int local_size() const override { return local_; }
    void all_reduce_sum(int rank, float* data, size_t n) override;
    void all_reduce_sum(int rank, double* data, size_t n) override;
    void abort(const std::string& reason) override;
    std::string transport() const override { return "sockets"; }

private:
    template <class T>
    void reduce(int rank, T* data, size_t n);
    template <class T>
    void exchange(size_t n);  // local rank 0's thread: the network part of a collective
    void send_frame(int node, uint32_t type, uint32_t elem, uint64_t count, const void* payload, size_t bytes,
                    net::Clock::time_point deadline);
    void recv_frame(int node, uint32_t elem, uint64_t count, void* payload, net::Clock::time_point deadline);
    [[noreturn]] void throw_stopped();

    Rendezvous rv_;
    const int local_;
    std::vector<std::unique_ptr<std::mutex>> send_m_;  // [node] one frame at a time on a link (abort vs leader)
    std::mutex m_;
    std::condition_variable cv_;
    std::atomic<bool> aborted_flag_{false};
    bool aborted_ = false;
    std::string reason_;
    int arrived_ = 0;
    uint64_t generation_ = 0;
    uint64_t seq_ = 0;             // collectives done (local rank 0's thread only)
    std::vector<void*> buffers_;   // [local rank] its buffer in the collective in progress
    std::vector<size_t> counts_;   // [local rank] its element count
    std::vector<unsigned char> staging_;
};

}  // namespace tandem
