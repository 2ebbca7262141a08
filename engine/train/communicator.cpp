// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Collectives between data-parallel ranks (see communicator.h).
#include "train/communicator.h"

#include <algorithm>
#include <array>

#include "kernels/cpu/collective.h"
#include "tandem/error.h"

namespace tandem {

HostThreadCommunicator::HostThreadCommunicator(int ranks) : ranks_(ranks), buffers_(size_t(std::max(ranks, 1))) {
    if (ranks < 1) throw_invalid("data parallel: at least one rank, got " + std::to_string(ranks));
    if (ranks > cpu::kMaxCollectiveRanks)
        throw_invalid("data parallel: at most " + std::to_string(cpu::kMaxCollectiveRanks) + " ranks in one process, got " +
                      std::to_string(ranks));
}

void HostThreadCommunicator::abort(const std::string& reason) {
    {
        std::lock_guard<std::mutex> lock(m_);
        if (aborted_) return;
        aborted_ = true;
        reason_ = reason;
    }
    cv_.notify_all();
}

void HostThreadCommunicator::barrier() {
    std::unique_lock<std::mutex> lock(m_);
    if (aborted_) throw_internal("data parallel: stopped (" + reason_ + ")");
    const uint64_t gen = generation_;
    if (++arrived_ == ranks_) {
        arrived_ = 0;
        ++generation_;
        cv_.notify_all();
        return;
    }
    cv_.wait(lock, [&] { return generation_ != gen || aborted_; });
    if (generation_ == gen) throw_internal("data parallel: stopped (" + reason_ + ")");
}

template <class T>
void HostThreadCommunicator::reduce(int rank, T* data, size_t n) {
    if (rank < 0 || rank >= ranks_) throw_internal("data parallel: rank " + std::to_string(rank) + " of " + std::to_string(ranks_));
    if (ranks_ == 1) return;
    {
        std::lock_guard<std::mutex> lock(m_);
        buffers_[size_t(rank)] = data;
        if (rank == 0) n_ = n;
    }
    barrier();  // every rank's buffer is registered
    {
        std::lock_guard<std::mutex> lock(m_);
        if (n_ != n) {
            aborted_ = true;
            reason_ = "ranks disagree on a collective's size (" + std::to_string(n) + " vs " + std::to_string(n_) + ")";
            cv_.notify_all();
            throw_internal("data parallel: " + reason_);
        }
    }
    // Rank r sums its share of the elements in rank order and writes the sum into every rank's buffer.
    const size_t per = (n + size_t(ranks_) - 1) / size_t(ranks_), lo = std::min(n, per * size_t(rank)),
                 hi = std::min(n, lo + per);
    std::array<T*, cpu::kMaxCollectiveRanks> bufs{};
    for (int r = 0; r < ranks_; ++r) bufs[size_t(r)] = static_cast<T*>(buffers_[size_t(r)]);
    cpu::sum_ranks(bufs.data(), ranks_, lo, hi);
    barrier();  // every share is written before any rank goes on (and before the buffers are reused)
}

void Communicator::all_reduce_sum_device(int, float*, size_t, void*) {
    throw_internal("data parallel: the " + transport() + " transport has no device collectives");
}
void Communicator::all_reduce_sum_device(int, double*, size_t, void*) {
    throw_internal("data parallel: the " + transport() + " transport has no device collectives");
}

void HostThreadCommunicator::all_reduce_sum(int rank, float* data, size_t n) { reduce(rank, data, n); }
void HostThreadCommunicator::all_reduce_sum(int rank, double* data, size_t n) { reduce(rank, data, n); }

}  // namespace tandem
