// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// All-reduce across processes over TCP, summed in global rank order at node 0 (see socket_communicator.h).
// A frame is a 24-byte header (type, element size, sequence number, count) and its payload: the elements
// (kData) or the reason text (kAbort).
#include "train/socket_communicator.h"

#include <algorithm>
#include <cstring>

#include "tandem/error.h"

namespace tandem {

namespace {

constexpr uint32_t kData = 1, kAbort = 2;
constexpr size_t kHeader = 24;

std::string without_prefix(std::string s) {
    const std::string p = "data parallel: ";
    if (s.rfind(p, 0) == 0) s.erase(0, p.size());
    return s;
}

}  // namespace

SocketCommunicator::SocketCommunicator(Rendezvous rv, int local_ranks) : rv_(std::move(rv)), local_(local_ranks) {
    if (local_ < 1) throw_invalid("data parallel: at least one rank per node, got " + std::to_string(local_));
    if (rv_.nodes < 1 || rv_.node_rank < 0 || rv_.node_rank >= rv_.nodes || int(rv_.links.size()) != rv_.nodes)
        throw_internal("data parallel: a socket communicator needs the rendezvous' connections");
    for (int k = 0; k < rv_.nodes; ++k) {
        send_m_.push_back(std::make_unique<std::mutex>());
        const bool needed = rv_.node_rank == 0 ? k != 0 : k == 0;
        if (needed && !rv_.links[size_t(k)].valid())
            throw_internal("data parallel: no connection to " + rv_.describe(k));
    }
    buffers_.assign(size_t(local_), nullptr);
    counts_.assign(size_t(local_), 0);
}

SocketCommunicator::~SocketCommunicator() = default;

void SocketCommunicator::throw_stopped() {
    std::string reason;
    {
        std::lock_guard<std::mutex> lock(m_);
        reason = reason_;
    }
    throw_io("data parallel: stopped (" + without_prefix(reason) + ")");
}

void SocketCommunicator::abort(const std::string& reason) {
    {
        std::lock_guard<std::mutex> lock(m_);
        if (aborted_) return;
        aborted_ = true;
        reason_ = reason;
    }
    aborted_flag_.store(true);
    cv_.notify_all();
    // Tell the connected nodes why, so their error names this node and the cause. A link whose mutex is held
    // is mid-frame (local rank 0's thread, which sees the flag within a poll slice): it gets no message and
    // the node behind it sees the connection close instead.
    const std::string text = without_prefix(reason);
    for (int k = 0; k < rv_.nodes; ++k) {
        if (k == rv_.node_rank || !rv_.links[size_t(k)].valid()) continue;
        std::unique_lock<std::mutex> lock(*send_m_[size_t(k)], std::try_to_lock);
        if (!lock.owns_lock()) continue;
        try {
            std::string h;
            net::put_u32(h, kAbort);
            net::put_u32(h, 1);
            net::put_u64(h, 0);  // an abort matches no collective
            net::put_u64(h, text.size());
            const auto deadline = net::Clock::now() + std::chrono::seconds(1);
            net::send_all(rv_.links[size_t(k)], h.data(), h.size(), deadline, 1, rv_.describe(k), "an abort");
            net::send_all(rv_.links[size_t(k)], text.data(), text.size(), deadline, 1, rv_.describe(k), "an abort");
        } catch (const Error&) {
        }
    }
}

void SocketCommunicator::send_frame(int node, uint32_t type, uint32_t elem, uint64_t count, const void* payload,
                                    size_t bytes, net::Clock::time_point deadline) {
    std::string h;
    net::put_u32(h, type);
    net::put_u32(h, elem);
    net::put_u64(h, seq_);
    net::put_u64(h, count);
    const auto check = [this] {
        if (aborted_flag_.load()) throw_stopped();
    };
    std::lock_guard<std::mutex> lock(*send_m_[size_t(node)]);
    const Socket& s = rv_.links[size_t(node)];
    net::send_all(s, h.data(), h.size(), deadline, rv_.timeout_s, rv_.describe(node), "an all-reduce", check);
    net::send_all(s, payload, bytes, deadline, rv_.timeout_s, rv_.describe(node), "an all-reduce", check);
}

void SocketCommunicator::recv_frame(int node, uint32_t elem, uint64_t count, void* payload,
                                    net::Clock::time_point deadline) {
    const auto check = [this] {
        if (aborted_flag_.load()) throw_stopped();
    };
    const Socket& s = rv_.links[size_t(node)];
    const std::string who = rv_.describe(node);
    char head[kHeader];
    net::recv_all(s, head, kHeader, deadline, rv_.timeout_s, who, "an all-reduce", check);
    std::string_view in(head, kHeader);
    const uint32_t type = net::get_u32(in), their_elem = net::get_u32(in);
    const uint64_t their_seq = net::get_u64(in), their_count = net::get_u64(in);
    if (type == kAbort) {
        std::string text(size_t(std::min<uint64_t>(their_count, 1 << 20)), '\0');
        try {
            net::recv_all(s, text.data(), text.size(), net::Clock::now() + std::chrono::seconds(2), 2, who, "an abort");
        } catch (const Error&) {
            text = "(no reason received)";
        }
        throw_io("data parallel: " + who + " stopped the run: " + text);
    }
    if (type != kData || their_elem != elem || their_seq != seq_ || their_count != count)
        throw_io("data parallel: " + who + " is in another collective (#" + std::to_string(their_seq) + " of " +
                 std::to_string(their_count) + " " + std::to_string(their_elem) + "-byte values) than " +
                 rv_.describe(rv_.node_rank) + " (#" + std::to_string(seq_) + " of " + std::to_string(count) + " " +
                 std::to_string(elem) + "-byte values): the nodes run different steps; start every node with the "
                 "same settings, data and Tandem version");
    net::recv_all(s, payload, size_t(count) * elem, deadline, rv_.timeout_s, who, "an all-reduce", check);
}

template <class T>
void SocketCommunicator::exchange(size_t n) {
    ++seq_;  // an empty collective still travels: it keeps the nodes' sequence numbers in step
    const auto deadline = net::Clock::now() + std::chrono::duration_cast<net::Clock::duration>(
                                                  std::chrono::duration<double>(rv_.timeout_s));
    T* const first = static_cast<T*>(buffers_[0]);
    const size_t per_node = size_t(local_) * n;
    if (rv_.node_rank == 0) {
        // Every other node's ranks, in node order: staging[(k - 1) * per_node + r * n + i].
        staging_.resize(size_t(rv_.nodes - 1) * per_node * sizeof(T));
        T* remote = reinterpret_cast<T*>(staging_.data());
        for (int k = 1; k < rv_.nodes; ++k)
            recv_frame(k, sizeof(T), per_node, remote + size_t(k - 1) * per_node, deadline);
        for (size_t i = 0; i < n; ++i) {
            T s = first[i];
            for (int r = 1; r < local_; ++r) s += static_cast<T*>(buffers_[size_t(r)])[i];
            for (int k = 1; k < rv_.nodes; ++k)
                for (int r = 0; r < local_; ++r) s += remote[size_t(k - 1) * per_node + size_t(r) * n + i];
            for (int r = 0; r < local_; ++r) static_cast<T*>(buffers_[size_t(r)])[i] = s;
        }
        for (int k = 1; k < rv_.nodes; ++k) send_frame(k, kData, sizeof(T), n, first, n * sizeof(T), deadline);
        return;
    }
    if (local_ == 1 || n == 0) {
        send_frame(0, kData, sizeof(T), n, first, n * sizeof(T), deadline);
    } else {
        staging_.resize(per_node * sizeof(T));
        for (int r = 0; r < local_; ++r)
            std::memcpy(staging_.data() + size_t(r) * n * sizeof(T), buffers_[size_t(r)], n * sizeof(T));
        send_frame(0, kData, sizeof(T), per_node, staging_.data(), staging_.size(), deadline);
    }
    recv_frame(0, sizeof(T), n, first, deadline);
    for (int r = 1; r < local_ && n > 0; ++r) std::memcpy(buffers_[size_t(r)], first, n * sizeof(T));
}

template <class T>
void SocketCommunicator::reduce(int rank, T* data, size_t n) {
    const int r = rank - first_rank();
    if (r < 0 || r >= local_)
        throw_internal("data parallel: rank " + std::to_string(rank) + " is not one of " + rv_.describe(rv_.node_rank));
    std::unique_lock<std::mutex> lock(m_);
    if (aborted_) {
        lock.unlock();
        throw_stopped();
    }
    buffers_[size_t(r)] = data;
    counts_[size_t(r)] = n;
    const uint64_t gen = generation_;
    ++arrived_;
    if (r != 0) {  // local rank 0's thread does the exchange; the others wait for it
        cv_.notify_all();
        cv_.wait(lock, [&] { return generation_ != gen || aborted_; });
        if (generation_ == gen) {
            lock.unlock();
            throw_stopped();
        }
        return;
    }
    cv_.wait(lock, [&] { return arrived_ == local_ || aborted_; });
    if (aborted_) {
        lock.unlock();
        throw_stopped();
    }
    for (int i = 1; i < local_; ++i)
        if (counts_[size_t(i)] != n) {
            lock.unlock();
            const std::string why = "local ranks disagree on a collective's size (" + std::to_string(n) + " vs " +
                                    std::to_string(counts_[size_t(i)]) + ")";
            abort(why);
            throw_internal("data parallel: " + why);
        }
    lock.unlock();
    try {
        exchange<T>(n);
    } catch (const Error& e) {
        abort(std::string(e.what()));
        throw;
    }
    lock.lock();
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
}

void SocketCommunicator::all_reduce_sum(int rank, float* data, size_t n) { reduce(rank, data, n); }
void SocketCommunicator::all_reduce_sum(int rank, double* data, size_t n) { reduce(rank, data, n); }

}  // namespace tandem
