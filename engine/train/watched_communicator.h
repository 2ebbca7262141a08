// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// A communicator across processes whose collectives run elsewhere (NCCL on the GPUs), with the rendezvous'
// TCP connections kept open beside it so a node that dies or fails stops every other node at once, never a hang:
// tandem-cli train --device cuda --nodes.
// Decisions a reader must know:
//  - Why: NCCL notices a dead peer late or never (its peer-to-peer transports keep waiting on GPU memory the
//    dead process mapped), and a rank waiting in an all-reduce blocks its process. The TCP links of the
//    rendezvous (a star around node 0) are watched by one thread (poll, 100 ms slices): a link that closes
//    without a goodbye (the process was killed or crashed) or that brings an abort message aborts the inner
//    communicator (ncclCommAbort ends the kernels that wait for a peer) with a reason naming the node rank; the
//    trainer then stops with that error. Node 0 relays: it tells every other node, so a node whose only link
//    is to node 0 learns of any node's failure.
//  - abort(reason) (a rank's failure, the trainer's) aborts the inner communicator and sends the reason to the
//    connected nodes. A normal end sends a goodbye (the destructor, when nothing was aborted): a node that
//    finishes first must not stop the others, which may still be completing the last step.
//  - Messages on a link: one type byte ('B' goodbye, 'A' abort) and, for an abort, a little-endian u32 length
//    and the reason. Nothing else travels on the links after the rendezvous.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "train/communicator.h"
#include "train/rendezvous.h"

namespace tandem {

class WatchedCommunicator final : public Communicator {
public:
    // inner: this process's share of the world (its collectives); rv: this node's rendezvous connections.
    WatchedCommunicator(std::unique_ptr<Communicator> inner, Rendezvous rv);
    ~WatchedCommunicator() override;  // a goodbye to the connected nodes unless aborted; then the inner one goes

    int size() const override { return inner_->size(); }
    int first_rank() const override { return inner_->first_rank(); }
    int local_size() const override { return inner_->local_size(); }
    void all_reduce_sum(int rank, float* data, size_t n) override { inner_->all_reduce_sum(rank, data, n); }
    void all_reduce_sum(int rank, double* data, size_t n) override { inner_->all_reduce_sum(rank, data, n); }
    void abort(const std::string& reason) override;
    void check() override { inner_->check(); }
    bool on_device() const override { return inner_->on_device(); }
    void all_reduce_sum_device(int rank, float* data, size_t n, void* stream) override {
        inner_->all_reduce_sum_device(rank, data, n, stream);
    }
    void all_reduce_sum_device(int rank, double* data, size_t n, void* stream) override {
        inner_->all_reduce_sum_device(rank, data, n, stream);
    }
    std::string transport() const override { return inner_->transport(); }

private:
    void watch();                                       // the watching thread
    void tell(char type, const std::string& reason);    // to every connected node that has not said goodbye

    std::unique_ptr<Communicator> inner_;
    Rendezvous rv_;
    std::vector<char> gone_;  // [node] its link closed or said goodbye (watch thread; tell reads it under m_)
    std::mutex m_;
    std::atomic<bool> aborted_{false};
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

}  // namespace tandem
